"""The materializer's record gate (streams/node/trust.py): which decoded records may reach the
state. Pure: records and bytes built here, no broker."""

from __future__ import annotations

import pytest

from streams.crdt import ops
from streams.node.trust import WINDOW, RecordGate, UntrustedRecord, topic_region
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
