"""What an idle topology costs, and who pays it: CPU of the brokers, the nodes and the mirrors.

    python -m bench.idle [--regions 3] [--window 30] [--rounds 2]

The light stack as `streams demo` and the benchmarks run it (`LocalTopology`, Tansu brokers, the
embedded mirror copying continuously in this process's threads), left alone for `--window`
seconds after a 10 s settle; per round the percent of one core used by the Tansu brokers, the
node processes and this process (the mirror), from /proc (utime + stime). To compare trees, run
it with `PYTHONPATH=<tree>` for each (the nodes are started from the same tree). Nothing is
asserted; the numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import os
import time

from topology.local import LocalTopology

SETTLE_S = 10.0
"""Past start-up and the readers' switch to their idle fetch wait (`streams.kafka.reading`)."""


def _stat(pid: int) -> tuple[str, int, float] | None:
    """(command name, parent pid, CPU seconds) of a process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fp:
            data = fp.read()
    except OSError:
        return None
    name = data[data.index("(") + 1 : data.rindex(")")]
    fields = data.rsplit(")", 1)[1].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            parents[int(entry)] = stat[1]
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        found.extend(children)
        frontier.extend(children)
    return found


def _cpu(pids: list[int]) -> dict[str, float]:
    """CPU seconds so far per group: brokers (Tansu), nodes, mirror (this process)."""
    groups = {"brokers": 0.0, "nodes": 0.0, "mirror": 0.0}
    for pid in pids:
        stat = _stat(pid)
        if stat is not None:
            groups["brokers" if "tansu" in stat[0] else "nodes"] += stat[2]
    own = _stat(os.getpid())
    groups["mirror"] = own[2] if own is not None else 0.0
    return groups


def measure(regions: int, window: float) -> dict[str, float]:
    """Percent of one core per group over `window` seconds of an idle topology."""
    with LocalTopology(regions=regions, manual_sync=False):
        time.sleep(SETTLE_S)
        pids = _descendants(os.getpid())
        before, started = _cpu(pids), time.monotonic()
        time.sleep(window)
        after, elapsed = _cpu(pids), time.monotonic() - started
    return {group: 100 * (after[group] - before[group]) / elapsed for group in before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regions", type=int, default=3, help="regions (default 3)")
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured (30)")
    parser.add_argument("--rounds", type=int, default=2, help="topologies started in turn (2)")
    args = parser.parse_args()
    for round_no in range(1, args.rounds + 1):
        figures = measure(args.regions, args.window)
        parts = ", ".join(f"{group} {share:.2f} %" for group, share in figures.items())
        load = os.getloadavg()[0]
        print(
            f"round {round_no}: {args.regions} regions idle: {sum(figures.values()):.2f} % of a "
            f"core ({parts}; load average {load:.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
