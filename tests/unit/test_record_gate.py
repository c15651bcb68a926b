"""The materializer's record gate (streams/kafka/gate.py): which decoded records may reach the
state. Pure: records and bytes built here, no broker."""

from __future__ import annotations

import pytest

from streams.config import RegionConfig, Topology, TopologyError, dumps, loads
from streams.crdt import ops
from streams.kafka.gate import (
    WINDOW,
    ForgedRecord,
    RecordGate,
    UntrustedRecord,
    signed,
    topic_region,
)
from streams.ops.codec import encode

REGIONS = {1: "r1", 2: "r2"}


def xadd(origin: int, seq: int, value: bytes = b"v") -> ops.Op:
    return ops.Op(origin, seq, (), 1_000, ops.XAdd(b"k", (1_000, seq), (b"f", value)))


def check(gate: RecordGate, topic: str, offset: int, op: ops.Op) -> None:
    gate.check(topic, 0, offset, encode(op), op)


def test_the_region_of_an_op_log_topic_under_either_naming() -> None:
    assert topic_region("r1.oplog") == "r1"
    assert topic_region("A.r1.oplog") == "r1"


def test_ops_of_the_topics_own_region_pass_and_identical_copies_are_duplicates() -> None:
    gate = RecordGate(REGIONS, 2)
    for seq in range(1, 4):
        check(gate, "r1.oplog", seq, xadd(1, seq))
    check(gate, "r1.oplog", 10, xadd(1, 2))  # a mirror's second copy: same bytes


def test_an_origin_that_is_no_region_of_the_topology_is_refused() -> None:
    gate = RecordGate(REGIONS, 2)
    with pytest.raises(UntrustedRecord, match="region id 9, is not a region") as refused:
        check(gate, "r1.oplog", 5, xadd(9, 1))
    assert "--skip-record r1.oplog:0:5" in str(refused.value)


def test_an_op_in_another_regions_op_log_is_refused() -> None:
    gate = RecordGate(REGIONS, 2)
    with pytest.raises(UntrustedRecord, match="op of region r2 .* in the op log of region r1"):
        check(gate, "A.r1.oplog", 0, xadd(2, 1))


def test_a_second_record_under_a_dot_with_other_bytes_is_a_conflict_naming_both() -> None:
    gate = RecordGate(REGIONS, 2)
    check(gate, "r1.oplog", 7, xadd(1, 1, b"forged"))
    with pytest.raises(UntrustedRecord) as refused:
        check(gate, "r1.oplog", 8, xadd(1, 1, b"real"))
    text = str(refused.value)
    assert "offset 8" in text and "offset 7" in text and "dot 1:1" in text


def test_dots_older_than_the_window_are_left_to_the_folds_duplicate_drop() -> None:
    gate = RecordGate(REGIONS, 2)
    check(gate, "r1.oplog", 0, xadd(1, 1, b"a"))
    check(gate, "r1.oplog", 1, xadd(1, 1 + WINDOW, b"b"))  # takes dot 1's slot
    check(gate, "r1.oplog", 2, xadd(1, 1, b"c"))  # not compared any more: no refusal


def test_local_ops_are_not_the_gates_business() -> None:
    gate = RecordGate(REGIONS, 2)
    local = ops.LocalOp(2, 1, 1_000, ops.Ack(b"k", b"g", ((1_000, 1),)))
    gate.check("r2.local", 0, 0, b"", local)


KEY = bytes.fromhex("11" * 32)


def test_a_region_with_a_key_has_its_records_refused_unsigned_or_wrongly_signed() -> None:
    gate = RecordGate(REGIONS, 2, keys={1: KEY})
    op = xadd(1, 1)
    value = encode(op)
    gate.check("r1.oplog", 0, 0, value, op, headers=signed([("origin", b"1")], KEY, value))
    with pytest.raises(ForgedRecord, match="is not signed"):
        gate.check("r1.oplog", 0, 1, encode(xadd(1, 2)), xadd(1, 2), headers=[])
    forged = xadd(1, 3)
    wrong = signed([], bytes.fromhex("22" * 32), encode(forged))
    with pytest.raises(ForgedRecord, match="wrong signature"):
        gate.check("r1.oplog", 0, 2, encode(forged), forged, headers=wrong)
    other = xadd(2, 1)  # r2 has no key: its records are not checked for one
    gate.check("r2.oplog", 0, 0, encode(other), other, headers=None)


def test_a_signing_key_in_the_topology_file_is_read_back_and_checked() -> None:
    text = dumps(
        Topology(
            regions=(
                RegionConfig("r1", 1, "127.0.0.1:9092", 6380, signing_key="ab" * 32),
                RegionConfig("r2", 2, "127.0.0.1:9093", 6381),
            )
        )
    )
    assert loads(text).regions[0].signing_key == "ab" * 32
    with pytest.raises(TopologyError, match="signing_key"):
        loads(text.replace("ab" * 32, "not-hex"))
