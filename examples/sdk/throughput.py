"""Entries per second a consumer group handles: the SDK's GroupConsumer next to a plain loop.

One stream is filled with `--entries` entries (two fields, 64-byte payload) first; then each
reader consumes all of it as a fresh consumer group of that stream (`XGROUP CREATE ... 0`), so
every reader meets the same entries, one reader at a time:

- `plain loop`: redis-py, `XREADGROUP ... COUNT 100`, then one `XACK` with the batch's IDs; the
  floor of what any consumer of this server can do from one connection;
- `GroupConsumer xN`: N `streams.sdk.GroupConsumer`s (sync face, `count=100`, a handler that
  does nothing), each on its own thread; the clock stops once they have all stopped, so the last
  acks are inside it. `--concurrency K` adds a row with handlers K at a time within a batch.

Targets, in the same run: one region of a local topology (an embedded Tansu broker and one node,
started here unless `--endpoint` names a node) and, for scale, a redis-server with `appendonly
yes` and `appendfsync always` started here (skipped with `--no-redis` or when redis-server is
not installed). Output: one table row per target, round and reader, entries/s and the ratio to
the plain loop of the same round; with `--rounds N` (readers taken in turn, N times: this
machine's noise is larger than the differences) also each reader's median.

    python examples/sdk/throughput.py                      # 100,000 entries
    python examples/sdk/throughput.py --rounds 3           # as in docs/benchmarks.md
    python examples/sdk/throughput.py --entries 5000 --no-redis
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis

from streams.sdk import GroupConsumer

STREAM = "throughput"
BATCH = 100


def fill(client: redis.Redis, entries: int) -> None:
    """`entries` XADDs in pipelined batches of 1000 (not measured)."""
    payload = "x" * 64
    for start in range(0, entries, 1000):
        pipe = client.pipeline(transaction=False)
        for n in range(start, min(start + 1000, entries)):
            pipe.xadd(STREAM, {"n": n, "payload": payload})
        pipe.execute()


def plain_loop(client: redis.Redis, group: str, entries: int) -> float:
    """The plain redis-py loop; returns entries/s."""
    handled = 0
    start = time.perf_counter()
    while handled < entries:
        reply = client.xreadgroup(group, "plain", {STREAM: ">"}, count=BATCH, block=1000)
        if not reply:
            raise SystemExit(f"throughput: the plain loop saw only {handled} of {entries} entries")
        ids = [entry_id for entry_id, _ in reply[0][1]]
        client.xack(STREAM, group, *ids)
        handled += len(ids)
    return entries / (time.perf_counter() - start)


def group_consumers(url: str, group: str, entries: int, consumers: int, concurrency: int) -> float:
    """`consumers` GroupConsumers with a no-op handler until every entry was handled; entries/s
    from their start until all have stopped (and flushed their acks)."""
    lock = threading.Lock()
    done = threading.Event()
    handled = 0

    def handle(entry_id: str, fields: dict[bytes, bytes]) -> None:
        nonlocal handled
        with lock:
            handled += 1
            if handled >= entries:
                done.set()

    options: dict[str, Any] = {"concurrency": concurrency} if concurrency > 1 else {}
    group_of = [
        GroupConsumer(
            url,
            STREAM,
            group,
            f"c{k}",
            handle,
            count=BATCH,
            block_ms=200,
            metrics_interval_s=3600,
            **options,
        )
        for k in range(consumers)
    ]
    runners = [threading.Thread(target=c.run) for c in group_of]
    start = time.perf_counter()
    for t in runners:
        t.start()
    finished = done.wait(600)
    for c in group_of:
        c.stop()
    for t in runners:
        t.join()
    elapsed = time.perf_counter() - start
    for c in group_of:
        c.close()
    if not finished:
        raise SystemExit(f"throughput: only {handled} of {entries} entries handled in 600 s")
    return entries / elapsed


def measure(name: str, url: str, entries: int, concurrency: int, rounds: int) -> None:
    """Every reader over the same stream, `rounds` times in turn (the machine's noise shows in
    the spread), then the median of each reader's rounds."""
    client = redis.Redis.from_url(url)
    client.delete(STREAM)
    fill(client, entries)
    readers: list[tuple[str, Callable[[str], float]]] = [
        ("plain loop", lambda g: plain_loop(client, g, entries)),
        ("GroupConsumer x1", lambda g: group_consumers(url, g, entries, 1, 1)),
        ("GroupConsumer x3", lambda g: group_consumers(url, g, entries, 3, 1)),
    ]
    if concurrency > 1:
        readers.append(
            (
                f"GroupConsumer x1, concurrency {concurrency}",
                lambda g: group_consumers(url, g, entries, 1, concurrency),
            )
        )
    rates: dict[str, list[float]] = {reader: [] for reader, _ in readers}
    for r in range(rounds):
        plain = 0.0
        for n, (reader, run) in enumerate(readers):
            group = f"g{r}-{n}"
            client.xgroup_create(STREAM, group, "0")
            rate = run(group)
            plain = plain or rate
            pending = client.xpending(STREAM, group)["pending"]
            if pending:
                raise SystemExit(f"throughput: {reader} left {pending} entries pending")
            rates[reader].append(rate)
            label = f"{name} #{r + 1}" if rounds > 1 else name
            print(f"{label:<34} {reader:<32} {rate:>10,.0f} {rate / plain:>8.2f}x", flush=True)
    if rounds > 1:
        plain = statistics.median(rates["plain loop"])
        for reader, values in rates.items():
            mid = statistics.median(values)
            label = f"{name} median"
            print(f"{label:<34} {reader:<32} {mid:>10,.0f} {mid / plain:>8.2f}x", flush=True)
    client.delete(STREAM)
    client.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def durable_redis() -> Iterator[str]:
    """A redis-server with every write fsynced before its reply, on a free port."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="throughput-redis-") as folder:
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", folder]
            + ["--save", "", "--appendonly", "yes", "--appendfsync", "always"],
            stdout=subprocess.DEVNULL,
        )
        try:
            url = f"redis://127.0.0.1:{port}"
            deadline = time.monotonic() + 10
            while True:
                try:
                    redis.Redis.from_url(url).ping()
                    break
                except redis.exceptions.ConnectionError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit("throughput: redis-server did not start") from None
                    time.sleep(0.05)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", help="RESP URL of a region node (default: start one)")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument(
        "--concurrency", type=int, default=8, help="an extra row with handlers K at a time (1: no)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="every reader this many times")
    parser.add_argument("--no-redis", action="store_true", help="skip the redis-server rows")
    args = parser.parse_args(argv)
    if args.entries < 1:
        parser.error("--entries must be >= 1")
    if args.concurrency < 1:
        parser.error("--concurrency must be >= 1")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    print(f"{args.entries:,} entries per reader")
    print(f"{'target':<34} {'reader':<32} {'entries/s':>10} {'vs plain':>9}", flush=True)
    if args.endpoint:
        measure("region node", args.endpoint, args.entries, args.concurrency, args.rounds)
    else:
        from topology.local import LocalTopology

        with LocalTopology(regions=1) as topo:
            url = f"redis://127.0.0.1:{topo.ports[1]}"
            measure("region node (1 region)", url, args.entries, args.concurrency, args.rounds)
    if not args.no_redis and shutil.which("redis-server"):
        with durable_redis() as url:
            measure("redis-server fsync always", url, args.entries, args.concurrency, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
