"""Retention on the light stack: Tansu has no DeleteRecords, so `apply_retention` says so once per
region and every op log keeps every record (issue 37, part A)."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from topology.local import LocalTopology


def test_a_broker_without_delete_records_keeps_everything_and_says_so() -> None:
    with LocalTopology(regions=2, retention={"snapshots": 1, "tail_seconds": 0}) as topo:
        for round_ in range(2):
            for i in (1, 2):
                topo.client(i).xadd("s", {"f": f"{i}-{round_}"})
            topo.sync()
            for i in (1, 2):
                topo.client(i).execute_command("CRDT.SNAPSHOT")
        report = topo.apply_retention()
        assert sorted(report.unsupported) == ["r1", "r2"]
        assert report.deleted == 0
        consumer = Consumer({"bootstrap.servers": topo.bootstrap[1], "group.id": "t"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition("r1.oplog", 0), timeout=10)
        finally:
            consumer.close()
        assert low == 0 and high > 0
        assert topo.client(1).xlen("s") == 4
