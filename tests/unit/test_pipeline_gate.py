"""The Spark source's rows go through the node's admission step (streams/pipeline/rows.py), and
a per-key fold refuses two records under one dot (streams/pipeline/folding.py). Pure: records
built here, no Spark session, no broker."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streams.crdt import ops
from streams.crdt.region import Region
from streams.kafka.gate import signed
from streams.kafka.records import Admission, Trust
from streams.ops.codec import encode, seal
from streams.ops.pack import sealed_records
from streams.pipeline.folding import ConflictingDot, _fold_table
from streams.pipeline.rows import CorruptRecordError, arrow_schema, to_batches

KEY = bytes.fromhex("22" * 32)


class Msg:
    """What `to_batches` reads of a confluent-kafka Message."""

    def __init__(self, topic: str, offset: int, value: bytes, headers: list | None = None) -> None:  # type: ignore[type-arg]
        self._topic, self._offset, self._value, self._headers = topic, offset, value, headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list | None:  # type: ignore[type-arg]
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return (1, 5_000)


def _rows(messages: list[Msg], admission: Admission) -> list[dict[str, object]]:
    table = pa.Table.from_batches(
        list(to_batches(messages, False, None, admission)), schema=arrow_schema(False)
    )
    return table.to_pylist()


def test_a_forged_record_becomes_a_skipped_row_and_a_signed_one_gives_its_ops() -> None:
    r1 = Region(1)
    real = seal(r1.issue(ops.XAdd(b"k", (10, 1), (b"f", b"v")), 10))
    forged = encode(ops.Op(1, 2, (), 11, ops.XAdd(b"k", (11, 1), (b"f", b"x"))))
    admission = Admission(Trust({1: "r1", 2: "r2"}, {1: KEY}).gate())
    rows = _rows(
        [
            Msg("r1.oplog", 0, real.value, signed([], KEY, real.value)),
            Msg("r1.oplog", 1, forged, []),
        ],
        admission,
    )
    assert [(r["kind"], r["op"], r["offset"]) for r in rows] == [
        ("op", "XAdd", 0),
        ("skipped", "forged", 1),
    ]
    assert rows[0]["origin"] == 1 and rows[0]["seq"] == 1 and rows[0]["key"] == b"k"
    assert rows[0]["args"] == '{"id":"10-1","fields":["f","v"]}'
    assert rows[1]["origin"] is None and "is not signed" in str(rows[1]["args"])
    assert admission.skipped == 1


def test_rows_say_where_a_transaction_of_several_records_ends() -> None:
    r1 = Region(1)
    run = [seal(r1.issue(ops.XAdd(b"k", (10 + i, 1), (b"i", b"%d" % i)), 10)) for i in range(4)]
    records = sealed_records(run, limit=2 * len(run[0].value))
    msgs = [Msg("r1.oplog", n, r.value) for n, r in enumerate(records)]
    rows = _rows(msgs, Admission(Trust({1: "r1"}).gate()))
    assert [(r["seq"], r["txn_last"]) for r in rows] == [(1, 4), (2, 4), (3, 0), (4, 0)]


def test_a_record_the_gate_refuses_fails_the_read_as_it_stops_a_node() -> None:
    op2 = encode(ops.Op(2, 1, (), 1, ops.XAdd(b"k", (1, 2), (b"f", b"v"))))
    with pytest.raises(CorruptRecordError, match="refused by the record gate.*op log of region r1"):
        _rows([Msg("r1.oplog", 3, op2)], Admission(Trust({1: "r1", 2: "r2"}).gate()))
    with pytest.raises(CorruptRecordError, match="is not an op-log record"):
        _rows([Msg("r1.oplog", 4, b"junk")], Admission(Trust({1: "r1"}).gate()))


def test_a_per_key_fold_refuses_two_records_under_one_dot_and_absorbs_copies() -> None:
    real = encode(ops.Op(1, 1, (), 1, ops.XAdd(b"k", (1, 1), (b"f", b"real"))))
    other = encode(ops.Op(1, 1, (), 1, ops.XAdd(b"k", (1, 1), (b"f", b"forged"))))

    def table(values: list[bytes]) -> pa.Table:
        n = len(values)
        return pa.table({"partition": [0] * n, "key": [b"k"] * n, "value": values})

    shard, key, ks, count = _fold_table(table([real, real]))  # a mirror's second copy
    assert (shard, key, count) == (0, b"k", 2) and ks is not None and ks.entries.length == 1
    with pytest.raises(ConflictingDot, match="dot 1:1"):
        _fold_table(table([real, other]))
