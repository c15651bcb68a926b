"""What an idle topology costs, and who pays it: CPU of the brokers, the nodes and the mirrors.

    python -m bench.idle [--regions 3] [--window 30] [--rounds 2] [--broker tansu|kafka]
                         [--settle 10]

The light stack as `streams demo` and the benchmarks run it (`LocalTopology`, Tansu brokers, the
embedded mirror copying continuously in this process's threads), or with `--broker kafka` the
durable shape `streams up` runs (Apache Kafka brokers, MirrorMaker 2 processes), left alone for
`--window` seconds after a settle (`--settle`, 10 s; the JVMs of `--broker kafka` take a minute
or more to come down to their idle rate: measure them after 60 s or more); per round the percent
of one core used by the brokers, the node processes and the mirror (this process, or the
MirrorMaker 2 JVMs), from /proc (utime + stime). To compare trees, run
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


def _group(pid: int, name: str) -> str:
    """Which part a process of the topology is, by its command line (a JVM's main class)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fp:
            cmdline = fp.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmdline = ""
    if "tansu" in name or "kafka.Kafka" in cmdline:
        return "brokers"
    if "MirrorMaker" in cmdline:
        return "mirror"
    return "nodes"


def _cpu(pids: set[int]) -> dict[str, float]:
    """CPU seconds so far per group: brokers (Tansu or Apache Kafka), nodes, mirror (this
    process: the embedded mirror; or MirrorMaker 2's processes)."""
    groups = {"brokers": 0.0, "nodes": 0.0, "mirror": 0.0}
    for pid, (name, cpu) in tree_processes(os.getpid()).items():
        if pid == os.getpid():
            groups["mirror"] += cpu
        elif pid in pids:
            groups[_group(pid, name)] += cpu
    return groups


def measure(
    regions: int, window: float, broker: str = "tansu", settle: float = SETTLE_S
) -> dict[str, float]:
    """Percent of one core per group over `window` seconds of an idle topology."""
    mirror = "mm2" if broker == "kafka" else "embedded"
    with LocalTopology(regions=regions, manual_sync=False, broker=broker, mirror=mirror):
        time.sleep(settle)
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
    parser.add_argument(
        "--broker",
        choices=("tansu", "kafka"),
        default="tansu",
        help="Tansu with the embedded mirror (the light stack, default) or Apache Kafka with "
        "MirrorMaker 2 (the durable shape; jars from scripts/kafka_jars.sh)",
    )
    parser.add_argument(
        "--settle", type=float, default=SETTLE_S, help="seconds left alone before measuring (10)"
    )
    args = parser.parse_args()
    for round_no in range(1, args.rounds + 1):
        figures = measure(args.regions, args.window, args.broker, args.settle)
        parts = ", ".join(f"{group} {share:.2f} %" for group, share in figures.items())
        load = os.getloadavg()[0]
        print(
            f"round {round_no}: {args.regions} regions on {args.broker} idle: "
            f"{sum(figures.values()):.2f} % of a core ({parts}; load average {load:.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
