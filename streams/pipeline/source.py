"""The `streams_oplog` PySpark data source: op-log topics as a DataFrame, batch and streaming.

    spark.dataSource.register(OpLogDataSource)
    df = (spark.read.format("streams_oplog")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092").load())

Why a Python data source and not Spark's Kafka connector: that connector and spark-avro are Maven
jars this project cannot install, and the op records are Avro single-object encoded with our own
schema registry-free fingerprints anyway (streams/ops/codec.py). Offsets are planned on the driver
and read on the executors with confluent-kafka; each Spark input partition is one offset range.

Why not named `kafka`: Spark resolves a JVM source of that name first.

Determinism: a partition is a fixed offset range of an immutable log, so the same offsets always
give the same rows, which is what Spark's checkpoint recovery of a streaming query relies on.
Streaming offsets are Kafka-shaped JSON `{"r1.oplog": {"0": 42}}` (next offset to read).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from streams.pipeline import kafka_io
from streams.pipeline.kafka_io import Range, SourceError
from streams.pipeline.options import (
    SourceOptions,
    offsets_from_json,
    offsets_json,
    parse,
)
from streams.pipeline.rows import HEADERS_DDL, SCHEMA_DDL, arrow_schema, to_batches

SOURCE_NAME = "streams_oplog"


class RangePartition(InputPartition):
    """One Spark input partition: an offset range (picklable, sent to an executor)."""

    def __init__(self, rng: Range) -> None:
        super().__init__(rng)
        self.range = rng


def _read(
    opts: SourceOptions, partition: InputPartition, columns: list[str] | None
) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, RangePartition)
    yield from to_batches(kafka_io.read_range(opts, partition.range), opts.include_headers, columns)


def projection(opts: SourceOptions, schema: StructType) -> list[str] | None:
    """The columns to produce for `schema`: None for the whole schema, else the names of a
    user-given schema (`spark.read.schema(...)`) that picks some of the source's columns, each
    with its own type (Python data sources get no column pruning from Spark: this is how a job
    that needs few columns, like the snapshot, skips decoding the others)."""
    full = arrow_schema(opts.include_headers)
    names = [f.name for f in schema.fields]
    if names == full.names:
        return None
    bad = [
        f"{f.name} {f.dataType.simpleString()}"
        for f in schema.fields
        if f.name not in full.names
        or to_arrow_type(f.dataType, timezone="UTC") != full.field(f.name).type
    ]
    if bad:
        raise SourceError(
            f"schema columns not in the {SOURCE_NAME} schema ({SCHEMA_DDL}"
            f"{HEADERS_DDL if opts.include_headers else ''}): {', '.join(bad)}"
        )
    return names


def _planning_consumer(opts: SourceOptions) -> Consumer:
    return Consumer(kafka_io.consumer_config(opts, "plan"))


def _starting(
    opts: SourceOptions, consumer: Consumer, tps: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    if opts.starting_timestamp is not None:
        return kafka_io.offsets_for_time(consumer, tps, opts.starting_timestamp)
    return kafka_io.resolve(opts, consumer, tps, opts.starting, "starting")


class OpLogBatchReader(DataSourceReader):
    """Plans `[startingOffsets, endingOffsets)` per partition once, when Spark asks."""

    def __init__(self, opts: SourceOptions, columns: list[str] | None = None) -> None:
        self.opts = opts
        self.columns = columns

    def plan(self) -> list[Range]:
        consumer = _planning_consumer(self.opts)
        try:
            tps = kafka_io.partitions_of(self.opts, consumer)
            start = _starting(self.opts, consumer, tps)
            end = kafka_io.resolve(self.opts, consumer, tps, self.opts.ending, "ending")
        finally:
            consumer.close()
        bad = [
            f"{t}[{p}] {start[(t, p)]} > {end[(t, p)]}"
            for t, p in tps
            if start[(t, p)] > end[(t, p)]
        ]
        if bad:
            raise SourceError(f"starting offsets after ending offsets: {', '.join(bad)}")
        ranges = [Range(t, p, start[(t, p)], end[(t, p)]) for t, p in tps]
        return kafka_io.split(ranges, self.opts.min_partitions)

    def partitions(self) -> Sequence[InputPartition]:
        return [RangePartition(r) for r in self.plan()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition, self.columns)


class OpLogStreamReader(DataSourceStreamReader):
    """Micro-batches over the growing op logs. Offsets name the next offset per partition;
    topics that appear later (subscribePattern, or a new region's op log) start at their
    earliest offset."""

    def __init__(self, opts: SourceOptions, columns: list[str] | None = None) -> None:
        self.opts = opts
        self.columns = columns

    def _latest(self, known: dict[str, dict[int, int]]) -> dict[str, dict[int, int]]:
        consumer = _planning_consumer(self.opts)
        try:
            tps = kafka_io.partitions_of(self.opts, consumer)
            out: dict[str, dict[int, int]] = {}
            for tp in tps:
                end = kafka_io.log_end(consumer, tp)
                out.setdefault(tp[0], {})[tp[1]] = end
            for tp in tps:  # new partitions start at their earliest offset
                if tp[1] not in known.get(tp[0], {}):
                    known.setdefault(tp[0], {})[tp[1]] = kafka_io.resolve(
                        self.opts, consumer, [tp], "earliest", "starting"
                    )[tp]
        finally:
            consumer.close()
        return out

    def initialOffset(self) -> dict[str, Any]:
        consumer = _planning_consumer(self.opts)
        try:
            tps = kafka_io.partitions_of(self.opts, consumer)
            start = _starting(self.opts, consumer, tps)
        finally:
            consumer.close()
        offsets: dict[str, dict[int, int]] = {}
        for (t, p), o in start.items():
            offsets.setdefault(t, {})[p] = o
        return offsets_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        latest = self._latest(begin)
        maximum = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offsets_json(cap(begin, latest, maximum))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        stop = offsets_from_json(end)
        ranges = [
            Range(t, p, begin.get(t, {}).get(p, 0), o)
            for t, parts in sorted(stop.items())
            for p, o in sorted(parts.items())
        ]
        return [RangePartition(r) for r in kafka_io.split(ranges, self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition, self.columns)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, never in Kafka."""


def cap(
    begin: dict[str, dict[int, int]], latest: dict[str, dict[int, int]], maximum: int | None
) -> dict[str, dict[int, int]]:
    """The end offsets of the next micro-batch: everything available, or at most `maximum`
    offsets shared among the partitions in proportion to their backlog (as Spark's Kafka source
    does); every partition with a backlog gets at least one when the limit allows, so a query
    always progresses."""
    ends = {t: dict(parts) for t, parts in latest.items()}
    for t, parts in begin.items():  # a partition that vanished keeps its position
        for p, o in parts.items():
            ends.setdefault(t, {}).setdefault(p, o)
    if maximum is None:
        return {
            t: {p: max(o, begin.get(t, {}).get(p, 0)) for p, o in parts.items()}
            for t, parts in ends.items()
        }
    backlog = {
        (t, p): max(0, o - begin.get(t, {}).get(p, 0))
        for t, parts in ends.items()
        for p, o in parts.items()
    }
    total = sum(backlog.values())
    out = {t: {p: begin.get(t, {}).get(p, 0) for p in parts} for t, parts in ends.items()}
    if total <= maximum:
        return {t: {p: out[t][p] + backlog[(t, p)] for p in parts} for t, parts in out.items()}
    budget = maximum
    for tp in sorted(backlog):
        if backlog[tp] == 0:
            continue
        share = min(backlog[tp], max(1, maximum * backlog[tp] // total), budget)
        out[tp[0]][tp[1]] += share
        budget -= share
        if budget <= 0:
            break
    return out


class OpLogDataSource(DataSource):
    """`spark.read.format("streams_oplog")` and `spark.readStream.format("streams_oplog")`."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.opts = parse(options)

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA_DDL + (HEADERS_DDL if self.opts.include_headers else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        return OpLogBatchReader(self.opts, projection(self.opts, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OpLogStreamReader(self.opts, projection(self.opts, schema))
