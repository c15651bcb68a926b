"""Op packs (streams.ops.pack): several op-log records in one Kafka record, read back exactly, and
what the readers do with them (the fold's positions)."""

from __future__ import annotations

import io
import json
from importlib import resources

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.crdt import ops
from streams.crdt.fold import Fold
from streams.ids import IdMode
from streams.ops.codec import DecodeError, decode, encode, seal
from streams.ops.pack import (
    PACK_FINGERPRINT,
    PACK_PREFIX,
    PACK_V1_PREFIX,
    PackError,
    decode_all,
    decode_each,
    decode_record,
    is_pack,
    pack,
    pack_sealed,
    packed,
    unpack,
)

# The fingerprints of oppack.avsc (version 2) and oppack_v1.avsc, forever: packs in logs carry them.
PACK_V1_FINGERPRINT = "afd4713cd79e67db"
PACK_V2_FINGERPRINT = "82ac34686dad208c"


def xadd(origin: int, seq: int, key: bytes = b"k", ctx: ops.Vector = ()) -> ops.Op:
    body = ops.XAdd(key=key, id=(1000 + seq, origin), fields=(b"f", b"%d" % seq))
    return ops.Op(origin=origin, seq=seq, ts_ms=1000 + seq, ctx=ctx, body=body)


def test_the_pack_schema_fingerprints_are_frozen() -> None:
    assert PACK_FINGERPRINT.hex() == PACK_V2_FINGERPRINT
    assert PACK_V1_PREFIX[2:].hex() == PACK_V1_FINGERPRINT


def test_a_version_1_pack_is_still_read_as_complete() -> None:
    records = [xadd(1, s) for s in range(1, 4)]
    v1 = (
        PACK_V1_PREFIX
        + b"\x06"
        + b"".join(bytes([2 * len(v)]) + v for v in (encode(r) for r in records))
        + b"\x00"
    )
    assert is_pack(v1)
    assert decode_record(v1) == (list(zip([encode(r) for r in records], records, strict=True)), 0)


def test_a_pack_whose_transaction_ends_before_its_last_op_is_refused() -> None:
    values = [encode(xadd(1, s)) for s in range(1, 4)]
    with pytest.raises(DecodeError, match="ending at seq 3 says its transaction ends at 2"):
        decode_record(pack(values, txn_last=2))


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=40))
def test_a_pack_reads_back_its_items_in_order(items: list[bytes]) -> None:
    value = pack(items)
    assert is_pack(value)
    assert unpack(value) == items


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=40))
def test_a_pack_is_the_avro_single_object_encoding_of_its_schema(items: list[bytes]) -> None:
    schema = json.loads(resources.files("streams.ops").joinpath("oppack.avsc").read_text())
    value = pack(items)
    assert value[:10] == PACK_PREFIX
    datum = fastavro.schemaless_reader(io.BytesIO(value[10:]), fastavro.parse_schema(schema))
    assert datum == {"ops": items, "txn_last": 0}
    # ... and any valid encoding of it is read (fastavro writes its own blocks)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {"ops": items, "txn_last": 0})
    assert unpack(PACK_PREFIX + out.getvalue()) == items


def test_a_pack_in_several_array_blocks_with_sizes_is_read() -> None:
    # count -1 with a byte size, then count 1, then the end: two blocks of one item
    value = PACK_PREFIX + b"\x01\x06\x04ab" + b"\x02\x02c" + b"\x00" + b"\x00"
    assert unpack(value) == [b"ab", b"c"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (PACK_PREFIX + b"\x04\x04ab", "ends inside"),
        (PACK_PREFIX + b"\x02\x08ab\x00", "past the end"),
        (PACK_PREFIX + b"\x02\x04ab\x00junk", "trailing bytes"),
        (PACK_PREFIX + b"\x00\x00", "an empty pack"),
        (PACK_PREFIX + b"\xff" * 11, "longer than 10 bytes"),
    ],
)
def test_a_malformed_pack_is_refused_saying_why(value: bytes, says: str) -> None:
    with pytest.raises(PackError, match=says):
        unpack(value)
    with pytest.raises(DecodeError, match=says):
        decode_each(value)


def test_decode_each_reads_a_pack_and_a_single_record_alike() -> None:
    records = [xadd(1, s, ctx=((2, s),)) for s in range(1, 6)]
    values = [encode(r) for r in records]
    assert decode_each(pack(values)) == list(zip(values, records, strict=True))
    assert decode_all(values[0]) == [records[0]] == [decode(values[0])]


def test_an_item_that_is_not_an_op_log_record_is_named() -> None:
    value = pack([encode(xadd(1, 1)), b"garbage"])
    with pytest.raises(DecodeError, match="item 1 of an op pack of 2"):
        decode_all(value)


def test_a_pack_inside_a_pack_is_refused() -> None:
    inner = pack([encode(xadd(1, 1)), encode(xadd(1, 2))])
    with pytest.raises(DecodeError, match="item 0 of an op pack of 1.*unknown schema"):
        decode_all(pack([inner]))


def test_a_pack_mixing_origins_or_kinds_is_refused() -> None:
    with pytest.raises(DecodeError, match="one kind and origin"):
        decode_all(pack([encode(xadd(1, 1)), encode(xadd(2, 1))]))
    local = ops.LocalOp(region=1, seq=1, ts_ms=5, ctx=(), body=ops.DelConsumer(b"k", b"g", b"c"))
    with pytest.raises(DecodeError, match="one kind and origin"):
        decode_all(pack([encode(xadd(1, 1)), encode(local)]))


def test_runs_keep_order_cover_everything_and_stay_under_the_limit() -> None:
    values = [b"x" * n for n in (10, 20, 30, 200, 5, 5, 5, 90, 1)]
    runs = list(packed(values, limit=100))
    assert [i for a, b in runs for i in range(a, b)] == list(range(len(values)))
    for a, b in runs:
        if b - a > 1:
            assert sum(len(v) for v in values[a:b]) <= 100
    assert (3, 4) in runs  # the 200-byte value alone
    assert list(packed([], limit=100)) == []


def test_a_run_of_one_is_the_plain_record_and_a_pack_says_what_it_holds() -> None:
    sealed = [seal(xadd(3, s, key=b"k%d" % s)) for s in (7, 8, 9)]
    assert pack_sealed(sealed[:1]) == sealed[0]
    packed_record = pack_sealed(sealed)
    assert packed_record.key == b""
    assert dict(packed_record.headers) == {
        "origin": b"3",
        "seq": b"7",
        "last_seq": b"9",
        "kind": b"op",
        "type": b"OpPack",
        "count": b"3",
    }
    assert decode_all(packed_record.value) == [decode(s.value) for s in sealed]


def test_the_fold_counts_a_pack_applied_only_once_every_op_of_it_is() -> None:
    """A snapshot taken at `safe_positions` and a replay of the tail from there must not lose
    the ops of a pack that were held back: the pack's offset stays the safe position until its
    last op is applied."""
    fold = Fold.fresh(1, IdMode.LIBERAL)
    part = ("r2.oplog", 0)
    # r2's ops 1..3 in one pack at offset 0; op 2 depends on r3's op 1, not yet read
    for op in (xadd(2, 1), xadd(2, 2, ctx=((3, 1),)), xadd(2, 3, ctx=((3, 1),))):
        fold.feed(part, 0, op)
    assert fold.region.vector == {2: 1}
    assert fold.safe_positions()[part] == 0
    fold.feed(("r3.oplog", 0), 0, xadd(3, 1))
    assert fold.region.vector == {2: 3, 3: 1}
    assert fold.safe_positions() == {part: 1, ("r3.oplog", 0): 1}
