"""`python -m bench.ab`: the same load on the code of several source trees, alternating, in one run.

    python -m bench.ab --tree /tmp/old --tree . [--rounds 3] [--requests 200000]
                       [--pipelines 1,16] [--regions 1] [--replay 200000]
                       [--broker kafka [--mirror mm2] --warmup 30000]
    python -m bench.ab --tree . --tree .@STREAMS_EVENT_LOOP=asyncio    (one tree, two settings)
    python -m bench.ab --tree . --tree .@BENCH_SHARDS=4 --broker kafka   (S = 1 beside S = 4)

Why: on a shared machine two runs of the same code differ by up to 1.5x, so a gain is only
shown by running the old commit beside the new one (each tree a checkout, e.g. `git worktree
add /tmp/old <commit>`; a tree's compiled core is used if it has a fresh build), in turn, the
order reversed every round, and comparing medians.

Per tree and round, in a process of that tree (`PYTHONPATH` and cwd the tree):
- XADD: a fresh `LocalTopology` of `--regions` ephemeral regions (liberal IDs, no snapshots),
  `redis-benchmark -c 50 -P p -n N -r 100000 XADD key:__rand_int__ * field value` against r1 for
  each pipeline depth; with several regions also the "replicated" rate: N over the time from
  the start of the run until every other region applied all of r1's ops (CRDT.VECTOR).
- Replay (`--replay N`): N XADDs over 8 keys in pipelines of 1,000, the node killed and started
  again, N over the time until it answers PING (a full replay, process start included).
A tree may carry environment settings for its runs after `@` (`PATH@KEY=VALUE,KEY=VALUE`):
the same code with another setting is then an arm of its own. `BENCH_SHARDS=S` is read by the
XADD run itself: every region of S shards in its one node process (`.@BENCH_SHARDS=4` beside
`.`: S = 4 against S = 1 on the same code).
Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

XADD_RUN = r"""
import os, re, subprocess, sys, time
from topology.local import LocalTopology
pipelines, n, regions = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3])
broker, mirror, warmup = sys.argv[4], sys.argv[5], int(sys.argv[6])
shards = int(os.environ.get("BENCH_SHARDS", "1"))
# Trees older than Apache Kafka support (d653b43) take neither keyword: the light stack is
# what they ran, so the keywords are passed only for another broker or mirror.
stack = {} if (broker, mirror) == ("tansu", "embedded") else {"broker": broker, "mirror": mirror}
with LocalTopology(regions=regions, manual_sync=False, id_mode="liberal", shards=shards,
                   node_args=["--snapshot-every-ops", "0", "--snapshot-every-s", "0"],
                   **stack) as topo:
    if warmup:
        subprocess.run(
            ["redis-benchmark", "-p", str(topo.ports[1]), "-c", "50", "-P", "16", "-n",
             str(warmup), "-r", "100000", "-q", "XADD", "warm:__rand_int__", "*", "f", "v"],
            capture_output=True, check=True)
    for p in pipelines:
        started = time.monotonic()
        out = subprocess.run(
            ["redis-benchmark", "-p", str(topo.ports[1]), "-c", "50", "-P", p, "-n", str(n),
             "-r", "100000", "-q", "XADD", "key:__rand_int__", "*", "field", "value"],
            capture_output=True, text=True, check=True).stdout
        print("RESULT", f"xadd P{p}", re.findall(r"([\d.]+) requests per second", out)[-1])
        if regions > 1:
            target = topo.client(1).execute_command("CRDT.VECTOR")
            while any(topo.client(i).execute_command("CRDT.VECTOR") != target
                      for i in range(2, regions + 1)):
                time.sleep(0.05)
            print("RESULT", f"xadd P{p} replicated", n / (time.monotonic() - started))
"""

REPLAY_RUN = r"""
import sys, time
from topology.local import LocalTopology
n = int(sys.argv[1])
with LocalTopology(regions=1, manual_sync=False, id_mode="liberal",
                   node_args=["--snapshot-every-ops", "0", "--snapshot-every-s", "0"]) as topo:
    client = topo.client(1)
    for start in range(0, n, 1000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(n, start + 1000)):
            pipe.xadd(f"k{i % 8}", {"field": "value", "n": i})
        pipe.execute()
    client.execute_command("CRDT.FLUSH")
    topo.kill_node(1)
    started = time.monotonic()
    topo.start_node(1)
    print("RESULT", "full replay", n / (time.monotonic() - started))
"""

Results = dict[tuple[str, str], list[float]]


def arm(spec: str) -> tuple[Path, dict[str, str]]:
    """`PATH` or `PATH@KEY=VALUE,...`: the tree and the environment settings of its runs."""
    path, _, settings = spec.partition("@")
    env: dict[str, str] = {}
    for item in filter(None, settings.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--tree {spec}: expected PATH@KEY=VALUE[,KEY=VALUE...]")
        env[key] = value
    return Path(path).resolve(), env


def run_in(tree: str, script: str, args: list[str]) -> dict[str, float]:
    """Run `script` with the code of `tree` (an `arm` spec); its `RESULT <figure> <value>`
    lines."""
    path, settings = arm(tree)
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=path,
        env={**os.environ, "PYTHONPATH": str(path), **settings},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if out.returncode:
        raise RuntimeError(f"{tree}: {out.stderr[-2000:]}")
    found = {}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            figure, value = line[len("RESULT ") :].rsplit(" ", 1)
            found[figure] = float(value)
    return found


def load_average() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tree",
        action="append",
        required=True,
        help="a source tree, optionally with settings: PATH@KEY=VALUE,...",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200_000, help="XADDs per run")
    parser.add_argument("--pipelines", default="1,16", help="redis-benchmark -P values")
    parser.add_argument("--regions", type=int, default=1)
    parser.add_argument("--replay", type=int, default=0, help="entries of the replay figure")
    parser.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="the regions' brokers: Tansu in memory (default) or Apache Kafka (durable, as "
        "`streams up` runs it; its jars from scripts/kafka_jars.sh)",
    )
    parser.add_argument(
        "--mirror",
        choices=("embedded", "mm2"),
        default=None,
        help="the mirror between regions (default: mm2 on Apache Kafka, else embedded)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="XADDs (P16) on other keys before the measured runs, so that a fresh JVM has "
        "compiled its hot paths (about 30,000 for Apache Kafka)",
    )
    args = parser.parse_args(argv)
    mirror = args.mirror or ("mm2" if args.broker == "kafka" else "embedded")
    xadd_args = [args.pipelines, str(args.requests), str(args.regions), args.broker, mirror]
    xadd_args.append(str(args.warmup))
    trees = [str(arm(t)[0]) + t[len(t.partition("@")[0]) :] for t in args.tree]
    results: Results = {}
    loads: list[float] = []
    for round_ in range(args.rounds):
        order = trees if round_ % 2 == 0 else trees[::-1]
        for tree in order:
            loads.append(load_average())
            found = run_in(tree, XADD_RUN, xadd_args)
            if args.replay:
                found.update(run_in(tree, REPLAY_RUN, [str(args.replay)]))
            for figure, value in found.items():
                results.setdefault((str(tree), figure), []).append(value)
            print(f"round {round_ + 1}, {tree}: {found}", file=sys.stderr, flush=True)
    print(markdown(results, trees, args, loads))
    return 0


def markdown(
    results: Results, trees: list[str], args: argparse.Namespace, loads: list[float]
) -> str:
    figures = sorted({figure for _tree, figure in results})
    first = str(trees[0])
    lines = [
        f"{args.rounds} rounds, trees alternating (order reversed each round), "
        f"{args.regions} region(s) on {args.broker}, {args.requests:,} requests per XADD run"
        + (f", replay of {args.replay:,} entries" if args.replay else "")
        + f"; 1-minute load average before each run {min(loads):.2f}-{max(loads):.2f}.",
        "",
        "| figure | tree | median | min-max | vs the first tree (median of per-round ratios) |",
        "|---|---|--:|--:|--:|",
    ]
    for figure in figures:
        for tree in map(str, trees):
            values = results.get((tree, figure), [])
            if not values:
                continue
            base = results.get((first, figure), [])
            ratios = [v / b for v, b in zip(values, base, strict=False) if b]
            ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
            lines.append(
                f"| {figure} | {tree} | {statistics.median(values):,.0f} | "
                f"{min(values):,.0f}-{max(values):,.0f} | {ratio} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
