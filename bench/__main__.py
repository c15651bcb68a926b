"""`python -m bench`: throughput, consumption, replication latency and idle cost of the embedded
topology next to redis-server, written to docs/benchmarks.md (see bench/throughput.py).

    python -m bench                       # 3 rounds, 1/2/3 regions, writes docs/benchmarks.md
    python -m bench --smoke --out -       # tiny sizes, print only (what the test runs)
"""

from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
from pathlib import Path

from bench.throughput import Plan, markdown, redis_version, run, write_section


def machine_line() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    tansu = subprocess.run(
        [sys.executable, "-c", "from topology.broker import tansu_binary; print(tansu_binary())"],
        capture_output=True, text=True,
    ).stdout.strip().rsplit("/", 1)[-1]
    return (
        f"{datetime.date.today().isoformat()}, {platform.machine()}, {cpu}, "
        f"{len(__import__('os').sched_getaffinity(0))} cores; Python {platform.python_version()}, "
        f"redis-server {redis_version()}, broker {tansu}."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20000, help="XADDs per redis-benchmark run")
    parser.add_argument("--consume", type=int, default=20000, help="entries consumed per run")
    parser.add_argument("--regions", default="1,2,3", help="topology sizes to measure")
    parser.add_argument("--samples", type=int, default=200, help="replication latency samples")
    parser.add_argument("--out", default="docs/benchmarks.md", help="page to update, or -")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness runs")
    args = parser.parse_args(argv)
    plan = Plan(
        rounds=args.rounds,
        requests=args.requests,
        consume_entries=args.consume,
        regions=tuple(int(r) for r in args.regions.split(",")),
        latency_samples=args.samples,
    )
    if args.smoke:
        plan = Plan(rounds=1, requests=500, consume_entries=300, regions=(2,),
                    latency_samples=5, latency_rates=(200,), idle_window=1.0)
    figures, extra = run(plan, lambda line: print(f"bench: {line}", file=sys.stderr, flush=True))
    section = markdown(figures, extra, plan, machine_line())
    if args.out == "-":
        print(section)
    else:
        write_section(Path(args.out), section)
        print(f"bench: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
