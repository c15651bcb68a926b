"""The compiled core against the Python sources, the two alternating in one run (issue 23).

    python3 scripts/build_native.py     # first: the compiled core of this tree
    python -m bench.native [--rounds 3] [--n 200000] [--what xadd,replay,fold] [--out FILE|-]

Each figure is measured in a fresh process (and its nodes) per round and mode: `pure` runs with
STREAMS_PURE=1 (the sources), `compiled` without (the build must be fresh: `streams.native`
falls back to the sources otherwise, and this harness refuses to run then). The order of the
two flips every round, so drift on a shared machine (other tests, other benchmarks) lands on
both. Reported: median, min and max over rounds, and the ratio compiled / pure per round.

- xadd: one region (liberal IDs, no snapshots), `redis-benchmark -c 50 -P 1|16 -n N -r 100000
  XADD key:__rand_int__ * field value`, requests per second;
- replay: N XADDs in pipelines of 1,000 over 8 keys, the node killed and started again: records
  per second of the full replay until it answers PING (process start included);
- fold: in process, N XAdd records of 3 origins decoded (`streams.ops.codec.decode`) and folded
  (`streams.crdt.fold.Fold`), records per second of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.throughput import write_section

ROOT = Path(__file__).resolve().parent.parent
BEGIN_NAME = "native"
MODES = ("pure", "compiled")

_XADD = r"""
import json, re, subprocess, sys
from topology.local import LocalTopology
n = int(sys.argv[1])
out = {}
with LocalTopology(regions=1, manual_sync=False, id_mode="liberal",
                   node_args=["--snapshot-every-ops", "0", "--snapshot-every-s", "0"]) as topo:
    for p in (1, 16):
        run = subprocess.run(["redis-benchmark", "-p", str(topo.ports[1]), "-c", "50", "-P", str(p),
            "-n", str(n), "-r", "100000", "-q", "XADD", "key:__rand_int__", "*", "field", "value"],
            capture_output=True, text=True, check=True)
        out[f"xadd P{p}"] = float(re.findall(r"([\d.]+) requests per second", run.stdout)[-1])
print(json.dumps(out))
"""

_REPLAY = r"""
import json, sys
from bench.restart import fill, restart
from topology.local import LocalTopology
n = int(sys.argv[1])
with LocalTopology(regions=1, manual_sync=False, id_mode="liberal",
                   node_args=["--snapshot-every-ops", "0", "--snapshot-every-s", "0"]) as topo:
    client = topo.client(1)
    fill(client, n)
    client.execute_command("CRDT.FLUSH")
    seconds, records = restart(topo)
print(json.dumps({"replay": records / seconds}))
"""

_FOLD = r"""
import json, sys, time
from streams.crdt import ops
from streams.crdt.fold import Fold
from streams.ids import IdMode
from streams.ops.codec import decode, encode
n = int(sys.argv[1])
seqs = {1: 0, 2: 0, 3: 0}
records = []
for i in range(n):
    o = 1 + i % 3
    seqs[o] += 1
    ctx = tuple(sorted((r, s) for r, s in seqs.items() if r != o and s))
    body = ops.XAdd(b"k%d" % (i % 100), (1_700_000_000_000 + i, o),
                    (b"field", b"value", b"n", str(i).encode()))
    records.append(encode(ops.Op(o, seqs[o], ctx, 1_700_000_000_000 + i, body)))
t0 = time.perf_counter()
decoded = [decode(r) for r in records]
t1 = time.perf_counter()
fold = Fold.fresh(1, IdMode.LIBERAL)
for i, r in enumerate(decoded):
    fold.feed((f"r{r.origin}.oplog", 0), i, r)
fold.finish()
t2 = time.perf_counter()
print(json.dumps({"decode": n / (t1 - t0), "fold": n / (t2 - t1)}))
"""

SCRIPTS = {"xadd": _XADD, "replay": _REPLAY, "fold": _FOLD}


def _env(mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "STREAMS_PURE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if mode == "pure":
        env["STREAMS_PURE"] = "1"
    return env


def check_compiled() -> None:
    """Refuses to compare anything unless this tree's compiled core loads (fresh build)."""
    probe = "import streams, sys; sys.exit(0 if streams.COMPILED else 1)"
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=_env("compiled"))
    if run.returncode != 0:
        raise SystemExit("bench.native: no fresh compiled core; run scripts/build_native.py")


def run_one(what: str, mode: str, n: int) -> dict[str, float]:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPTS[what], str(n)],
        cwd=ROOT,
        env=_env(mode),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if run.returncode != 0:
        raise RuntimeError(f"{what} ({mode}) failed: {run.stderr[-1500:]}")
    result: dict[str, float] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def measure(
    whats: list[str], rounds: int, n: int
) -> tuple[dict[tuple[str, str], list[float]], list[float]]:
    """Per (figure, mode) the value of each round, and the load average before each run."""
    values: dict[tuple[str, str], list[float]] = {}
    loads = []
    for r in range(rounds):
        order = MODES if r % 2 == 0 else MODES[::-1]
        for what in whats:
            for mode in order:
                loads.append(os.getloadavg()[0])
                started = time.monotonic()
                for figure, value in run_one(what, mode, n).items():
                    values.setdefault((figure, mode), []).append(value)
                took = time.monotonic() - started
                print(f"round {r + 1} {what} {mode}: {took:.0f} s", file=sys.stderr, flush=True)
    return values, loads


def markdown(values: dict[tuple[str, str], list[float]], loads: list[float], n: int) -> str:
    figures = list(dict.fromkeys(figure for figure, _mode in values))
    rounds = len(next(iter(values.values())))
    lines = [
        "| figure | pure: median (min-max) | compiled: median (min-max) | "
        "compiled / pure per round: median (min-max) |",
        "|---|--:|--:|--:|",
    ]
    for figure in figures:
        pure, comp = values[(figure, "pure")], values[(figure, "compiled")]
        ratios = [c / p for p, c in zip(pure, comp, strict=True)]
        cells = [f"{statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})" for v in (pure, comp)]
        ratio = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        lines.append(f"| {figure} | {cells[0]} | {cells[1]} | {ratio} |")
    lines.append("")
    lines.append(
        f"N = {n:,}; {rounds} rounds, pure and compiled alternating (order flipped each round); "
        f"load average before the runs {min(loads):.2f}-{max(loads):.2f}."
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.native", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--what", default="xadd,replay,fold")
    parser.add_argument("--out", default="-", help="page whose bench:native section to replace")
    args = parser.parse_args(argv)
    check_compiled()
    values, loads = measure(args.what.split(","), args.rounds, args.n)
    section = markdown(values, loads, args.n)
    print(section)
    if args.out != "-":
        write_section(Path(args.out), section, name=BEGIN_NAME, at_end=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
