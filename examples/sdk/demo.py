"""The SDK demo: producers in two regions, a consumer group of three in the third.

Producer "a" writes to region 1 (falling back to the others), producer "b" to region 2; three
`GroupConsumer`s read the stream in region 3 (falling back to 1, then 2). The script exits 0 once
every entry was handled at least once, and prints the count of duplicate handlings and each
consumer's metrics. docker-compose.yml's `demo` service runs it against the three Apache Kafka
regions; without `--endpoints` it starts an embedded three-region topology itself (`--shards S
--nodes M`: S shards over M node processes per region).

Each region is given by one node. In a region of several node processes the SDK follows MOVED
to the node serving the stream; the demo waits for every node such a region names (CLUSTER
SLOTS) to answer first, as nodes start in any order.

    python examples/sdk/demo.py
    python examples/sdk/demo.py --shards 4 --nodes 2
    python examples/sdk/demo.py --endpoints redis://r1:6380,redis://r2:6381,redis://r3:6382
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import redis

from streams.sdk import CountingMetrics, GroupConsumer, Producer


def wait_until_up(urls: list[str], timeout_s: float) -> None:
    """Region nodes start after their Kafka clusters, in any order: wait for every node to
    answer PING, every node a sharded region's given node names included."""
    deadline = time.monotonic() + timeout_s
    for url in urls:
        _ping(url, deadline, timeout_s)
        for host, port in _cluster_nodes(url):
            _ping(_at(url, host, port), deadline, timeout_s)


def _at(url: str, host: str, port: int) -> str:
    """`url` pointed at another node of its region: same scheme, password and options (the
    nodes of a region share them), another host and port."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@{host}:{port}" if credentials else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _ping(url: str, deadline: float, timeout_s: float) -> None:
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        while True:
            try:
                client.ping()
                return
            except redis.AuthenticationError as exc:  # it answered: a wrong password is fatal
                raise SystemExit(f"demo: {url}: {exc}") from None
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"demo: {url} did not answer in {timeout_s} s") from None
                time.sleep(1)
    finally:
        client.close()


def _cluster_nodes(url: str) -> set[tuple[str, int]]:
    """The nodes a region's node names in CLUSTER SLOTS (itself included); none for a node
    that serves every key (it answers "cluster support disabled")."""
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    client.response_callbacks.clear()  # raw rows: [start, end, [host, port, id], ...]
    try:
        rows = client.execute_command("CLUSTER", "SLOTS")
    except redis.ResponseError:
        return set()
    finally:
        client.close()
    return {(row[2][0].decode(), int(row[2][1])) for row in rows}


def run(urls: list[str], entries: int, timeout_s: float) -> int:
    r1, r2, r3 = urls
    stream = f"demo-{int(time.time() * 1000)}"
    lock = threading.Lock()
    handled: Counter[str] = Counter()

    def handle(entry_id: str, fields: dict[bytes, bytes]) -> None:
        with lock:
            handled[entry_id] += 1

    sent: list[str] = []

    def produce(name: str, endpoints: list[str]) -> None:
        with Producer(endpoints, stream, idempotency=True) as producer:
            for start in range(0, entries // 2, 50):
                batch: list[dict[str, str | int]] = [
                    {"producer": name, "n": n} for n in range(start, min(start + 50, entries // 2))
                ]
                ids = producer.send_many(batch)
                with lock:
                    sent.extend(ids)

    metrics = [CountingMetrics() for _ in range(3)]
    consumers = [
        GroupConsumer(
            [r3, r1, r2],
            stream,
            "demo",
            f"consumer-{k}",
            handle,
            count=50,
            block_ms=500,
            metrics=metrics[k],
            # The stream's hash tag: the same slot, so a dead letter and its XACK are one
            # MULTI/EXEC even when the region's shards live on several nodes.
            dead_letter=f"{{{stream}}}:dead",
        )
        for k in range(3)
    ]
    threads = [threading.Thread(target=c.run) for c in consumers]
    producers = [
        threading.Thread(target=produce, args=("a", [r1, r2, r3])),
        threading.Thread(target=produce, args=("b", [r2, r1, r3])),
    ]
    started = time.monotonic()
    for t in threads + producers:
        t.start()
    try:
        for t in producers:
            t.join()
        total = 2 * (entries // 2)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with lock:
                if len(sent) == total and set(sent) <= set(handled):
                    break
            time.sleep(0.1)
    finally:
        for c in consumers:
            c.stop()
        for t in threads:
            t.join()
        for c in consumers:
            c.close()
    elapsed = time.monotonic() - started
    missing = set(sent) - set(handled)
    duplicates = sum(n - 1 for n in handled.values())
    print(
        f"stream {stream}: {len(sent)} entries from producers in r1 and r2, handled by a "
        f"group of 3 in r3 in {elapsed:.1f} s; {len(missing)} missing, {duplicates} duplicates"
    )
    for k, m in enumerate(metrics):
        print(f"  consumer-{k}: {m.snapshot()}")
    return 1 if missing else 0


@contextlib.contextmanager
def endpoints_from(arg: str | None, shards: int, nodes: int) -> Iterator[list[str]]:
    if arg:
        urls = [u.strip() for u in arg.split(",")]
        if len(urls) != 3:
            raise SystemExit("demo: --endpoints takes three URLs (regions 1, 2, 3)")
        yield urls
        return
    from topology.local import LocalTopology

    with LocalTopology(regions=3, shards=shards, nodes=nodes, manual_sync=False) as topo:
        yield [f"redis://127.0.0.1:{topo.ports[i]}" for i in (1, 2, 3)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--endpoints",
        help="three comma-separated RESP URLs (default: start an embedded three-region topology)",
    )
    parser.add_argument("--shards", type=int, default=1, help="embedded: shards (default 1)")
    parser.add_argument(
        "--nodes", type=int, default=1, help="embedded: node processes per region (default 1)"
    )
    parser.add_argument("--entries", type=int, default=600, help="entries in all (default 600)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait (default 120)")
    args = parser.parse_args(argv)
    if args.entries < 2:
        parser.error("--entries must be >= 2")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if args.endpoints and (args.shards, args.nodes) != (1, 1):
        parser.error("--shards and --nodes shape the embedded topology, not --endpoints")
    with endpoints_from(args.endpoints, args.shards, args.nodes) as urls:
        wait_until_up(urls, args.timeout)
        return run(urls, args.entries, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
