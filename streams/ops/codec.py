"""Op-log record codec: `Op` / `LocalOp` <-> Kafka record value (Avro single-object encoding).

Why single-object encoding: every record carries the 8-byte CRC-64-AVRO fingerprint of the schema
that wrote it (`C3 01 | fingerprint LE | Avro binary`). A reader looks that fingerprint up among
every schema version we ever shipped (`schemas/oplog_vN.avsc`) and resolves it to the current
schema, so logs written years ago stay replayable after the schema evolves, and a record written
by a newer, unknown schema is refused loudly instead of being misread.

Bodies are converted by one walk over each op dataclass's fields, chosen once per type at import
from the field's Avro type in the current schema (an ID, IDs, per-origin IDs, entry fields:
`_BY_AVRO_TYPE`), so a new op type needs its schema branch and nothing here. The Avro record
name is the Python class name and the Avro field names are the dataclass's: renaming either
changes the wire format, so this module checks at import that the current schema's body
branches are exactly the op types of `streams.crdt.ops` (and tests/unit/test_codec.py pins the
fingerprint of every shipped schema).

IDs (`StreamID`, unsigned 64-bit in Redis) are stored as Avro `long` with the same two's-complement
bit pattern: values >= 2^63 are written as `value - 2^64` and mapped back on read (see the schema's
`StreamID` doc). Every other integer (seq, ts_ms, counters) is an Avro `long` as is.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Any, NamedTuple, cast

import fastavro
from fastavro.schema import fingerprint as _avro_fingerprint
from fastavro.schema import to_parsing_canonical_form

from streams.avro_binary import signed_u64, unsigned_u64
from streams.crdt.ops import (
    LOCAL_TYPES,
    REPLICATED_TYPES,
    Body,
    EntryRef,
    LocalBody,
    LocalOp,
    Op,
    OriginIds,
    ReplicatedBody,
    Vector,
    XAdd,
)
from streams.ids import StreamID
from streams.ops.fast_xadd import XADD_FAST_PATH_FINGERPRINT, xadd_from_payload, xadd_payload

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
    "Sealed",
    "Record",
    "Schema",
    "decode",
    "encode",
    "fingerprint_of",
    "from_datum",
    "headers",
    "known_schemas",
    "load_schema",
    "seal",
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
    try:
        return signed_u64(v)
    except ValueError as exc:
        raise EncodeError(str(exc)) from None


def _id_out(sid: StreamID) -> Datum:
    ms, seq = sid
    return {"ms": _u64(ms), "seq": _u64(seq)}


def _id_in(d: Datum) -> StreamID:
    ms: int = d["ms"]
    seq: int = d["seq"]
    return (unsigned_u64(ms), unsigned_u64(seq))


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


# Bodies <-> Avro datums, by the schema's field types rather than the dataclass annotations:
# those are erased to bare runtime types (`tuple`, `type`) when streams.crdt.ops is compiled.

_FieldCodec = tuple[Callable[[Any], Any], Callable[[Any], Any]]
_PLAIN: _FieldCodec = (lambda v: v, lambda v: v)
_BY_AVRO_TYPE: dict[str, _FieldCodec] = {
    "StreamID": (_id_out, _id_in),
    "null|StreamID": (_opt_id_out, _opt_id_in),
    "array<StreamID>": (_ids_out, _ids_in),
    "array<OriginId>": (_oids_out, _oids_in),
    "array<bytes>": (list, tuple),
    "bytes": _PLAIN,
    "long": _PLAIN,
    "boolean": _PLAIN,
    "null|long": _PLAIN,
}

# Keyed by exact type: a subclass is not an op type the schema knows.
_BY_NAME: dict[str, type] = {_NAMESPACE + t.__name__: t for t in (*REPLICATED_TYPES, *LOCAL_TYPES)}


def _avro_type_name(avro_type: Any) -> str:
    """A field's Avro type as a short name: `StreamID`, `null|long`, `array<OriginId>`, ...
    (named types without their namespace, whether defined there or referenced by name)."""
    if isinstance(avro_type, list):
        return "|".join(_avro_type_name(branch) for branch in avro_type)
    if isinstance(avro_type, dict):
        if avro_type["type"] == "array":
            return f"array<{_avro_type_name(avro_type['items'])}>"
        if "name" in avro_type:
            return str(avro_type["name"]).rsplit(".", 1)[-1]
        return _avro_type_name(avro_type["type"])
    return str(avro_type).rsplit(".", 1)[-1]


def _body_branches(schema: Schema) -> dict[str, dict[str, Any]]:
    """The record branches of a schema's body union, by full name."""
    body: list[dict[str, Any]] = next(
        (f["type"] for f in schema["fields"] if f["name"] == "body"), []
    )
    return {_NAMESPACE + b["name"].rsplit(".", 1)[-1]: b for b in body}


def _field_codecs(body_type: type, branch: dict[str, Any]) -> tuple[tuple[str, _FieldCodec], ...]:
    """Per dataclass field of the op type, in constructor order, its converter pair, chosen by
    the field's Avro type in the schema branch of the same name."""
    avro_fields = {f["name"]: f["type"] for f in branch["fields"]}
    out = []
    for field in dataclasses.fields(body_type):
        if field.name not in avro_fields:
            raise TypeError(f"{body_type.__name__}.{field.name}: not in the op-log schema")
        avro = _avro_type_name(avro_fields[field.name])
        if avro not in _BY_AVRO_TYPE:
            raise TypeError(f"{body_type.__name__}.{field.name}: no codec for Avro type {avro}")
        out.append((field.name, _BY_AVRO_TYPE[avro]))
    return tuple(out)


def _body_out(body: Body) -> Datum:
    return {name: out(getattr(body, name)) for name, (out, _in) in _FIELDS[type(body)]}


def _body_in(body_type: type, d: Datum) -> Body:
    return cast(Body, body_type(*(to_py(d[name]) for name, (_out, to_py) in _FIELDS[body_type])))


def to_datum(record: Record) -> Datum:
    """The Avro datum of an op, the body as a `(full name, datum)` union branch so fastavro need
    not guess the branch. Raises EncodeError for anything the schema cannot hold."""
    body = record.body
    if type(body) not in _FIELDS:
        raise EncodeError(f"not an op body: {type(body).__name__}")
    name = _NAMESPACE + type(body).__name__
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
        "body": (name, _body_out(body)),
    }


def from_datum(d: Datum) -> Record:
    """The op of an Avro datum read with `return_record_name=True` (so the body union arrives as
    `(full name, datum)`). Raises DecodeError if the body does not belong to the kind: the
    schema alone cannot forbid a local body in a replicated record."""
    name, body_datum = d["body"]
    body_type = _BY_NAME.get(name)
    if body_type is None:  # only if a reader schema grew a body type this module does not know
        raise DecodeError(f"op-log record with unknown body type {name!r}")
    body = _body_in(body_type, body_datum)
    kind = d["kind"]
    if kind == "op":
        if not isinstance(body, ReplicatedBody):
            raise DecodeError(f"replicated op record carries the local body {type(body).__name__}")
        return Op(d["origin"], d["seq"], _vector_in(d["ctx"]), d["ts_ms"], body)
    if kind == "local":
        if not isinstance(body, LocalBody):
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
        self._xadd_fast = self.fingerprint.hex() == XADD_FAST_PATH_FINGERPRINT
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
        if self._xadd_fast and type(record) is Op and type(record.body) is XAdd:
            try:
                return bytes(self._prefix + xadd_payload(record, record.body))
            except EncodeError:
                raise
            except (TypeError, ValueError) as exc:  # an ID part or field of the wrong type
                raise EncodeError(f"cannot encode op-log record: {exc}") from exc
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
        if (
            self._xadd_fast
            and data is not None
            and data[:_HEADER_LEN] == self._prefix
            and (fast := xadd_from_payload(data, _HEADER_LEN)) is not None
        ):
            return fast
        datum = self.decode_datum(data)
        try:
            return from_datum(datum)
        except DecodeError:
            raise
        except Exception as exc:  # a reader schema this module's converters do not match
            raise DecodeError(f"op-log record does not convert to an op: {exc!r}") from exc


CURRENT_SCHEMA: Schema = _read_package_schema("oplog.avsc")


def _check_body_branches(schema: Schema) -> None:
    """The schema's `body` union names exactly the op types (`_BY_NAME`), in any order."""
    branches = set(_body_branches(schema))
    if branches != set(_BY_NAME):
        raise RuntimeError(
            f"oplog.avsc's body branches {sorted(branches)} are not the op types of "
            f"streams.crdt.ops {sorted(_BY_NAME)}"
        )


_check_body_branches(CURRENT_SCHEMA)
_FIELDS: dict[type, tuple[tuple[str, _FieldCodec], ...]] = {
    _BY_NAME[name]: _field_codecs(_BY_NAME[name], branch)
    for name, branch in _body_branches(CURRENT_SCHEMA).items()
}
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


class Sealed(NamedTuple):
    """An op as the writer appends it: Kafka key (the stream key), value (`encode`), and the op
    itself, whose headers are made only if the op is written as a record of its own (most go
    in packs, `streams.ops.pack`, whose records have headers of their own: `fixed_headers`)."""

    key: bytes
    value: bytes
    record: Record | None
    fixed_headers: KafkaHeaders | None = None

    @property
    def headers(self) -> KafkaHeaders:
        if self.fixed_headers is not None or self.record is None:
            return self.fixed_headers or []
        return headers(self.record)


def seal(record: Record) -> Sealed:
    """Encode an op for the log; raises EncodeError when it cannot be, so the node refuses the
    command that made it before applying it, instead of failing a whole batch later."""
    return Sealed(record.body.key, encode(record), record)
