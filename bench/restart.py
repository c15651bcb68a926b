"""Restart time of a region node against the size of its history: full replay, and snapshot + tail.

    python -m bench.restart [--sizes 1000,10000,100000] [--snapshot-only 1000000]
                            [--repeat N] [--out docs/benchmarks.md]

For each size: one embedded region (liberal IDs), that many XADDs written in pipelines of 1,000
over 8 keys, CRDT.FLUSH; then the node is killed and started again (a full replay of its logs),
then it writes a snapshot (CRDT.SNAPSHOT), is killed and started again (snapshot + tail). Time is
measured from the start of the new process until it answers PING; CRDT.INFO says how many
records it read while catching up. `--snapshot-only` sizes skip the full replay (1M records take
about a minute to replay); `--repeat N` restarts from the snapshot N times and reports each time
(the figures are noisy on a shared machine).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import redis

from bench.throughput import write_section
from topology.local import LocalTopology

BEGIN_NAME = "restart"


def fill(client: redis.Redis, n: int) -> None:
    for start in range(0, n, 1000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(n, start + 1000)):
            pipe.xadd(f"k{i % 8}", {"field": "value", "n": i})
        pipe.execute()


def info(client: redis.Redis) -> dict[bytes, bytes]:
    flat = client.execute_command("CRDT.INFO")  # type: ignore[no-untyped-call]
    return {
        k: v if isinstance(v, bytes) else str(v).encode()
        for k, v in zip(flat[::2], flat[1::2], strict=True)
    }


def restart(topo: LocalTopology) -> tuple[float, int]:
    """Kill the node, start it again; (seconds until it answers PING, records read at boot)."""
    topo.kill_node(1)
    started = time.monotonic()
    topo.start_node(1)
    elapsed = time.monotonic() - started
    return elapsed, int(info(topo.client(1))[b"boot_records_read"])


def measure(n: int, full: bool = True, repeat: int = 1) -> dict[str, Any]:
    with LocalTopology(
        regions=1,
        manual_sync=False,
        id_mode="liberal",
        node_args=["--snapshot-every-ops", "0", "--snapshot-every-s", "0"],
    ) as topo:
        client = topo.client(1)
        t0 = time.monotonic()
        fill(client, n)
        wrote = time.monotonic() - t0
        client.execute_command("CRDT.FLUSH")  # type: ignore[no-untyped-call]
        full_s, full_records = restart(topo) if full else (None, None)
        topo.client(1).execute_command("CRDT.SNAPSHOT")  # type: ignore[no-untyped-call]
        times = []
        for _ in range(repeat):
            snap, snap_records = restart(topo)
            times.append(snap)
        return {
            "n": n,
            "write_s": wrote,
            "full_s": full_s,
            "full_records": full_records,
            "snap_s": min(times),
            "snap_times": times,
            "snap_records": snap_records,
        }


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "## Restart time against history (bench/restart.py: `python -m bench.restart`)",
        "",
        "One embedded region, N XADDs in pipelines of 1,000 over 8 keys; kill -9, start again, "
        "time until the node answers PING (process start included). Full replay reads every "
        "record of the region's logs; snapshot + tail boots from the newest snapshot in "
        "`<region>.snapshot` (written by CRDT.SNAPSHOT right before the kill, so the tail is "
        "empty).",
        "",
        "| XADDs | written in | full replay: serving after | records read | replay rate | "
        "snapshot + tail: serving after | records read |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        snap = " / ".join(f"{t:.2f}" for t in r["snap_times"]) + " s"
        if r["full_s"] is None:
            full = "(not run) | | "
        else:
            rate = r["full_records"] / r["full_s"] if r["full_s"] else 0
            full = f"{r['full_s']:.2f} s | {int(r['full_records']):,} | {rate:,.0f} records/s"
        lines.append(
            f"| {int(r['n']):,} | {r['write_s']:.1f} s | {full} | {snap} | "
            f"{int(r['snap_records']):,} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.restart", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--snapshot-only", default="", help="sizes measured without full replay")
    parser.add_argument("--repeat", type=int, default=1, help="snapshot restarts per size")
    parser.add_argument("--out", default="docs/benchmarks.md", help="page to update, or -")
    args = parser.parse_args(argv)
    rows = []
    runs = [(int(s), True) for s in args.sizes.split(",") if s]
    runs += [(int(s), False) for s in args.snapshot_only.split(",") if s]
    for n, full in runs:
        row = measure(n, full, args.repeat)
        print(f"restart: {row}", file=sys.stderr, flush=True)
        rows.append(row)
    section = markdown(rows)
    if args.out == "-":
        print(section)
    else:
        write_section(Path(args.out), section, name=BEGIN_NAME)
    return 0


if __name__ == "__main__":
    sys.exit(main())
