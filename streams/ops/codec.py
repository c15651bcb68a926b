"""Op-log record codec: `Op` / `LocalOp` <-> Kafka record value (Avro single-object encoding).

Why single-object encoding: every record carries the 8-byte CRC-64-AVRO fingerprint of the schema
that wrote it (`C3 01 | fingerprint LE | Avro binary`). A reader looks that fingerprint up among
every schema version we ever shipped (`schemas/oplog_vN.avsc`) and resolves it to the current
schema, so logs written years ago stay replayable after the schema evolves, and a record written
by a newer, unknown schema is refused loudly instead of being misread.

Why explicit converters per op type instead of a generic dataclass walk: they are the hot path of
every write and of every replay, and they pin the mapping between the Python field and the Avro
field by name so renaming a Python class cannot silently change the wire format.

IDs (`StreamID`, unsigned 64-bit in Redis) are stored as Avro `long` with the same two's-complement
bit pattern: values >= 2^63 are written as `value - 2^64` and mapped back on read (see the schema's
`StreamID` doc). Every other integer (seq, ts_ms, counters) is an Avro `long` as is.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Any, cast

import fastavro
from fastavro.schema import fingerprint as _avro_fingerprint
from fastavro.schema import to_parsing_canonical_form

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
    EntryRef,
    GroupCreate,
    GroupDestroy,
    LocalOp,
    Op,
    OriginIds,
    SetId,
    TouchConsumer,
    Vector,
    XAdd,
    XDel,
    XSetId,
    XTrim,
)
from streams.ids import U64_MAX, StreamID

__all__ = [
    "CURRENT_SCHEMA",
    "Codec",
    "DEFAULT_CODEC",
    "DecodeError",
    "EncodeError",
    "KafkaHeaders",
    "MARKER",
    "SCHEMA_FINGERPRINT",
    "Datum",
    "Record",
    "Schema",
    "decode",
    "encode",
    "fingerprint_of",
    "from_datum",
    "headers",
    "known_schemas",
    "load_schema",
    "to_datum",
]

Record = Op | LocalOp
Schema = dict[str, Any]
"""An Avro schema as parsed JSON (not the fastavro-parsed form)."""
Datum = dict[str, Any]
"""An op-log record as the Avro datum fastavro writes and reads."""

MARKER = b"\xc3\x01"
"""The two marker bytes that open every Avro single-object encoded value (spec: C3 01)."""

_HEADER_LEN = len(MARKER) + 8
_NAMESPACE = "streams.ops."
_TWO_64 = 1 << 64
_I64_MAX = (1 << 63) - 1


class DecodeError(ValueError):
    """A record value that is not a readable op-log record. The materializer adds the topic,
    partition and offset and stops: nothing is skipped silently."""


class EncodeError(ValueError):
    """An op that cannot be represented (an ID outside 0..2^64-1, an integer outside signed
    64-bit, a wrong field type). Raised before anything is written."""


# --- schemas -------------------------------------------------------------------------------


def load_schema(text: str | bytes) -> Schema:
    """Parses an .avsc document; raises ValueError if it is not a valid Avro schema."""
    schema = json.loads(text)
    if not isinstance(schema, dict):
        raise ValueError("an op-log schema must be a JSON object (an Avro record)")
    fastavro.parse_schema(schema)  # validates; the parsed form is built per Codec
    return cast(Schema, schema)


def _read_package_schema(*parts: str) -> Schema:
    node = resources.files("streams.ops")
    for part in parts:
        node = node.joinpath(part)
    return load_schema(node.read_bytes())


def known_schemas() -> list[Schema]:
    """Every schema version shipped in `streams/ops/schemas/` (append-only: a version that ever
    wrote records must stay, or old logs become unreadable)."""
    folder = resources.files("streams.ops").joinpath("schemas")
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".avsc"))
    return [load_schema(folder.joinpath(name).read_bytes()) for name in names]


def fingerprint_of(schema: Mapping[str, Any]) -> bytes:
    """The 8-byte CRC-64-AVRO (Rabin) fingerprint of the schema's Parsing Canonical Form, in the
    little-endian byte order single-object encoding uses (and Java's SchemaNormalization)."""
    canonical = to_parsing_canonical_form(dict(schema))
    return bytes.fromhex(_avro_fingerprint(canonical, "CRC-64-AVRO"))


# --- dataclass <-> datum -------------------------------------------------------------------


def _u64(v: int) -> int:
    if not 0 <= v <= U64_MAX:
        raise EncodeError(f"stream ID part {v} is outside 0..2^64-1")
    return v - _TWO_64 if v > _I64_MAX else v


def _id_out(sid: StreamID) -> Datum:
    ms, seq = sid
    return {"ms": _u64(ms), "seq": _u64(seq)}


def _id_in(d: Datum) -> StreamID:
    ms: int = d["ms"]
    seq: int = d["seq"]
    return (ms + _TWO_64 if ms < 0 else ms, seq + _TWO_64 if seq < 0 else seq)


def _opt_id_out(sid: StreamID | None) -> Datum | None:
    return None if sid is None else _id_out(sid)


def _opt_id_in(d: Datum | None) -> StreamID | None:
    return None if d is None else _id_in(d)


def _ids_out(ids: tuple[StreamID, ...]) -> list[Datum]:
    return [_id_out(i) for i in ids]


def _ids_in(ds: list[Datum]) -> tuple[StreamID, ...]:
    return tuple([_id_in(d) for d in ds])


def _oids_out(pairs: OriginIds | tuple[EntryRef, ...]) -> list[Datum]:
    return [{"origin": o, "id": _id_out(i)} for o, i in pairs]


def _oids_in(ds: list[Datum]) -> tuple[tuple[int, StreamID], ...]:
    return tuple([(d["origin"], _id_in(d["id"])) for d in ds])


def _vector_out(v: Vector) -> list[Datum]:
    return [{"region": r, "seq": s} for r, s in v]


def _vector_in(ds: list[Datum]) -> Vector:
    return tuple([(d["region"], d["seq"]) for d in ds])


# Encoders: body -> Avro datum. Keyed by exact type (a subclass is not an op type we know).


def _xadd_out(b: XAdd) -> Datum:
    return {"key": b.key, "id": _id_out(b.id), "fields": b.fields}


def _del_out(b: Del) -> Datum:
    return {"key": b.key}


def _xdel_out(b: XDel) -> Datum:
    return {"key": b.key, "ids": _ids_out(b.ids)}


def _xtrim_out(b: XTrim) -> Datum:
    return {"key": b.key, "thresholds": _oids_out(b.thresholds)}


def _xsetid_out(b: XSetId) -> Datum:
    return {
        "key": b.key,
        "last_id": _id_out(b.last_id),
        "entries_added": b.entries_added,
        "max_deleted_id": _opt_id_out(b.max_deleted_id),
    }


def _group_create_out(b: GroupCreate) -> Datum:
    return {
        "key": b.key,
        "group": b.group,
        "default": _id_out(b.default),
        "start": _oids_out(b.start),
        "entries_read": b.entries_read,
    }


def _group_destroy_out(b: GroupDestroy) -> Datum:
    return {"key": b.key, "group": b.group}


def _ack_effect_out(b: AckEffect) -> Datum:
    return {"key": b.key, "group": b.group, "frontier": _oids_out(b.frontier)}


def _deliver_out(b: Deliver) -> Datum:
    return {
        "key": b.key,
        "group": b.group,
        "consumer": b.consumer,
        "now_ms": b.now_ms,
        "entries": _oids_out(b.entries),
        "noack": b.noack,
        "entries_read": b.entries_read,
    }


def _touch_out(b: TouchConsumer) -> Datum:
    return {
        "key": b.key,
        "group": b.group,
        "consumer": b.consumer,
        "now_ms": b.now_ms,
        "redelivered": _oids_out(b.redelivered),
    }


def _ack_out(b: Ack) -> Datum:
    return {"key": b.key, "group": b.group, "ids": _ids_out(b.ids)}


def _claim_out(b: Claim) -> Datum:
    return {
        "key": b.key,
        "group": b.group,
        "consumer": b.consumer,
        "now_ms": b.now_ms,
        "entries": _oids_out(b.entries),
        "delivery_time_ms": b.delivery_time_ms,
        "retry_count": b.retry_count,
        "increment": b.increment,
        "dropped": _oids_out(b.dropped),
        "last_id": _opt_id_out(b.last_id),
    }


def _setid_out(b: SetId) -> Datum:
    return {
        "key": b.key,
        "group": b.group,
        "default": _id_out(b.default),
        "start": _oids_out(b.start),
        "entries_read": b.entries_read,
    }


def _del_consumer_out(b: DelConsumer) -> Datum:
    return {"key": b.key, "group": b.group, "consumer": b.consumer}


# Decoders: Avro datum -> body. Fields a newer reader schema added are simply not looked at.


def _xadd_in(d: Datum) -> XAdd:
    return XAdd(d["key"], _id_in(d["id"]), tuple(d["fields"]))


def _del_in(d: Datum) -> Del:
    return Del(d["key"])


def _xdel_in(d: Datum) -> XDel:
    return XDel(d["key"], _ids_in(d["ids"]))


def _xtrim_in(d: Datum) -> XTrim:
    return XTrim(d["key"], _oids_in(d["thresholds"]))


def _xsetid_in(d: Datum) -> XSetId:
    return XSetId(
        d["key"], _id_in(d["last_id"]), d["entries_added"], _opt_id_in(d["max_deleted_id"])
    )


def _group_create_in(d: Datum) -> GroupCreate:
    return GroupCreate(
        d["key"], d["group"], _id_in(d["default"]), _oids_in(d["start"]), d["entries_read"]
    )


def _group_destroy_in(d: Datum) -> GroupDestroy:
    return GroupDestroy(d["key"], d["group"])


def _ack_effect_in(d: Datum) -> AckEffect:
    return AckEffect(d["key"], d["group"], _oids_in(d["frontier"]))


def _deliver_in(d: Datum) -> Deliver:
    return Deliver(
        d["key"],
        d["group"],
        d["consumer"],
        d["now_ms"],
        _oids_in(d["entries"]),
        d["noack"],
        d["entries_read"],
    )


def _touch_in(d: Datum) -> TouchConsumer:
    return TouchConsumer(
        d["key"], d["group"], d["consumer"], d["now_ms"], _oids_in(d["redelivered"])
    )


def _ack_in(d: Datum) -> Ack:
    return Ack(d["key"], d["group"], _ids_in(d["ids"]))


def _claim_in(d: Datum) -> Claim:
    return Claim(
        d["key"],
        d["group"],
        d["consumer"],
        d["now_ms"],
        _oids_in(d["entries"]),
        d["delivery_time_ms"],
        d["retry_count"],
        d["increment"],
        _oids_in(d["dropped"]),
        _opt_id_in(d["last_id"]),
    )


def _setid_in(d: Datum) -> SetId:
    return SetId(
        d["key"], d["group"], _id_in(d["default"]), _oids_in(d["start"]), d["entries_read"]
    )


def _del_consumer_in(d: Datum) -> DelConsumer:
    return DelConsumer(d["key"], d["group"], d["consumer"])


_Out = Callable[[Any], Datum]
_In = Callable[[Datum], Body]

# (op type, encoder, decoder); the Avro record name is the Python class name, in `streams.ops`.
_BODIES: tuple[tuple[type, _Out, _In], ...] = (
    (XAdd, _xadd_out, _xadd_in),
    (Del, _del_out, _del_in),
    (XDel, _xdel_out, _xdel_in),
    (XTrim, _xtrim_out, _xtrim_in),
    (XSetId, _xsetid_out, _xsetid_in),
    (GroupCreate, _group_create_out, _group_create_in),
    (GroupDestroy, _group_destroy_out, _group_destroy_in),
    (AckEffect, _ack_effect_out, _ack_effect_in),
    (Deliver, _deliver_out, _deliver_in),
    (TouchConsumer, _touch_out, _touch_in),
    (Ack, _ack_out, _ack_in),
    (Claim, _claim_out, _claim_in),
    (SetId, _setid_out, _setid_in),
    (DelConsumer, _del_consumer_out, _del_consumer_in),
)
# Keyed by exact type: a subclass is not an op type the schema knows.
_ENCODERS: dict[type, tuple[str, _Out]] = {t: (_NAMESPACE + t.__name__, o) for t, o, _ in _BODIES}
_DECODERS: dict[str, _In] = {_NAMESPACE + t.__name__: i for t, _, i in _BODIES}


def to_datum(record: Record) -> Datum:
    """The Avro datum of an op, the body as a `(full name, datum)` union branch so fastavro need
    not guess the branch. Raises EncodeError for anything the schema cannot hold."""
    body = record.body
    entry = _ENCODERS.get(type(body))
    if entry is None:
        raise EncodeError(f"not an op body: {type(body).__name__}")
    name, out = entry
    replicated = isinstance(body, REPLICATED_TYPES)
    if isinstance(record, Op):
        if not replicated:
            raise EncodeError(f"a replicated Op cannot carry the local body {type(body).__name__}")
        kind, origin = "op", record.origin
    elif isinstance(record, LocalOp):
        if replicated:
            raise EncodeError(f"a LocalOp cannot carry the replicated body {type(body).__name__}")
        kind, origin = "local", record.region
    else:
        raise EncodeError(f"not an op-log record: {type(record).__name__}")
    return {
        "kind": kind,
        "origin": origin,
        "seq": record.seq,
        "ts_ms": record.ts_ms,
        "ctx": _vector_out(record.ctx),
        "body": (name, out(body)),
    }


def from_datum(d: Datum) -> Record:
    """The op of an Avro datum read with `return_record_name=True` (so the body union arrives as
    `(full name, datum)`). Raises DecodeError if the body does not belong to the kind: the
    schema alone cannot forbid a local body in a replicated record."""
    name, body_datum = d["body"]
    dec = _DECODERS.get(name)
    if dec is None:  # only if a reader schema grew a body type this module does not know
        raise DecodeError(f"op-log record with unknown body type {name!r}")
    body = dec(body_datum)
    kind = d["kind"]
    if kind == "op":
        if not isinstance(body, REPLICATED_TYPES):
            raise DecodeError(f"replicated op record carries the local body {type(body).__name__}")
        return Op(d["origin"], d["seq"], _vector_in(d["ctx"]), d["ts_ms"], body)
    if kind == "local":
        if not isinstance(body, LOCAL_TYPES):
            raise DecodeError(f"local op record carries the replicated body {type(body).__name__}")
        return LocalOp(d["origin"], d["seq"], d["ts_ms"], body, _vector_in(d["ctx"]))
    raise DecodeError(f"op-log record with unknown kind {kind!r}")


# --- the codec -----------------------------------------------------------------------------


class Codec:
    """Writes with `reader_schema` (the current version) and reads any schema in
    `known_schemas` (plus the current one), resolved to the current one.

    The module-level functions use `DEFAULT_CODEC` (the packaged schemas); tests build a Codec
    with another current schema to prove old and new versions read each other.
    """

    def __init__(
        self, reader_schema: Mapping[str, Any], known_schemas: Iterable[Mapping[str, Any]] = ()
    ) -> None:
        self.schema: Schema = dict(reader_schema)
        self.fingerprint: bytes = fingerprint_of(self.schema)
        self._parsed: Any = fastavro.parse_schema(self.schema)
        self._prefix = MARKER + self.fingerprint
        # fingerprint -> parsed writer schema. Parsed per version, each in its own name space:
        # versions share type names (streams.ops.XAdd) with different definitions.
        self._writers: dict[bytes, Any] = {self.fingerprint: self._parsed}
        for schema in known_schemas:
            fp = fingerprint_of(schema)
            if fp not in self._writers:
                self._writers[fp] = fastavro.parse_schema(dict(schema))

    @property
    def fingerprint_hex(self) -> str:
        return self.fingerprint.hex()

    def known_fingerprints(self) -> list[str]:
        return sorted(fp.hex() for fp in self._writers)

    def encode_datum(self, datum: Datum) -> bytes:
        """Single-object encoding of a raw datum with the current schema."""
        buf = io.BytesIO()
        buf.write(self._prefix)
        try:
            fastavro.schemaless_writer(buf, self._parsed, datum)
        except EncodeError:
            raise
        except (TypeError, ValueError, OverflowError, AttributeError, KeyError) as exc:
            raise EncodeError(f"cannot encode op-log record: {exc}") from exc
        return buf.getvalue()

    def encode(self, record: Record) -> bytes:
        try:
            datum = to_datum(record)
        except EncodeError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:  # e.g. an ID that is not a pair
            raise EncodeError(f"cannot encode op-log record: {exc}") from exc
        return self.encode_datum(datum)

    def decode_datum(self, data: bytes | None) -> Datum:
        """The raw datum of a single-object encoded value, resolved to the current schema."""
        if data is None:
            raise DecodeError("op-log record has no value")
        if len(data) < _HEADER_LEN or data[:2] != MARKER:
            raise DecodeError(
                f"not an op-log record: expected Avro single-object marker c301 and an 8-byte "
                f"schema fingerprint, got {bytes(data[:_HEADER_LEN]).hex() or 'nothing'}"
            )
        fp = bytes(data[2:_HEADER_LEN])
        writer = self._writers.get(fp)
        if writer is None:
            raise DecodeError(
                f"op-log record written by unknown schema fingerprint {fp.hex()} "
                f"(known: {', '.join(self.known_fingerprints())}); a newer version of streams "
                f"wrote it, or the value is not an op-log record"
            )
        buf = io.BytesIO(data)
        buf.seek(_HEADER_LEN)
        try:
            datum = fastavro.schemaless_reader(
                buf,
                writer,
                None if writer is self._parsed else self._parsed,
                return_record_name=True,
                return_record_name_override=True,
            )
        except Exception as exc:  # fastavro raises EOFError, IndexError, ValueError, ... on junk
            detail = str(exc) or "unexpected end of data"
            raise DecodeError(
                f"corrupt or truncated op-log record (schema {fp.hex()}, {len(data)} bytes): "
                f"{type(exc).__name__}: {detail}"
            ) from exc
        end = buf.tell()
        if end != len(data):
            raise DecodeError(
                f"corrupt op-log record (schema {fp.hex()}): {len(data) - end} trailing bytes "
                f"after the record"
            )
        if not isinstance(datum, dict):
            raise DecodeError(f"op-log record decoded to {type(datum).__name__}, not a record")
        return datum

    def decode(self, data: bytes | None) -> Record:
        datum = self.decode_datum(data)
        try:
            return from_datum(datum)
        except DecodeError:
            raise
        except Exception as exc:  # a reader schema this module's converters do not match
            raise DecodeError(f"op-log record does not convert to an op: {exc!r}") from exc


CURRENT_SCHEMA: Schema = _read_package_schema("oplog.avsc")
DEFAULT_CODEC = Codec(CURRENT_SCHEMA, known_schemas())

SCHEMA_FINGERPRINT: str = DEFAULT_CODEC.fingerprint_hex
"""CRC-64-AVRO fingerprint of the current schema, hex of the 8 bytes as they appear in records."""


def encode(record: Record) -> bytes:
    """The Kafka record value of an op: C3 01, schema fingerprint, Avro binary."""
    return DEFAULT_CODEC.encode(record)


def decode(data: bytes | None) -> Record:
    """The op of a Kafka record value, whichever known schema version wrote it. Raises
    DecodeError (a ValueError) for anything else."""
    return DEFAULT_CODEC.decode(data)


KafkaHeaders = list[tuple[str, str | bytes | None]]
"""confluent_kafka's `produce(headers=...)` type (lists are invariant, so it must be this one)."""


def headers(record: Record) -> KafkaHeaders:
    """Kafka headers so tools (kcat, console consumers) can filter without Avro: `origin` (the
    writing region), `seq`, `kind` (`op` or `local`), `type` (body type name). Values are
    always ASCII bytes."""
    if isinstance(record, Op):
        origin, kind = record.origin, b"op"
    else:
        origin, kind = record.region, b"local"
    return [
        ("origin", b"%d" % origin),
        ("seq", b"%d" % record.seq),
        ("kind", kind),
        ("type", type(record.body).__name__.encode("ascii")),
    ]
