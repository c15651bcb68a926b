"""Folding op-log DataFrames by key on Spark: per-key states, entries, digests.

Each job reads the `streams_oplog` source, keeps the replicated ops (and, when a region is named,
that region's `.local` records), groups them by (partition, key) and folds each group on an
executor with `streams.pipeline.fold` (the node's own `streams.crdt` code). What leaves the
executor depends on the job: the converged entries (export, follow), per-key digests and
duplicate IDs (audit), or the per-key state or snapshot records (snapshot).

Why the partition is part of the group: partition s is shard s, a state machine with its own op
numbering, so ops of different partitions may carry the same dot (origin, seq) and their contexts
count different ops. A key's ops are all in its shard's partition, so the group is the key's; had
a writer put one key's ops in two partitions, the node would hold two states of it, one per shard,
and so do the folds here: dots of two shards never meet in one fold. Rows carry the shard (the
partition) wherever a job needs per-shard results.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streams.crdt.ops import Op
from streams.crdt.state import KeyState
from streams.ids import MAX_ID, MIN_ID
from streams.pipeline.fold import fold_key, key_digest
from streams.pipeline.rows import decode_value
from streams.pipeline.snapshot_file import digest_feed, key_part

ENTRIES_DDL = (
    "key string, key_bytes binary, pos long, id string, origin int, fields map<binary,binary>"
)
AUDIT_DDL = (
    "shard int, key_bytes binary, digest string, entries long, groups long, ops long, "
    "duplicate_ids array<string>, digest_feed binary"
)
STATE_DDL = "shard int, key_bytes binary, state binary"
PARTS_DDL = "shard int, key_bytes binary, records array<binary>, entries long, digest_feed binary"

_ENTRIES_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("key_bytes", pa.binary()),
        pa.field("pos", pa.int64()),
        pa.field("id", pa.string()),
        pa.field("origin", pa.int32()),
        pa.field("fields", pa.map_(pa.binary(), pa.binary())),
    ]
)
_AUDIT_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.int32()),
        pa.field("key_bytes", pa.binary()),
        pa.field("digest", pa.string()),
        pa.field("entries", pa.int64()),
        pa.field("groups", pa.int64()),
        pa.field("ops", pa.int64()),
        pa.field("duplicate_ids", pa.list_(pa.string())),
        pa.field("digest_feed", pa.binary()),
    ]
)
_STATE_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.int32()),
        pa.field("key_bytes", pa.binary()),
        pa.field("state", pa.binary()),
    ]
)
_PARTS_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.int32()),
        pa.field("key_bytes", pa.binary()),
        pa.field("records", pa.list_(pa.binary())),
        pa.field("entries", pa.int64()),
        pa.field("digest_feed", pa.binary()),
    ]
)


def key_text(key: bytes) -> str:
    """A key as text for partition directories and people (non-UTF-8 bytes as \\xNN)."""
    return key.decode("utf-8", "backslashreplace")


def id_text(sid: tuple[int, int]) -> str:
    return f"{sid[0]}-{sid[1]}"


def relevant(df: DataFrame, local_topic: str | None = None) -> DataFrame:
    """The records a fold needs: replicated ops, plus the named region's local records (rows
    of kind `skipped`, records the record gate skipped, never)."""
    keep = F.col("kind") == F.lit("op")
    if local_topic is not None:
        keep = keep | ((F.col("topic") == F.lit(local_topic)) & (F.col("kind") == F.lit("local")))
    return df.where(keep).select("partition", "key", "value")


def whole_transactions(df: DataFrame, reference: DataFrame | None = None) -> DataFrame:
    """`df` without the ops of transactions whose end was not read: an op whose `txn_last`
    (its transaction goes on to that seq in later records) lies past every seq read of its
    origin in its partition. Why: a per-key fold applies each key's part of a transaction on
    its own, so a transaction read in part (cut by the end of the range read, or by a mirror
    that has copied only its first records) would be applied half, some keys with their ops
    and others without; the node's fold applies it whole or not at all. `reference`: the rows
    to tell what was read from (default `df`; `follow` folds some keys out of all it stored)."""
    ops = (reference if reference is not None else df).where(F.col("kind") == F.lit("op"))
    ends = ops.groupBy("partition", "origin").agg(F.max("seq").alias("_read_to"))
    txn = F.coalesce(F.col("txn_last"), F.lit(0))
    return (
        df.join(F.broadcast(ends), ["partition", "origin"], "left")
        .where((txn == 0) | (txn <= F.coalesce(F.col("_read_to"), F.lit(0))))
        .drop("_read_to")
    )


class ConflictingDot(RuntimeError):
    """Two records under one dot with other bytes in one key's fold: one of them was not
    written by the region's writer (the node stops on it too, naming both)."""


def _fold_table(table: pa.Table) -> tuple[int, bytes, KeyState | None, int]:
    """One group's fold: (shard, key, the key's state, how many records)."""
    shard = table.column("partition")[0].as_py()
    key = table.column("key")[0].as_py()
    values = table.column("value").to_pylist()
    records = [decode_value(v) for v in values]
    seen: dict[tuple[int, int], bytes] = {}
    for value, record in zip(values, records, strict=True):
        if isinstance(record, Op):  # copies of a dot are normal; other bytes are not
            first = seen.setdefault((record.origin, record.seq), value)
            if first != value:
                raise ConflictingDot(
                    f"partition {shard} key {key_text(key)!r}: two records carry dot "
                    f"{record.origin}:{record.seq} with other bytes (one was not written by "
                    "the region's writer; a node stops on it too)"
                )
    region = fold_key(records)
    return shard, key, region.state.raw(key), len(records)


def _entries(table: pa.Table) -> pa.Table:
    _shard, key, ks, _n = _fold_table(table)
    rows: dict[str, list[object]] = {f.name: [] for f in _ENTRIES_SCHEMA}
    if ks is not None:
        text = key_text(key)
        for pos, (sid, origin, fields) in enumerate(ks.entries.range(MIN_ID, MAX_ID)):
            rows["key"].append(text)
            rows["key_bytes"].append(key)
            rows["pos"].append(pos)
            rows["id"].append(id_text(sid))
            rows["origin"].append(origin)
            rows["fields"].append(list(zip(fields[0::2], fields[1::2], strict=True)))
    return pa.Table.from_pydict(rows, schema=_ENTRIES_SCHEMA)


def _audit(table: pa.Table) -> pa.Table:
    shard, key, ks, n = _fold_table(table)
    exists = ks is not None and ks.exists
    digest = key_digest(key, ks) if ks is not None and exists else ""
    dups: list[str] = []
    if ks is not None:
        seen: dict[tuple[int, int], int] = {}
        for sid, _origin, _fields in ks.entries.range(MIN_ID, MAX_ID):
            seen[sid] = seen.get(sid, 0) + 1
        dups = [id_text(sid) for sid, c in sorted(seen.items()) if c > 1]
    return pa.Table.from_pydict(
        {
            "shard": [shard],
            "key_bytes": [key],
            "digest": [digest],
            "entries": [ks.entries.length if ks is not None else 0],
            "groups": [len(ks.groups) if ks is not None else 0],
            "ops": [n],
            "duplicate_ids": [dups],
            "digest_feed": [digest_feed(key, ks) if ks is not None else b""],
        },
        schema=_AUDIT_SCHEMA,
    )


def _state(table: pa.Table) -> pa.Table:
    shard, key, ks, _n = _fold_table(table)
    blob = b"" if ks is None else pickle.dumps(ks, protocol=pickle.HIGHEST_PROTOCOL)
    return pa.Table.from_pydict(
        {"shard": [shard], "key_bytes": [key], "state": [blob]}, schema=_STATE_SCHEMA
    )


def _parts(table: pa.Table) -> pa.Table:
    shard, key, ks, _n = _fold_table(table)
    if ks is None:
        return _PARTS_SCHEMA.empty_table()
    part = key_part(key, ks, shard)
    return pa.Table.from_pydict(
        {
            "shard": [shard],
            "key_bytes": [key],
            "records": [part.records],
            "entries": [part.entries],
            "digest_feed": [part.digest_feed],
        },
        schema=_PARTS_SCHEMA,
    )


def _by_key(df: DataFrame, fn: Callable[[pa.Table], pa.Table], ddl: str) -> DataFrame:
    return df.groupBy("partition", "key").applyInArrow(fn, ddl)


def entries(
    df: DataFrame, local_topic: str | None = None, reference: DataFrame | None = None
) -> DataFrame:
    """The converged entries of every key (one row per entry, `pos` = rank in ID order); a
    transaction whose end was not read is left out whole (`whole_transactions`)."""
    whole = whole_transactions(df, reference)
    return _by_key(relevant(whole, local_topic), _entries, ENTRIES_DDL)


def audit_keys(df: DataFrame) -> DataFrame:
    """Per key: its shard, digest (empty when the key does not exist), entry/group/op counts,
    duplicate IDs (the same ID from several origins: semi-strict and liberal modes) and its
    input to its shard's digest (`snapshot_file.digest_feed`)."""
    return _by_key(relevant(df), _audit, AUDIT_DDL)


def key_states(df: DataFrame, local_topic: str | None = None) -> DataFrame:
    """Per key: the pickled `KeyState` (empty bytes when the ops left nothing)."""
    return _by_key(relevant(df, local_topic), _state, STATE_DDL)


def key_parts(df: DataFrame, local_topic: str | None, partitions: int) -> DataFrame:
    """Per key (keys without state left out): its shard, snapshot records and digest input
    (`snapshot_file.key_part`), in `partitions` Spark partitions holding increasing ranges of
    (shard, key), each in that order: read partition by partition, the rows come shard by shard,
    each shard's in key order (Spark orders binary as unsigned bytes, as Python does)."""
    ranged = relevant(df, local_topic).repartitionByRange(
        partitions, F.col("partition").asc(), F.col("key").asc()
    )
    return _by_key(ranged, _parts, PARTS_DDL)


def collect_states(df: DataFrame) -> Iterable[tuple[int, bytes, KeyState]]:
    """The per-key states (shard, key, state) on the driver, one Spark partition at a time."""
    for row in df.toLocalIterator():
        if row["state"]:
            yield row["shard"], bytes(row["key_bytes"]), pickle.loads(row["state"])
