"""Issue 37, part C, on the stack users deploy (Apache Kafka + MirrorMaker 2): a region joins two
running ones while they write; MirrorMaker 2 is rebuilt with the new cluster, the new region
boots from r1's snapshot, and all three converge (CRDT.DIGEST equal) with each one's writes in
every other."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.apache_kafka.conftest import require_kafka
from topology.local import LocalTopology

pytestmark = [pytest.mark.slow, pytest.mark.apache_kafka]


def test_a_region_joins_on_apache_kafka_with_mirrormaker2() -> None:
    require_kafka()
    with LocalTopology(regions=2, broker="kafka", mirror="mm2", manual_sync=False) as topo:
        halt = threading.Event()
        written = {1: 0, 2: 0}

        def write(i: int) -> None:
            client = topo.client(i)
            while not halt.is_set():
                client.xadd(f"s{written[i] % 5}", {"from": f"r{i}", "n": written[i]})
                written[i] += 1
                time.sleep(0.02)

        threads = [threading.Thread(target=write, args=(i,)) for i in (1, 2)]
        for t in threads:
            t.start()
        try:
            time.sleep(1.0)
            started = time.monotonic()
            new = topo.add_region()
            print(f"\nr{new} joined in {time.monotonic() - started:.1f} s: {topo.timings}")
            topo.client(new).xadd("s0", {"from": f"r{new}"})
            time.sleep(1.0)
        finally:
            halt.set()
            for t in threads:
                t.join(10)
        started = time.monotonic()
        topo.sync(timeout=120)
        print(f"converged {time.monotonic() - started:.1f} s after the writes stopped: {written}")
        digests = {i: topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 2, 3)}
        assert len(set(digests.values())) == 1, digests
        total = sum(written.values()) + 1
        for i in (1, 2, 3):
            assert sum(topo.client(i).xlen(f"s{k}") for k in range(5)) == total


def _lows(bootstrap: str, topics: list[str]) -> dict[str, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "join-test"})
    try:
        return {
            t: consumer.get_watermark_offsets(TopicPartition(t, 0), timeout=10, cached=False)[0]
            for t in topics
        }
    finally:
        consumer.close()


def test_a_region_joins_over_logs_the_retention_policy_truncated() -> None:
    """Apache Kafka (DeleteRecords) with the embedded mirror: the home logs no longer start at
    offset 0; the new cluster is filled from each log's first record held, and the new node's
    seed (r1's snapshot, taken after the deletion) covers every op deleted."""
    require_kafka()
    retention = {"snapshots": 2, "tail_seconds": 0}
    with LocalTopology(regions=2, broker="kafka", mirror="embedded", retention=retention) as topo:
        for r in range(3):
            for i in (1, 2):
                pipe = topo.client(i).pipeline(transaction=False)
                for k in range(100):
                    pipe.xadd(f"s{k % 5}", {"f": f"r{i}-{r}-{k}"})
                pipe.delete(f"gone{r}")
                pipe.execute()
            topo.sync()
            for i in (1, 2):
                topo.client(i).execute_command("CRDT.SNAPSHOT")
        topo.apply_retention()
        lows = {i: _lows(topo.bootstrap[i], [f"r{i}.oplog"])[f"r{i}.oplog"] for i in (1, 2)}
        assert all(low > 0 for low in lows.values()), lows
        started = time.monotonic()
        new = topo.add_region()
        print(f"\nr{new} joined over truncated logs {lows} in {time.monotonic() - started:.1f} s")
        topo.client(new).xadd("s0", {"f": "r3"})
        topo.client(1).xadd("s1", {"f": "r1-after"})
        topo.sync(timeout=120)
        digests = {i: topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 2, 3)}
        assert len(set(digests.values())) == 1, digests
        for i in (1, 2, 3):
            assert sum(topo.client(i).xlen(f"s{k}") for k in range(5)) == 602
        copies = _lows(topo.bootstrap[new], ["r1.oplog", "r2.oplog"])
        print(f"copies on r{new}'s cluster start at {copies} (first records held copied)")
