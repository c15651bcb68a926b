"""`python -m bench`: XADD throughput of one region as it grows by shards and processes, and of
three regions, next to redis-server and a 2-master Redis Cluster; consumption, replication
latency, idle cost and a py-spy profile at P16 (bench/shards.py). Written to docs/benchmarks.md.

    python -m bench --max-others 0.25 --wait 600   # the full run: 3 rounds, default systems
    python -m bench --quick                # 1 round, 20,000 requests per run: prints only
    python -m bench --only s4n2,redis-cluster,p16   # chosen systems / figures: prints only
    python -m bench --list                 # the systems and figures --only knows
    python -m bench --smoke --out -        # tiny sizes (what tests/bench runs)

A full run writes docs/benchmarks.md unless --out says otherwise; --quick, --only and --smoke
print the section (their figures are partial or not sustained) unless --out names a file.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.shards import BY_ID, DEFAULT_SYSTEMS, FIGURES, Plan, markdown, pick, run
from bench.throughput import redis_version, write_section

QUICK: dict[str, Any] = {
    "rounds": 1,
    "requests": 20_000,
    "consume_entries": 5_000,
    "latency_samples": 50,
    "idle_window": 3.0,
    "profile_seconds": 5.0,
}
"""--quick: every figure once, in minutes; runs too short to be sustained (replication trails)."""
SMOKE: dict[str, Any] = {
    "rounds": 1,
    "requests": 500,
    "consume_entries": 300,
    "systems": ("redis", "redis-cluster", "s4n2", "s4n2-shards", "r3s1"),
    "figures": ("p1", "p16", "consume", "latency", "idle"),
    "latency_samples": 5,
    "latency_rates": (200,),
    "idle_window": 1.0,
}
"""--smoke: each kind of server and client (one process, a cluster of ours under --cluster and
under a client per shard, several regions), tiny sizes, no profile (py-spy is optional)."""


def machine_line() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    find_tansu = "from topology.broker import tansu_binary; print(tansu_binary())"
    found = subprocess.run([sys.executable, "-c", find_tansu], capture_output=True, text=True)
    tansu = found.stdout.strip().rsplit("/", 1)[-1]
    return (
        f"{datetime.date.today().isoformat()}, {platform.machine()}, {cpu}, "
        f"{len(os.sched_getaffinity(0))} cores; Python {platform.python_version()}, "
        f"redis-server {redis_version()}, broker {tansu}."
    )


def plan_of(args: argparse.Namespace) -> Plan:
    systems, figures = pick(args.only) if args.only else (DEFAULT_SYSTEMS, FIGURES)
    plan = Plan(
        rounds=args.rounds,
        requests=args.requests,
        consume_entries=args.consume,
        systems=systems,
        figures=figures,
        latency_samples=args.samples,
        profile_seconds=args.profile_seconds,
        max_load=args.max_load,
        max_others=args.max_others,
        max_wait=args.wait,
    )
    for preset, chosen in ((QUICK, args.quick), (SMOKE, args.smoke)):
        if chosen:
            plan = dataclasses.replace(plan, **preset)
    return plan


def main(argv: list[str] | None = None) -> int:
    doc = (__doc__ or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m bench", description=doc)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--requests", type=int, default=100_000, help="XADDs per redis-benchmark run (sustained)"
    )
    parser.add_argument("--consume", type=int, default=20_000, help="entries consumed per run")
    parser.add_argument("--samples", type=int, default=200, help="replication latency samples")
    parser.add_argument(
        "--profile-seconds", type=float, default=10.0, help="py-spy window per node process"
    )
    parser.add_argument(
        "--only", default="", help="comma-separated system ids and/or figures (see --list)"
    )
    parser.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="before each run, wait until the 1-minute load average is below this",
    )
    parser.add_argument(
        "--max-others",
        type=float,
        default=None,
        help="before each run, wait until processes outside the benchmark keep fewer cores "
        "busy than this (measured over 2 s; unlike the load average, blind to our own runs)",
    )
    parser.add_argument(
        "--wait", type=float, default=1200.0, help="seconds to wait at most for each gate"
    )
    parser.add_argument("--out", default=None, help="page to update, or - to print")
    parser.add_argument("--quick", action="store_true", help="1 round, short runs, prints")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: the harness runs")
    parser.add_argument("--list", action="store_true", help="systems and figures, then exit")
    args = parser.parse_args(argv)
    if args.list:
        for system_id, system in BY_ID.items():
            default = "" if system.default else "  (not in the default run)"
            print(f"{system_id:14} {system.name}{default}")
        print(f"figures: {', '.join(FIGURES)}")
        return 0
    try:
        plan = plan_of(args)
    except ValueError as e:
        parser.error(str(e))
    partial = args.quick or args.smoke or bool(args.only)
    out = args.out or ("-" if partial else "docs/benchmarks.md")
    results = run(plan, lambda line: print(f"bench: {line}", file=sys.stderr, flush=True))
    section = markdown(results, plan, machine_line())
    if out == "-":
        print(section)
    else:
        write_section(Path(out), section)
        print(f"bench: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
