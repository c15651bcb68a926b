"""Memory per stream entry in the pure core, next to redis-server 7 holding the same entries.

    python bench/memory.py [--n 1000000]

Entries: 3 origins interleaved, fields (b"field", b"value<i % 1000>"). Ours: RSS growth of this
process while a `State` applies the XAdd ops. Redis: `used_memory` growth after pipelined XADDs of
the same entries. Nothing is asserted; the numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streams.crdt import ops  # noqa: E402
from streams.crdt.state import State  # noqa: E402
from topology.ports import free_port, wait_for_port  # noqa: E402

BASE_MS = 1_700_000_000_000


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def ours(n: int) -> tuple[float, float]:
    state = State()
    gc.collect()
    before = rss()
    start = time.perf_counter()
    for i in range(n):
        origin = 1 + i % 3
        body = ops.XAdd(b"s", (BASE_MS + i, origin), (b"field", b"value%d" % (i % 1000)))
        state.apply(ops.Op(origin, i // 3 + 1, (), 0, body))
    elapsed = time.perf_counter() - start
    gc.collect()
    return (rss() - before) / n, n / elapsed


def theirs(n: int) -> float:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (scripts/setup.sh installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tempfile.mkdtemp(prefix="bench-mem-"),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        client = redis.Redis(port=port)
        before = int(client.info("memory")["used_memory"])
        pipe = client.pipeline(transaction=False)
        for i in range(n):
            pipe.xadd("s", {"field": b"value%d" % (i % 1000)}, id=f"{BASE_MS + i}-{1 + i % 3}")
            if i % 10_000 == 9_999:
                pipe.execute()
        pipe.execute()
        return (int(client.info("memory")["used_memory"]) - before) / n
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    args = parser.parse_args()
    per_entry, rate = ours(args.n)
    redis_per_entry = theirs(args.n)
    print(
        f"{args.n:,} entries: streams core {per_entry:.0f} B/entry (apply {rate:,.0f} ops/s); "
        f"redis-server {redis_per_entry:.0f} B/entry"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
