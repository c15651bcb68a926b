"""Op-log records -> Arrow record batches with the `streams_oplog` schema.

Why Arrow and not Python tuples: a Python data source that yields `pyarrow.RecordBatch`es skips
Spark's per-row pickling, which is most of the cost of a tuple-yielding reader.

Columns (the Kafka source's plus the decoded op):
  topic, partition, offset, timestamp (the record's Kafka timestamp), timestampType,
  kind ('op' replicated, 'local' region-local), origin (writing region id), seq (its op number),
  ctx (causal context: region id -> seq), ts (the origin's wall-clock time of the op),
  key (the stream key, bytes), op (body type: XAdd, Del, ...), args (the body without the key,
  as JSON), value (the raw Avro record of the op, what the folds decode), and headers
  (includeHeaders). A Kafka record that is a pack of several ops (`streams.ops.pack`) gives a
  row per op, each with the record's topic, partition, offset, timestamp and headers and the
  op's own record bytes as `value`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Message

from streams.crdt.ops import LocalOp, Op
from streams.kafka.headers import headers_of
from streams.ops.codec import DEFAULT_CODEC, Datum, DecodeError
from streams.ops.pack import PackError, is_pack, unpack

SCHEMA_DDL = (
    "topic string, partition int, offset long, timestamp timestamp, timestampType int, "
    "kind string, origin int, seq long, ctx map<int,long>, ts timestamp, key binary, "
    "op string, args string, value binary"
)
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"

_UTC_US = pa.timestamp("us", tz="UTC")
_FIELDS = [
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _UTC_US),
    pa.field("timestampType", pa.int32()),
    pa.field("kind", pa.string()),
    pa.field("origin", pa.int32()),
    pa.field("seq", pa.int64()),
    pa.field("ctx", pa.map_(pa.int32(), pa.int64())),
    pa.field("ts", _UTC_US),
    pa.field("key", pa.binary()),
    pa.field("op", pa.string()),
    pa.field("args", pa.string()),
    pa.field("value", pa.binary()),
]
_HEADERS = pa.field(
    "headers",
    pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])),
)
BATCH_ROWS = 4096


def arrow_schema(include_headers: bool) -> pa.Schema:
    return pa.schema(_FIELDS + ([_HEADERS] if include_headers else []))


class CorruptRecordError(RuntimeError):
    """A record in an op-log topic that is not an op-log record; never skipped silently."""


def _text(b: bytes) -> str:
    return b.decode("utf-8", "backslashreplace")


def _jsonable(value: Any) -> Any:
    """Avro datum parts -> JSON: bytes as text, IDs as 'ms-seq', unions as their datum."""
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, dict):
        if set(value) == {"ms", "seq"}:
            ms, seq = value["ms"], value["seq"]
            return f"{ms % (1 << 64)}-{seq % (1 << 64)}"
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def args_json(body: Datum) -> str:
    """The body's fields except the key, as JSON (for people and SQL, not for folding)."""
    return json.dumps(
        {k: _jsonable(v) for k, v in body.items() if k != "key"}, separators=(",", ":")
    )


def _headers(msg: Message) -> list[tuple[str, bytes | None]]:
    return headers_of(msg)


def to_batches(
    messages: Iterable[Message], include_headers: bool, columns: Iterable[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """Decode records into Arrow batches of up to BATCH_ROWS rows, with only `columns` (names of
    `arrow_schema(include_headers)`, in the order given; default all). A column nobody asked for
    costs nothing: `args` (the body as JSON) is a third of the decoding time."""
    full = arrow_schema(include_headers)
    schema = full if columns is None else pa.schema([full.field(c) for c in columns])
    names = set(schema.names)
    cols: dict[str, list[Any]] = {f.name: [] for f in schema}
    n = 0
    for msg in messages:
        value = msg.value()
        topic = msg.topic() or ""
        offset = msg.offset() or 0
        record: dict[str, Any] = {"topic": topic, "partition": msg.partition(), "offset": offset}
        if "timestamp" in names or "timestampType" in names:
            ts_type, ts = msg.timestamp()
            record["timestamp"] = ts * 1000 if ts_type else None
            record["timestampType"] = ts_type - 1 if ts_type else -1
        if "headers" in names:
            record["headers"] = _headers(msg)
        for item, datum in _datums(topic, msg.partition(), offset, value):
            row = dict(record)
            row["value"] = item
            body_name, body = datum["body"]
            row["kind"] = datum["kind"]
            row["origin"] = datum["origin"]
            row["seq"] = datum["seq"]
            if "ctx" in names:
                row["ctx"] = [(c["region"], c["seq"]) for c in datum["ctx"]]
            row["ts"] = datum["ts_ms"] * 1000
            row["key"] = body["key"]
            row["op"] = body_name.rsplit(".", 1)[-1]
            if "args" in names:
                row["args"] = args_json(body)
            for name, col in cols.items():
                col.append(row[name])
            n += 1
            if n == BATCH_ROWS:
                yield pa.RecordBatch.from_pydict(cols, schema=schema)
                cols = {f.name: [] for f in schema}
                n = 0
    if n:
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


def _datums(
    topic: str, partition: int | None, offset: int, value: bytes | None
) -> list[tuple[bytes, Datum]]:
    """Each op of a Kafka record (a pack's items, or the record itself) with its raw datum:
    always decoded, since a record that is not an op-log record is an error whatever is read."""
    try:
        items: list[bytes | None] = [*unpack(value)] if is_pack(value) else [value]
        return [(item or b"", DEFAULT_CODEC.decode_datum(item)) for item in items]
    except (DecodeError, PackError) as exc:
        raise CorruptRecordError(
            f"{topic}[{partition}] offset {offset} is not an op-log record: {exc}"
        ) from exc


def decode_value(value: bytes) -> Op | LocalOp:
    """The op of a `value` cell (what the folds use)."""
    return DEFAULT_CODEC.decode(value)
