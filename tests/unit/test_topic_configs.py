"""What the nodes ask of Kafka for their topics (issue 25): configs by role, the CreateTopics
requests (replication factor and min.insync.replicas from the topology file), which existing
configs are refused as data-losing, the record limit learned from described configs, the size
bound of a record batch, and the snapshot retention bookkeeping. Pure: no broker (the embedded
broker's answers are in tests/integration/test_topic_configs_kafka.py)."""

from __future__ import annotations

import pytest

from streams.config import RegionConfig, Topology, TopologyError, loads
from streams.kafka.sizes import MAX_RECORD_BYTES, TOPIC_MAX_MESSAGE_BYTES, batch_bytes
from streams.kafka.topics import (
    Replication,
    data_losing_settings,
    new_topics,
    record_limit,
    role_of,
    topic_configs,
)
from streams.node.kafka.snapshots import CHUNK_BYTES, Retention
from topology.mirror import MirrorSet

KEEP = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}


def test_every_topic_of_a_region_keeps_everything_and_op_logs_take_the_largest_record() -> None:
    for name in ("r1.oplog", "A.r1.oplog", "r1.local"):
        configs = topic_configs(name)
        assert configs == {**KEEP, "max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)}, name
    for name in ("r1.snapshot", "r1.writers"):
        assert topic_configs(name) == KEEP, name  # snapshot chunks fit any broker's default
    assert topic_configs("something-else") == {}
    assert TOPIC_MAX_MESSAGE_BYTES > MAX_RECORD_BYTES
    assert [role_of(n) for n in ("r1.oplog", "r1.local", "r1.snapshot", "r1.writers", "x")] == [
        "oplog",
        "local",
        "snapshot",
        "writers",
        None,
    ]


def test_create_requests_use_the_topologys_replication_else_the_brokers_default() -> None:
    default = new_topics(["r1.oplog"], 4, Replication())
    assert [(t.topic, t.num_partitions, t.replication_factor) for t in default] == [
        ("r1.oplog", 4, -1)
    ]
    assert "min.insync.replicas" not in default[0].config
    (three,) = new_topics(["r1.local"], 1, Replication(3, 2))
    assert three.replication_factor == 3
    assert three.config["min.insync.replicas"] == "2"
    assert three.config["retention.ms"] == "-1"


def test_the_topology_file_gives_replication_and_refuses_an_impossible_min_insync() -> None:
    base = '[[region]]\nname = "r1"\nid = 1\nbootstrap = "h:9092"\nresp_port = 6380\n'
    topology = loads("[topology]\nreplication_factor = 3\nmin_insync_replicas = 2\n" + base)
    assert (topology.replication_factor, topology.min_insync_replicas) == (3, 2)
    assert loads(base).replication_factor is None
    with pytest.raises(TopologyError, match="min_insync_replicas = 3 exceeds replication_factor"):
        loads("[topology]\nreplication_factor = 2\nmin_insync_replicas = 3\n" + base)
    with pytest.raises(TopologyError, match="'replication_factor' must be an integer"):
        loads("[topology]\nreplication_factor = 0\n" + base)


def test_finite_retention_or_compaction_on_an_op_log_is_named_as_data_losing() -> None:
    assert data_losing_settings("r1.oplog", {**KEEP}) == []
    assert data_losing_settings("r1.oplog", {}) == []  # Tansu reports only what was set
    week = {**KEEP, "retention.ms": "604800000"}
    assert data_losing_settings("r1.oplog", week) == ["retention.ms=604800000"]
    assert data_losing_settings("B.r2.oplog", {"retention.bytes": "1073741824"}) == [
        "retention.bytes=1073741824"
    ]
    assert data_losing_settings("r1.local", {"cleanup.policy": "compact,delete"}) == [
        "cleanup.policy=compact,delete"
    ]
    assert data_losing_settings("r1.snapshot", week) == []  # not an op log: not refused


def test_the_record_limit_is_the_smallest_max_message_bytes_reported() -> None:
    assert record_limit({}, TOPIC_MAX_MESSAGE_BYTES) == TOPIC_MAX_MESSAGE_BYTES
    assert record_limit({"r1.oplog": {}}, 5000) == 5000
    described = {"r1.oplog": {"max.message.bytes": "1048588"}, "r1.local": {}}
    assert record_limit(described, TOPIC_MAX_MESSAGE_BYTES) == 1048588


def _varint(n: int) -> int:
    """Bytes of Kafka's zigzag varint for `n`."""
    z = (n << 1) ^ (n >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def _exact_batch(key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> int:
    """A record batch v2 holding one record, offset and timestamp deltas 0 (the first record)."""
    body = 1 + _varint(0) + _varint(0) + _varint(len(key)) + len(key)
    body += _varint(len(value)) + len(value) + _varint(len(headers))
    for name, data in headers:
        body += _varint(len(name)) + len(name) + _varint(len(data)) + len(data)
    return 61 + _varint(body) + body


@pytest.mark.parametrize("value_len", [0, 100, 70_000, 5_000_000])
def test_batch_bytes_bounds_the_batch_kafka_compares_with_max_message_bytes(value_len: int) -> None:
    headers: list[tuple[str, bytes]] = [("origin", b"1"), ("seq", b"12345"), ("kind", b"op")]
    key, value = b"stream-key", b"v" * value_len
    exact = _exact_batch(key, value, headers)
    bound = batch_bytes(key, value, headers)
    assert exact <= bound <= exact + 64


def test_a_snapshot_chunk_fits_a_stock_brokers_record_limit_with_room() -> None:
    headers = [
        ("snapshot.id", b"x" * 64),
        ("snapshot.chunk", b"99999"),
        ("snapshot.sha256", b"f" * 64),
    ]
    assert batch_bytes(b"x" * 64, b"\0" * CHUNK_BYTES, headers) < 1_048_588 // 2 + 4096


def test_retention_cuts_before_the_oldest_kept_snapshot_only_beyond_keep() -> None:
    kept = Retention(keep=2)
    kept.note(0)
    kept.note(40)
    assert kept.cut() is None
    kept.note(40)  # the same snapshot learned twice (read at boot, then stored): once
    assert kept.cut() is None
    kept.note(95)
    assert kept.cut() == 40  # records before the second newest snapshot's first chunk go
    kept.note(7)  # learned late (an older one): order is by offset
    assert kept.starts == [0, 7, 40, 95] and kept.cut() == 40
    with pytest.raises(ValueError):
        Retention(keep=0)


def test_mirrors_create_their_target_topics_with_the_topologys_replication() -> None:
    """The copies of an op log on other clusters are as durable as the log itself."""
    topology = Topology(
        regions=(
            RegionConfig("r1", 1, "127.0.0.1:1", 7001),
            RegionConfig("r2", 2, "127.0.0.1:2", 7002),
        ),
        replication_factor=3,
        min_insync_replicas=2,
    )
    assert MirrorSet(topology).mirror("r1", "r2").route.replication == Replication(3, 2)
