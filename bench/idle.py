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

from bench.pipeline import tree_processes
from topology.local import LocalTopology

SETTLE_S = 10.0
"""Past start-up and the readers' switch to their idle fetch wait (`streams.kafka.reading`)."""


def _cpu(pids: set[int]) -> dict[str, float]:
    """CPU seconds so far per group: brokers (Tansu), nodes, mirror (this process)."""
    groups = {"brokers": 0.0, "nodes": 0.0, "mirror": 0.0}
    for pid, (name, cpu) in tree_processes(os.getpid()).items():
        if pid == os.getpid():
            groups["mirror"] += cpu
        elif pid in pids:
            groups["brokers" if "tansu" in name else "nodes"] += cpu
    return groups


def measure(regions: int, window: float) -> dict[str, float]:
    """Percent of one core per group over `window` seconds of an idle topology."""
    with LocalTopology(regions=regions, manual_sync=False):
        time.sleep(SETTLE_S)
        pids = set(tree_processes(os.getpid())) - {os.getpid()}
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
