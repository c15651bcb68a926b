"""The op-log codec: exact round trips of every op type, the single-object framing, refusal of
anything that is not a record we can read, and schema evolution in both directions. (The codec's
speed is measured by `python -m bench.micro`, not here.)
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pytest
from fastavro.schema import to_parsing_canonical_form
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams import native
from streams.crdt import ops
from streams.crdt.ops import (
    LOCAL_TYPES,
    REPLICATED_TYPES,
    Ack,
    AckEffect,
    Body,
    Claim,
    Del,
    DelConsumer,
    Deliver,
    GroupCreate,
    GroupDestroy,
    LocalOp,
    Op,
    SetId,
    TouchConsumer,
    XAdd,
    XDel,
    XSetId,
    XTrim,
)
from streams.ids import U64_MAX
from streams.ops import codec
from streams.ops.codec import (
    CURRENT_SCHEMA,
    DEFAULT_CODEC,
    MARKER,
    SCHEMA_FINGERPRINT,
    Codec,
    DecodeError,
    EncodeError,
    decode,
    encode,
    from_datum,
    headers,
    load_schema,
    to_datum,
)
from streams.ops.fast_xadd import XADD_FAST_PATH_FINGERPRINT, xadd_from_payload

DATA = Path(__file__).parent / "data"
PACKAGE_SCHEMAS = Path(codec.__file__).parent / "schemas"
V2 = load_schema((DATA / "oplog_v2.avsc").read_bytes())

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
U64_EDGES = [0, 1, 2**63 - 1, 2**63, U64_MAX]

# The fingerprint of schemas/oplog_v1.avsc, forever: records in existing logs carry it.
V1_FINGERPRINT = "7e7a41339d378ccc"

# --- strategies ----------------------------------------------------------------------------

u64 = st.one_of(st.sampled_from(U64_EDGES), st.integers(0, U64_MAX))
i64 = st.one_of(st.sampled_from([I64_MIN, -1, 0, 1, I64_MAX]), st.integers(I64_MIN, I64_MAX))
opt_i64 = st.none() | i64
sid = st.tuples(u64, u64)
opt_sid = st.none() | sid
# Binary names: NUL bytes, non-UTF-8, empty.
blob = st.one_of(
    st.sampled_from([b"", b"\x00", b"\xff\xfe", b"\x80abc\x00", b"k\x00\xff"]),
    st.binary(max_size=24),
)
origin = st.one_of(st.integers(0, 255), i64)
origin_ids = st.lists(st.tuples(origin, sid), max_size=4).map(tuple)  # EntryRefs may repeat
vector = st.lists(st.tuples(origin, i64), max_size=4).map(tuple)
ids = st.lists(sid, max_size=4).map(tuple)

BODIES: dict[type, st.SearchStrategy[Any]] = {
    XAdd: st.builds(XAdd, key=blob, id=sid, fields=st.lists(blob, max_size=6).map(tuple)),
    Del: st.builds(Del, key=blob),
    XDel: st.builds(XDel, key=blob, ids=ids),
    XTrim: st.builds(XTrim, key=blob, thresholds=origin_ids),
    XSetId: st.builds(XSetId, key=blob, last_id=sid, entries_added=opt_i64, max_deleted_id=opt_sid),
    GroupCreate: st.builds(
        GroupCreate, key=blob, group=blob, default=sid, start=origin_ids, entries_read=opt_i64
    ),
    GroupDestroy: st.builds(GroupDestroy, key=blob, group=blob),
    AckEffect: st.builds(AckEffect, key=blob, group=blob, frontier=origin_ids),
    Deliver: st.builds(
        Deliver,
        key=blob,
        group=blob,
        consumer=blob,
        now_ms=i64,
        entries=origin_ids,
        noack=st.booleans(),
        entries_read=opt_i64,
    ),
    TouchConsumer: st.builds(
        TouchConsumer, key=blob, group=blob, consumer=blob, now_ms=i64, redelivered=origin_ids
    ),
    Ack: st.builds(Ack, key=blob, group=blob, ids=ids),
    Claim: st.builds(
        Claim,
        key=blob,
        group=blob,
        consumer=blob,
        now_ms=i64,
        entries=origin_ids,
        delivery_time_ms=i64,
        retry_count=opt_i64,
        increment=st.booleans(),
        dropped=origin_ids,
        last_id=opt_sid,
    ),
    SetId: st.builds(
        SetId, key=blob, group=blob, default=sid, start=origin_ids, entries_read=opt_i64
    ),
    DelConsumer: st.builds(DelConsumer, key=blob, group=blob, consumer=blob),
    ops.DropRefs: st.builds(ops.DropRefs, key=blob, thresholds=origin_ids, ids=ids),
    ops.Idmp: st.builds(ops.Idmp, key=blob, pid=blob, iid=blob, origin=origin, id=sid),
    ops.IdmpDuplicate: st.builds(ops.IdmpDuplicate, key=blob),
    ops.StreamConfig: st.builds(
        ops.StreamConfig, key=blob, duration_s=i64, maxsize=i64, clear=st.booleans()
    ),
    ops.Nack: st.builds(
        ops.Nack, key=blob, group=blob, entries=origin_ids, mode=i64, retry_count=opt_i64
    ),
}


def record_of(body: Body) -> st.SearchStrategy[Op | LocalOp]:
    if isinstance(body, REPLICATED_TYPES):
        return st.builds(Op, origin=origin, seq=i64, ctx=vector, ts_ms=i64, body=st.just(body))
    return st.builds(LocalOp, region=origin, seq=i64, ts_ms=i64, body=st.just(body), ctx=vector)


records = st.one_of(*BODIES.values()).flatmap(record_of)


def _sample_xadd(i: int = 1) -> Op:
    return Op(
        1,
        i,
        ((1, i - 1), (2, 7)),
        1_700_000_000_000 + i,
        XAdd(b"orders", (1_700_000_000_000 + i, 1), (b"name", b"alice", b"qty", b"3")),
    )


SAMPLES: list[Op | LocalOp] = [
    _sample_xadd(),
    Op(3, 42, ((1, 7), (3, 41)), 1_700_000_000_123, XAdd(b"k\x00\xff", (U64_MAX, 2**63), ())),
    LocalOp(2, 9, 17, Deliver(b"s", b"g", b"c", 5, ((1, (1, 2)),), False, None), ((2, 8),)),
    LocalOp(2, 10, 18, TouchConsumer(b"s", b"g", b"c", 6)),
]


# --- coverage of ops.py --------------------------------------------------------------------


def test_every_op_type_has_a_strategy_a_codec_entry_and_a_schema_branch() -> None:
    """A body type added to ops.py fails here until the schema and the codec carry it."""
    types = set(REPLICATED_TYPES) | set(LOCAL_TYPES)
    assert set(BODIES) == types
    branches = {b["name"] for b in CURRENT_SCHEMA["fields"][-1]["type"]}
    assert CURRENT_SCHEMA["fields"][-1]["name"] == "body"
    assert branches == {t.__name__ for t in types}


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("body_type", list(BODIES), ids=lambda t: t.__name__)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_body_type(body_type: type, data: st.DataObject) -> None:
    record = data.draw(BODIES[body_type].flatmap(record_of))
    out = decode(encode(record))
    assert out == record
    assert type(out) is type(record) and type(out.body) is body_type
    _assert_exact_types(out)


def _assert_exact_types(value: object) -> None:
    """Equal is not enough: lists where ops.py has tuples would compare unequal only sometimes
    and break hashing; bytearray/memoryview would break dict keys."""
    if isinstance(value, (Op, LocalOp, *REPLICATED_TYPES, *LOCAL_TYPES)):
        for field in dataclasses.fields(value):  # (compiled, the classes have no __slots__)
            _assert_exact_types(getattr(value, field.name))
        hash(value)
    elif isinstance(value, tuple):
        for item in value:
            _assert_exact_types(item)
    else:
        assert value is None or type(value) in (bytes, int, bool), type(value)


@pytest.mark.parametrize("ms", U64_EDGES)
@pytest.mark.parametrize("seq", U64_EDGES)
def test_u64_id_edges_round_trip(ms: int, seq: int) -> None:
    body = XSetId(b"k", (ms, seq), None, (seq, ms))
    record = Op(1, 1, (), 0, body)
    assert decode(encode(record)) == record
    # stored as the signed long with the same bit pattern
    datum = codec.to_datum(record)["body"][1]["last_id"]
    assert datum["ms"] == (ms if ms < 2**63 else ms - 2**64)
    assert I64_MIN <= datum["seq"] <= I64_MAX


def test_i64_edges_of_plain_integers_round_trip() -> None:
    for v in (I64_MIN, -1, 0, I64_MAX):
        record = LocalOp(v, v, v, Claim(b"", b"", b"", v, (), v, v, False, (), None), ((v, v),))
        assert decode(encode(record)) == record


def test_defaults_and_empty_tuples_round_trip() -> None:
    record = LocalOp(1, 1, 1, TouchConsumer(b"k", b"g", b"c", 0))
    out = decode(encode(record))
    assert out == record and out.ctx == () and isinstance(out.body, TouchConsumer)
    assert out.body.redelivered == ()


@settings(max_examples=300, deadline=None)
@given(records)
def test_round_trip_any_record(record: Op | LocalOp) -> None:
    assert decode(encode(record)) == record


# --- framing and headers -------------------------------------------------------------------


def _rabin(data: bytes) -> int:
    """CRC-64-AVRO as the Avro spec gives it, independent of fastavro."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def test_rabin_matches_avro_spec_test_vectors() -> None:
    # avro share/test/data/schema-tests.txt (Java prints them as signed longs)
    assert _rabin(b'"null"') == 7195948357588979594
    assert _rabin(b'"int"') == 8247732601305521295


@settings(max_examples=50, deadline=None)
@given(records)
def test_single_object_framing(record: Op | LocalOp) -> None:
    data = encode(record)
    assert data[:2] == MARKER == b"\xc3\x01"
    canonical = to_parsing_canonical_form(CURRENT_SCHEMA).encode()
    assert data[2:10] == _rabin(canonical).to_bytes(8, "little")
    assert data[2:10].hex() == SCHEMA_FINGERPRINT
    # the payload is plain Avro binary any Avro reader decodes with the writer schema
    buf = io.BytesIO(data[10:])
    datum = fastavro.schemaless_reader(buf, CURRENT_SCHEMA)
    assert buf.tell() == len(data) - 10
    assert isinstance(datum, dict)
    assert datum["kind"] == ("op" if isinstance(record, Op) else "local")
    assert datum["seq"] == record.seq


def test_headers() -> None:
    op = Op(12, 345, ((12, 344),), 1, XAdd(b"k", (1, 2), ()))
    assert headers(op) == [("origin", b"12"), ("seq", b"345"), ("kind", b"op"), ("type", b"XAdd")]
    local = LocalOp(3, 7, 1, DelConsumer(b"k", b"g", b"c"))
    assert headers(local) == [
        ("origin", b"3"),
        ("seq", b"7"),
        ("kind", b"local"),
        ("type", b"DelConsumer"),
    ]


# --- schema files and old logs -------------------------------------------------------------


def _versions() -> list[Path]:
    return sorted(
        PACKAGE_SCHEMAS.glob("oplog_v*.avsc"), key=lambda p: int(p.stem[len("oplog_v") :])
    )


def test_current_schema_is_the_newest_frozen_version() -> None:
    """oplog.avsc changes only together with a new schemas/oplog_vN.avsc: old ones stay."""
    versions = _versions()
    assert [p.name for p in versions] == [f"oplog_v{n}.avsc" for n in range(1, len(versions) + 1)]
    newest = load_schema(versions[-1].read_bytes())
    assert to_parsing_canonical_form(newest) == to_parsing_canonical_form(CURRENT_SCHEMA)
    assert set(DEFAULT_CODEC.known_fingerprints()) >= {V1_FINGERPRINT, SCHEMA_FINGERPRINT}


V2_FINGERPRINT_FROZEN = "15a34f48a3ed56fd"
"""The fingerprint of schemas/oplog_v2.avsc (the ops of the Redis 8 stream commands), forever."""


def test_v2_schema_is_frozen_and_reads_v1_records() -> None:
    v2 = load_schema((PACKAGE_SCHEMAS / "oplog_v2.avsc").read_bytes())
    assert codec.fingerprint_of(v2).hex() == V2_FINGERPRINT_FROZEN
    for hexdata, record in GOLDEN_V1:
        assert decode(bytes.fromhex(hexdata)) == record


def test_v1_schema_is_frozen() -> None:
    v1 = load_schema((PACKAGE_SCHEMAS / "oplog_v1.avsc").read_bytes())
    assert codec.fingerprint_of(v1).hex() == V1_FINGERPRINT


# Bytes written by version 1: must decode forever, whatever the current schema is.
GOLDEN_V1 = [
    (
        "c3017e7a41339d378ccc000654f6a1abfef96204020e06520000066b00ff01ffffffffffffffffff01040266"
        "04807600",
        Op(
            3,
            42,
            ((1, 7), (3, 41)),
            1_700_000_000_123,
            XAdd(b"k\x00\xff", (U64_MAX, 2**63), (b"f", b"\x80v")),
        ),
    ),
    (
        "c3017e7a41339d378ccc02041290a7abfef96202041000160273026702630a04020204020204000c00010204"
        "00000002feffffffffffffffff0102",
        LocalOp(
            2,
            9,
            1_700_000_000_456,
            Claim(
                b"s",
                b"g",
                b"c",
                5,
                ((1, (1, 2)), (1, (1, 2))),
                6,
                None,
                True,
                ((2, (0, 0)),),
                (2**63 - 1, 1),
            ),
            ((2, 8),),
        ),
    ),
]


@pytest.mark.parametrize("hexdata,record", GOLDEN_V1)
def test_golden_v1_records_decode(hexdata: str, record: Op | LocalOp) -> None:
    assert decode(bytes.fromhex(hexdata)) == record
    if SCHEMA_FINGERPRINT == V1_FINGERPRINT:  # the encoding itself is stable too
        assert encode(record).hex() == hexdata


# --- schema evolution ----------------------------------------------------------------------


def test_v2_reader_reads_v1_records_with_defaults() -> None:
    """(a) An upgraded node (current schema v2) replays logs written by v1."""
    v2 = Codec(V2, [CURRENT_SCHEMA])
    assert v2.fingerprint != DEFAULT_CODEC.fingerprint
    for record in SAMPLES:
        data = encode(record)  # written by v1
        assert v2.decode(data) == record
        datum = v2.decode_datum(data)
        assert datum["trace_id"] is None  # new envelope field: its default
        if isinstance(record.body, XAdd):
            assert datum["body"][1]["source"] == "unknown"  # new body field: its default


def test_v1_reader_reads_v2_records_ignoring_new_fields() -> None:
    """(b) A node not yet upgraded reads what an upgraded one wrote, if it knows the v2 schema
    (it ships in schemas/ before any writer uses it)."""
    v1 = Codec(CURRENT_SCHEMA, [V2])
    v2 = Codec(V2, [CURRENT_SCHEMA])
    for record in SAMPLES:
        datum = codec.to_datum(record)
        datum["trace_id"] = "req-\u00e9-42"
        if isinstance(record.body, XAdd):
            datum["body"][1]["source"] = "sdk"
        data = v2.encode_datum(datum)
        assert data[2:10] == v2.fingerprint
        assert v1.decode(data) == record
        assert "trace_id" not in v1.decode_datum(data)
        assert v2.decode_datum(data)["trace_id"] == "req-\u00e9-42"
        # and v2 writes plain ops too (new fields get their defaults on write)
        assert v1.decode(v2.encode(record)) == record


def test_reader_without_the_newer_schema_refuses_it() -> None:
    v2 = Codec(V2, [CURRENT_SCHEMA])
    with pytest.raises(DecodeError, match="unknown schema fingerprint"):
        decode(v2.encode(SAMPLES[0]))


# --- refusals ------------------------------------------------------------------------------

GOOD = encode(SAMPLES[0])


@pytest.mark.parametrize(
    "data,match",
    [
        (None, "no value"),
        (b"", "not an op-log record"),
        (b"\xc3", "not an op-log record"),
        (b"\xc3\x01" + GOOD[2:9], "not an op-log record"),
        (b"\xc3\x02" + GOOD[2:], "not an op-log record"),
        (b"\x00\x01" + GOOD[2:], "not an op-log record"),
        (b'{"kind": "op"}', "not an op-log record"),
        (GOOD[:2] + b"\x00" * 8 + GOOD[10:], "unknown schema fingerprint 0000000000000000"),
        (GOOD[:10], "corrupt or truncated"),
        (GOOD[:-1], "corrupt or truncated"),
        (GOOD + b"\x00", "1 trailing bytes"),
    ],
)
def test_decode_errors(data: bytes | None, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode(data)


def test_every_truncation_is_refused() -> None:
    for record in SAMPLES:
        data = encode(record)
        for n in range(len(data)):
            with pytest.raises(DecodeError):
                decode(data[:n])


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(DecodeError, ValueError)
    assert issubclass(EncodeError, ValueError)


def test_body_that_does_not_match_the_kind_is_refused() -> None:
    local = codec.to_datum(SAMPLES[2])
    local["kind"] = "op"
    with pytest.raises(DecodeError, match="replicated op record carries the local body Deliver"):
        decode(DEFAULT_CODEC.encode_datum(local))
    replicated = codec.to_datum(SAMPLES[0])
    replicated["kind"] = "local"
    with pytest.raises(DecodeError, match="local op record carries the replicated body XAdd"):
        decode(DEFAULT_CODEC.encode_datum(replicated))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_random_garbage_is_refused(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(data)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_after_a_valid_header_is_refused_or_a_record(payload: bytes) -> None:
    """Avro has no checksum: junk can happen to be a valid record, but nothing else escapes."""
    try:
        out = decode(GOOD[:10] + payload)
    except DecodeError:
        return
    assert isinstance(out, (Op, LocalOp))


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_corrupted_byte_is_refused_or_a_record(record: Op | LocalOp, data: st.DataObject) -> None:
    raw = bytearray(encode(record))
    i = data.draw(st.integers(10, len(raw) - 1))
    raw[i] = data.draw(st.integers(0, 255))
    try:
        out = decode(bytes(raw))
    except DecodeError:
        return
    assert isinstance(out, (Op, LocalOp))


def _build(make: Callable[[], Op | LocalOp]) -> Op | LocalOp | None:
    """The record `make` builds, or None if the op classes refuse to: compiled
    (scripts/build_native.py), they check their fields' types when built, as mypy does, and
    only then may they refuse."""
    try:
        return make()
    except TypeError:
        assert native.is_compiled(ops), "the pure-Python op classes check no types"
        return None


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: Op(1, 1, (), 0, XAdd(b"k", (2**64, 0), ())), "outside 0..2"),
        (lambda: Op(1, 1, (), 0, XAdd(b"k", (0, -1), ())), "outside 0..2"),
        (lambda: Op(1, 2**63, (), 0, Del(b"k")), "cannot encode"),
        (lambda: Op(1, 1, ((1, -(2**63) - 1),), 0, Del(b"k")), "cannot encode"),
        (lambda: Op(1, 1, (), 0, Ack(b"k", b"g", ())), "local body Ack"),  # type: ignore[arg-type]
        (lambda: LocalOp(1, 1, 0, Del(b"k")), "replicated body Del"),  # type: ignore[arg-type]
        (lambda: Op(1, 1, (), 0, "XADD"), "not an op body"),  # type: ignore[arg-type]
        (lambda: Op(1, 1, (), 0, XAdd("k", (0, 1), ())), "cannot encode"),  # type: ignore[arg-type]
        (lambda: Op(1, 1, (), 0, XAdd(b"k", ("0", 1), ())), "cannot encode"),  # type: ignore[arg-type]
        (lambda: Op(1, 1, (), 0, XDel(b"k", ((1, 2, 3),))), "cannot encode"),  # type: ignore[arg-type]
    ],
)
def test_encode_errors(make: Callable[[], Op | LocalOp], match: str) -> None:
    record = _build(make)
    if record is not None:
        with pytest.raises(EncodeError, match=match):
            encode(record)


def test_schema_files_are_valid_json_records() -> None:
    for path in [*_versions(), PACKAGE_SCHEMAS.parent / "oplog.avsc", DATA / "oplog_v2.avsc"]:
        schema = json.loads(path.read_text())
        assert schema["type"] == "record" and schema["namespace"] == "streams.ops"


# --- the XAdd fast path --------------------------------------------------------------------------

_u64 = st.integers(0, 2**64 - 1)
_long = st.integers(-(2**63), 2**63 - 1)
_xadd_ops = st.builds(
    Op,
    origin=st.integers(1, 255),
    seq=st.one_of(st.integers(1, 10**6), st.integers(1, 2**63 - 1)),
    ctx=st.lists(st.tuples(st.integers(1, 255), _long), max_size=4).map(tuple),
    ts_ms=_long,
    body=st.builds(
        XAdd,
        key=st.binary(max_size=40),
        id=st.tuples(_u64, _u64),
        fields=st.lists(st.binary(max_size=20), min_size=0, max_size=8).map(tuple),
    ),
)


def test_the_xadd_fast_path_is_on_for_the_current_schema() -> None:
    """If this fails, the current schema changed: check `_xadd_payload` against it and update
    XADD_FAST_PATH_FINGERPRINT (until then XAdds are written by fastavro, correctly, slower)."""
    assert DEFAULT_CODEC.fingerprint.hex() == XADD_FAST_PATH_FINGERPRINT


@given(_xadd_ops)
def test_the_xadd_fast_path_writes_what_fastavro_writes(op: Op) -> None:
    fast = DEFAULT_CODEC.encode(op)
    slow = DEFAULT_CODEC.encode_datum(to_datum(op))
    assert fast == slow
    assert decode(fast) == op


@pytest.mark.parametrize(
    "make",
    [
        lambda: Op(1, 2**63, (), 0, XAdd(b"k", (1, 1), (b"f", b"v"))),
        lambda: Op(1, 1, ((2, 2**63),), 0, XAdd(b"k", (1, 1), (b"f", b"v"))),
        lambda: Op(1, 1, (), 0, XAdd(b"k", (2**64, 1), (b"f", b"v"))),
        lambda: Op(1, 1, (), -(2**63) - 1, XAdd(b"k", (1, 1), (b"f", b"v"))),
        lambda: Op(1, 1, (), 0, XAdd("k", (1, 1), (b"f", b"v"))),  # type: ignore[arg-type]
    ],
)
def test_the_xadd_fast_path_refuses_what_fastavro_refuses(make: Callable[[], Op]) -> None:
    op = _build(make)
    if op is None:
        return
    assert isinstance(op, Op)
    with pytest.raises(EncodeError):
        DEFAULT_CODEC.encode(op)
    with pytest.raises(EncodeError):
        DEFAULT_CODEC.encode_datum(to_datum(op))


def _slow_decode(data: bytes) -> Op | LocalOp:
    return from_datum(DEFAULT_CODEC.decode_datum(data))


@given(_xadd_ops)
def test_the_xadd_fast_reader_reads_what_fastavro_reads(op: Op) -> None:
    data = DEFAULT_CODEC.encode(op)
    assert xadd_from_payload(data, 10) == _slow_decode(data) == op


def test_the_xadd_fast_reader_takes_arrays_in_blocks_and_leaves_the_rest_to_fastavro() -> None:
    op = Op(1, 7, ((2, 3), (3, 4)), 5, XAdd(b"k", (1, 2), (b"f", b"v", b"g", b"w")))
    plain = DEFAULT_CODEC.encode(op)
    # The same datum with its fields array written as two blocks, the second with a negative
    # count and its byte size (both valid Avro that another writer may produce).
    head = plain[: plain.index(b"\x08\x02f")]  # up to the fields array (count 4)
    blocks = head + b"\x04\x02f\x02v" + b"\x03\x04\x02g\x02w" + b"\x00"
    assert xadd_from_payload(blocks, 10) == _slow_decode(blocks) == op
    assert decode(blocks) == op
    # Not an XAdd, truncated, or trailing bytes: None here; fastavro decides (and says why).
    local = DEFAULT_CODEC.encode(LocalOp(1, 1, 0, Ack(b"k", b"g", ((1, 1),))))
    assert xadd_from_payload(local, 10) is None
    assert xadd_from_payload(plain[:-1], 10) is None
    assert xadd_from_payload(plain + b"\x00", 10) is None
    with pytest.raises(DecodeError, match="trailing bytes"):
        decode(plain + b"\x00")
