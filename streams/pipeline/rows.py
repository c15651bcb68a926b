"""Op-log records -> Arrow record batches with the `streams_oplog` schema.

Why Arrow and not Python tuples: a Python data source that yields `pyarrow.RecordBatch`es skips
Spark's per-row pickling, which is most of the cost of a tuple-yielding reader.

Columns (the Kafka source's plus the decoded op):
  topic, partition, offset, timestamp (the record's Kafka timestamp), timestampType,
  kind ('op' replicated, 'local' region-local), origin (writing region id), seq (its op number),
  ctx (causal context: region id -> seq), ts (the origin's wall-clock time of the op),
  key (the stream key, bytes), op (body type: XAdd, Del, ...), args (the body without the key,
  as JSON), value (the raw Avro record of the op, what the folds decode), txn_last (the seq of
  the last op of the record's transaction when it goes on in later records, else 0: the folds
  apply a transaction whole or not at all), and headers (includeHeaders). A Kafka record that
  is a pack of several ops (`streams.ops.pack`) gives a row per op, each with the record's
  topic, partition, offset, timestamp and headers and the op's own record bytes as `value`.
  A record the record gate skips (a signing region's, unsigned) gives one row of kind
  `skipped`: `op` says why (`forged`), `args` the reason, `value` the record; no origin.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Message

from streams.crdt.ops import LocalOp, Op
from streams.kafka.gate import RecordRefused, Refusal
from streams.kafka.headers import headers_of
from streams.kafka.records import Admission, Skip
from streams.ops.codec import DEFAULT_CODEC, Datum

SCHEMA_DDL = (
    "topic string, partition int, offset long, timestamp timestamp, timestampType int, "
    "kind string, origin int, seq long, ctx map<int,long>, ts timestamp, key binary, "
    "op string, args string, value binary, txn_last long"
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
    pa.field("txn_last", pa.int64()),
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
    messages: Iterable[Message],
    include_headers: bool,
    columns: Iterable[str] | None = None,
    admission: Admission | None = None,
) -> Iterator[pa.RecordBatch]:
    """Decode records into Arrow batches of up to BATCH_ROWS rows, with only `columns` (names of
    `arrow_schema(include_headers)`, in the order given; default all). A column nobody asked for
    costs nothing: `args` (the body as JSON) is a third of the decoding time.

    Every record passes `admission` (`streams.kafka.records`, the node's record gate): a record
    it skips (forged) becomes one row of kind `skipped` (its `op` says why, `args` the reason);
    one that does not decode or that the gate refuses is an error (`CorruptRecordError`), as it
    stops a node. `txn_last` is the record's `continues`: the seq of the last op of its
    transaction when the transaction goes on in later records, else 0."""
    admission = admission or Admission(None)
    full = arrow_schema(include_headers)
    schema = full if columns is None else pa.schema([full.field(c) for c in columns])
    names = set(schema.names)
    cols: dict[str, list[Any]] = {f.name: [] for f in schema}
    n = 0
    for msg in messages:
        topic = msg.topic() or ""
        partition = msg.partition() or 0
        offset = msg.offset() or 0
        record: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
        if "timestamp" in names or "timestampType" in names:
            ts_type, ts = msg.timestamp()
            record["timestamp"] = ts * 1000 if ts_type else None
            record["timestampType"] = ts_type - 1 if ts_type else -1
        if "headers" in names:
            record["headers"] = _headers(msg)
        value = msg.value()
        heads = msg.headers() if admission.wants_headers else None
        try:
            admitted = admission.admit(topic, partition, offset, value, heads)
        except RecordRefused as exc:
            raise CorruptRecordError(
                f"{topic}[{partition}] offset {offset} is not an op-log record: {exc.reason}"
                if exc.kind is Refusal.CORRUPT
                else f"{topic}[{partition}] offset {offset} is refused by the record gate "
                f"(as a node refuses it): {exc.reason}"
            ) from exc
        rows = [_skipped_row(record, skip, value) for skip in admitted.skipped]
        for item, op in admitted.items:
            row = dict(record)
            row["value"] = item
            row["txn_last"] = admitted.continues
            _op_columns(row, op, item, names)
            rows.append(row)
        for row in rows:
            for name, col in cols.items():
                col.append(row.get(name))
            n += 1
            if n == BATCH_ROWS:
                yield pa.RecordBatch.from_pydict(cols, schema=schema)
                cols = {f.name: [] for f in schema}
                n = 0
    if n:
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


def _op_columns(row: dict[str, Any], op: Op | LocalOp, item: bytes, names: set[str]) -> None:
    """The decoded op's columns (from the op the gate checked; the Avro datum only for `args`)."""
    if isinstance(op, Op):
        row["kind"], row["origin"] = "op", op.origin
    else:
        row["kind"], row["origin"] = "local", op.region
    row["seq"] = op.seq
    if "ctx" in names:
        row["ctx"] = list(op.ctx)
    row["ts"] = op.ts_ms * 1000
    row["key"] = op.body.key
    row["op"] = type(op.body).__name__  # the Avro record's name (oplog.avsc)
    if "args" in names:
        row["args"] = args_json(DEFAULT_CODEC.decode_datum(item)["body"][1])


def _skipped_row(record: dict[str, Any], skip: Skip, value: bytes | None) -> dict[str, Any]:
    """A record the gate skipped, as a row of kind `skipped`: folds pass it over, the audit
    counts it, and anyone can see it (`df.where("kind = 'skipped'")`)."""
    row = dict(record)
    row.update(kind="skipped", op=skip.kind.value, value=value or b"", txn_last=0)
    row["args"] = json.dumps({"reason": skip.reason}, separators=(",", ":"))
    row["ctx"] = []
    return row


def decode_value(value: bytes) -> Op | LocalOp:
    """The op of a `value` cell (what the folds use)."""
    return DEFAULT_CODEC.decode(value)
