"""`python -m bench.mirror`: the mirror's copy rate between two embedded Tansu brokers.

    python -m bench.mirror [--records 10000] [--partitions 1]

Produces small records (~10 bytes, 500 per transaction, as a busy region writer would) to an op
log on one broker, spread evenly over its partitions (one per shard), and times
`Mirror.copy_available` to the other: once from a fresh `Mirror` (client start-up included) and
once more with its clients open. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

from confluent_kafka import Producer

from streams.kafka.topics import ensure_topics, oplog_topic
from topology.broker import EmbeddedBroker
from topology.mirror import Mirror


def produce(
    bootstrap: str, topic: str, count: int, partitions: int, start: int = 0, per_txn: int = 500
) -> None:
    """`count` records in transactions of `per_txn`, record i to partition i mod `partitions`."""
    ensure_topics(bootstrap, [topic], partitions=partitions)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(10)
    for base in range(start, start + count, per_txn):
        producer.begin_transaction()
        for i in range(base, min(base + per_txn, start + count)):
            key, value = b"k%d" % (i % 5), b"value-%d" % i
            producer.produce(topic, key=key, value=value, partition=i % partitions)
        producer.commit_transaction(10)
    producer.flush(10)


def run(records: int, partitions: int = 1) -> str:
    brokers = [EmbeddedBroker(name) for name in ("bench-mirror-a", "bench-mirror-b")]
    try:
        for broker in brokers:
            broker.start()
        a, b = (broker.bootstrap for broker in brokers)
        name = f"bench{uuid.uuid4().hex[:6]}"
        topic = oplog_topic(name)
        produce(a, topic, records, partitions)
        with Mirror(a, b, name, "A") as mirror:
            started = time.perf_counter()
            assert mirror.copy_available(timeout=120) == records
            cold = time.perf_counter() - started
            produce(a, topic, records, partitions, start=records)
            started = time.perf_counter()
            assert mirror.copy_available(timeout=120) == records
            warm = time.perf_counter() - started
    finally:
        for broker in brokers:
            broker.stop()
    return (
        f"mirror throughput, {records} records of ~10 bytes in {partitions} partition(s),"
        " Tansu -> Tansu: "
        f"{records / cold:,.0f} records/s from a fresh Mirror ({cold:.2f} s, includes client "
        f"start-up), {records / warm:,.0f} records/s with clients open ({warm:.2f} s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.mirror", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=1, help="of the op log (shards)")
    args = parser.parse_args(argv)
    print(run(args.records, args.partitions), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
