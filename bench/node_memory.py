"""Memory per stream entry of a whole node process, next to redis-server in the same run.

    python -m bench.node_memory [--n 200000] [--broker tansu|kafka]

As a user would measure it: XADDs to one stream in pipelines of 1,000 (`XADD s * f1 <10 bytes>
f2 <10 bytes>`), and the growth of the server process's resident memory (VmRSS) from after a
warm-up of 2,000 entries to the end, divided by the entries added; printed at each quarter so a
fixed cost shows as a falling figure. The node runs as `LocalTopology` starts it (compiled core
when built, snapshots every 100,000 ops as by default), one region of one shard. redis-server
(no persistence) takes the same commands; its RSS growth and `used_memory` growth are printed.
Nothing is asserted; the numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import redis

from topology.local import LocalTopology
from topology.ports import free_port, wait_for_port

WARM_UP = 2_000
PIPELINE = 1_000
FIELDS = {"f1": "0123456789", "f2": "0123456789"}


def vm_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def load(client: redis.Redis, n: int) -> None:
    for _ in range(0, n, PIPELINE):
        pipe = client.pipeline(transaction=False)
        for _ in range(PIPELINE):
            pipe.xadd("s", FIELDS)  # type: ignore[arg-type]
        pipe.execute()


def grow(
    client: redis.Redis, n: int, measures: dict[str, Callable[[], int]]
) -> dict[str, list[float]]:
    """Bytes per entry of each measure at each quarter of `n` entries."""
    load(client, WARM_UP)
    time.sleep(1.0)
    before = {name: f() for name, f in measures.items()}
    out: dict[str, list[float]] = {name: [] for name in measures}
    done = 0
    for _ in range(4):
        load(client, n // 4)
        done += n // 4
        for name, f in measures.items():
            out[name].append((f() - before[name]) / done)
    return out


def ours(n: int, broker: str) -> dict[str, list[float]]:
    with LocalTopology(regions=1, broker=broker) as topo:
        pid = topo._procs[(1, 0)].pid
        return grow(topo.client(1), n, {"node (RSS)": lambda: vm_rss(pid)})


def theirs(n: int) -> dict[str, list[float]]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (scripts/setup.sh installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--save", "", "--appendonly", "no"]
        + ["--dir", tempfile.mkdtemp(prefix="bench-node-mem-")],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        client = redis.Redis(port=port)
        measures: dict[str, Callable[[], int]] = {
            "redis-server (RSS)": lambda: vm_rss(proc.pid),
            "redis-server (used_memory)": lambda: int(client.info("memory")["used_memory"]),
        }
        return grow(client, n, measures)
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="entries (after the warm-up)")
    parser.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    args = parser.parse_args()
    figures = ours(args.n, args.broker)
    figures.update(theirs(args.n))
    quarters = [args.n // 4 * (k + 1) for k in range(4)]
    print(f"bytes per entry after {', '.join(f'{q:,}' for q in quarters)} entries "
          f"(node on {args.broker}):")  # fmt: skip
    for name, values in figures.items():
        print(f"  {name:28s} " + "  ".join(f"{v:7.1f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
