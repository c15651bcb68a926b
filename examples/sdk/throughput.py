"""Entries per second handled end to end by a consumer group of 1 and of 3 consumers.

For each group size, on a fresh stream: one producer thread sends `--entries` entries with
`send_many` (pipelined batches of 100) while the group's consumers (sync face, `count=50`, a
handler that does nothing) handle them; the clock runs from the first send until the last entry
is handled. Also reported: the producer's own rate and the consumers' rate on a stream already
filled (consume only). Without `--endpoint` it starts a one-region embedded topology.

    python examples/sdk/throughput.py --entries 2000
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

from streams.sdk import GroupConsumer, Producer


def measure(url: str, entries: int, consumers: int, prefilled: bool) -> tuple[float, float]:
    """(producer entries/s, end-to-end entries/s)."""
    stream = f"throughput-{consumers}-{'pre' if prefilled else 'live'}-{time.time_ns()}"
    lock = threading.Lock()
    done = threading.Event()
    handled = 0

    def handle(entry_id: str, fields: dict[bytes, bytes]) -> None:
        nonlocal handled
        with lock:
            handled += 1
            if handled >= entries:
                done.set()

    producer_rate = 0.0

    def produce() -> None:
        nonlocal producer_rate
        with Producer(url, stream, batch_size=100) as producer:
            start = time.perf_counter()
            batch: list[dict[str, str | int]] = [
                {"n": i, "payload": "x" * 64} for i in range(entries)
            ]
            producer.send_many(batch)
            producer_rate = entries / (time.perf_counter() - start)

    if prefilled:
        produce()
    group = [
        GroupConsumer(url, stream, "g", f"c{k}", handle, count=50, block_ms=100)
        for k in range(consumers)
    ]
    runners = [threading.Thread(target=c.run) for c in group]
    start = time.perf_counter()
    feeder = None if prefilled else threading.Thread(target=produce)
    for t in runners + ([feeder] if feeder else []):
        t.start()
    finished = done.wait(600)
    elapsed = time.perf_counter() - start
    for c in group:
        c.stop()
    for t in runners + ([feeder] if feeder else []):
        t.join()
    for c in group:
        c.close()
    if not finished:
        raise SystemExit(f"throughput: only {handled} of {entries} entries handled in 600 s")
    return producer_rate, entries / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", help="RESP URL of a region node (default: start one)")
    parser.add_argument("--entries", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.entries < 1:
        parser.error("--entries must be >= 1")

    def report(url: str) -> None:
        print(f"{'consumers':>9} {'producer/s':>11} {'end-to-end/s':>13} {'consume-only/s':>15}")
        for k in (1, 3):
            produced, live = measure(url, args.entries, k, prefilled=False)
            _, consumed = measure(url, args.entries, k, prefilled=True)
            print(f"{k:>9} {produced:>11.0f} {live:>13.0f} {consumed:>15.0f}", flush=True)

    if args.endpoint:
        report(args.endpoint)
        return 0
    from topology.local import LocalTopology

    with LocalTopology(regions=1) as topo:
        report(f"redis://127.0.0.1:{topo.ports[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
