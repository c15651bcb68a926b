"""A history of writes for the durable restart checks, and what a restarted topology must show.

`write_history` writes `total` XADDs into region r1 over `KEYS`: most in pipelines of 1,000, a
tenth one request at a time from eight clients at once; the group `g` of each key has read part
of it, half of that acknowledged (pending entries with their consumers). `observe` is what must
come back after any restart: CRDT.DIGEST, every XLEN, XPENDING summaries and XINFO GROUPS of
every region. Run by the CI test at 100,000 and by `python -m apache_kafka.durable_history
--total 1000000` (docs/durability.md's figures).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from topology.local import LocalTopology

KEYS = [b"h:%d" % i for i in range(16)]
GROUP = b"g"


def write_history(client: redis.Redis, total: int) -> None:
    for key in KEYS:
        client.xgroup_create(key, GROUP, id=b"0", mkstream=True)
    singles = total // 10
    pipelined = total - singles
    for start in range(0, pipelined, 1000):
        pipe = client.pipeline(transaction=False)
        for n in range(start, min(pipelined, start + 1000)):
            pipe.xadd(KEYS[n % len(KEYS)], {b"n": b"%d" % n, b"v": b"value-%d" % n})
        pipe.execute()
    pool = client.connection_pool

    def single(worker: int) -> None:
        own = redis.Redis(connection_pool=pool)
        for n in range(worker, singles, 8):
            own.xadd(KEYS[n % len(KEYS)], {b"s": b"%d" % n})

    threads = [threading.Thread(target=single, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, key in enumerate(KEYS):
        read = client.xreadgroup(GROUP, b"c%d" % (i % 3), {key: b">"}, count=200)
        ids = [eid for _stream, entries in read for eid, _fields in entries]
        client.xack(key, GROUP, *ids[::2])
    client.execute_command("CRDT.FLUSH")


def observe(topo: LocalTopology) -> dict[int, object]:
    seen: dict[int, object] = {}
    for i in topo.ports:
        c = topo.client(i)
        seen[i] = {
            "digest": c.execute_command("CRDT.DIGEST"),
            "xlen": [c.xlen(k) for k in KEYS],
            "groups": [c.xinfo_groups(k) for k in KEYS],
            # PELs are local to their region: r1's holds the pending entries
            "pending": [c.xpending(k, GROUP) for k in KEYS] if i == 1 else None,
        }
    return seen


def snapshots_checked(topo: LocalTopology, timeout: float = 60.0) -> dict[int, bytes]:
    """Wait until no region's snapshot digest check is pending (each node boots from its
    snapshot and checks the digest after it serves, `streams.node.runtime.digest_check`);
    returns how each one ended (CRDT.INFO `snapshot_digest_check`)."""
    deadline = time.monotonic() + timeout
    while True:
        checks = {}
        for i in topo.ports:
            flat = topo.client(i).execute_command("CRDT.INFO")
            checks[i] = dict(zip(flat[::2], flat[1::2], strict=True))[b"snapshot_digest_check"]
        if b"pending" not in checks.values() or time.monotonic() > deadline:
            return checks
        time.sleep(0.2)


def topology(data: Path, regions: int) -> LocalTopology:
    return LocalTopology(
        regions=regions, manual_sync=False, data_dir=data, broker="kafka", mirror="mm2"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m apache_kafka.durable_history")
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--regions", type=int, default=3)
    args = parser.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="streams-durable-"))
    with topology(data, args.regions) as topo:
        began = time.monotonic()
        write_history(topo.client(1), args.total)
        print(f"{args.total:,} XADDs written in {time.monotonic() - began:.0f} s", flush=True)
        topo.sync(timeout=1200)
        before = observe(topo)
    size = sum(f.stat().st_size for f in data.rglob("*") if f.is_file()) / 1e6
    print(f"clean stop; data directory {size:,.0f} MB", flush=True)
    with topology(data, args.regions) as topo:
        print(
            f"clean restart: nodes serving after {topo.timings['nodes']:.1f} s, all up after "
            f"{topo.timings['mirrors']:.1f} s",
            flush=True,
        )
        assert observe(topo) == before
        assert set(snapshots_checked(topo).values()) == {b"matched"}
        topo.crash()
    print("every process SIGKILLed", flush=True)
    with topology(data, args.regions) as topo:
        print(
            f"after SIGKILL: nodes serving after {topo.timings['nodes']:.1f} s, all up after "
            f"{topo.timings['mirrors']:.1f} s",
            flush=True,
        )
        assert observe(topo) == before
        assert set(snapshots_checked(topo).values()) == {b"matched"}
    print("the same digests, lengths, groups and pending entries each time", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
