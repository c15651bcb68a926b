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

import logging
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

from streams.config import TopologyError
from streams.config import load as load_topology
from streams.kafka import clusters
from streams.kafka.records import Admission, Trust, origin_names
from streams.kafka.topics import is_oplog_topic
from streams.pipeline import kafka_io
from streams.pipeline.kafka_io import Range, SourceError
from streams.pipeline.options import (
    SourceOptions,
    offsets_cluster,
    offsets_from_json,
    offsets_json,
    parse,
)
from streams.pipeline.rows import HEADERS_DDL, SCHEMA_DDL, arrow_schema, to_batches

SOURCE_NAME = "streams_oplog"
_log = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One Spark input partition: an offset range (picklable, sent to an executor), and the
    regions the driver learned from the logs (None: the executor reads the topology file)."""

    def __init__(self, rng: Range, regions: dict[int, str] | None = None) -> None:
        super().__init__(rng)
        self.range = rng
        self.regions = regions


def trust(opts: SourceOptions, regions: dict[int, str] | None) -> Trust:
    """What an executor's record gate checks: the topology file's regions and signing keys
    (the `topology` option; the file is read where the executor runs), else the regions the
    driver learned from the first record of each op log."""
    if opts.topology is not None:
        try:
            return Trust.of(load_topology(opts.topology).signers)
        except TopologyError as exc:
            raise SourceError(f"option topology: {exc}") from None
    return Trust(dict(regions or {}), learned=True)


def _read(
    opts: SourceOptions, partition: InputPartition, columns: list[str] | None
) -> Iterator[pa.RecordBatch]:
    """One range on an executor: every record through the node's admission step, with a gate of
    its own (a range is one partition: one shard's dots)."""
    assert isinstance(partition, RangePartition)
    admission = Admission(trust(opts, partition.regions).gate())
    messages = kafka_io.read_range(opts, partition.range)
    yield from to_batches(messages, opts.include_headers, columns, admission)


class Learned:
    """The regions the op logs on the cluster name (driver side, kept across micro-batches):
    the first record of each new op-log partition is read once. Nothing to learn with a
    topology file."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.regions: dict[int, str] = {}
        self._seen: set[tuple[str, int]] = set()

    def regions_for(self, consumer: Consumer, tps: list[tuple[str, int]]) -> dict[int, str] | None:
        if self.opts.topology is not None:
            return None
        new = [tp for tp in tps if tp not in self._seen and is_oplog_topic(tp[0])]
        if new:
            first = kafka_io.first_values(self.opts, consumer, new)
            named = origin_names((topic, value) for (topic, _p), value in first.items())
            for origin, name in named.items():
                self.regions.setdefault(origin, name)
            self._seen.update(first)  # an empty partition is looked at again next time
        return dict(self.regions)


def check_cluster(what: str, taken_on: str | None, here: str | None) -> None:
    """Offsets read from another cluster are refused (`streams.kafka.clusters`)."""
    try:
        clusters.check(
            what,
            taken_on,
            here,
            "a checkpoint belongs to the cluster it followed: point the query at that cluster, "
            "or start it afresh with a new checkpoint directory",
        )
    except clusters.ClusterMismatch as exc:
        raise SourceError(str(exc)) from None


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
        self.learned = Learned(opts)
        self.regions: dict[int, str] | None = None

    def plan(self) -> list[Range]:
        consumer = _planning_consumer(self.opts)
        try:
            tps, cluster = kafka_io.describe(self.opts, consumer)
            check_cluster("startingOffsets / endingOffsets", self.opts.offsets_cluster, cluster)
            start = _starting(self.opts, consumer, tps)
            end = kafka_io.resolve(self.opts, consumer, tps, self.opts.ending, "ending")
            self.regions = self.learned.regions_for(consumer, tps)
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
        ranges = self.plan()
        return [RangePartition(r, self.regions) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition, self.columns)


class OpLogStreamReader(DataSourceStreamReader):
    """Micro-batches over the growing op logs. Offsets name the next offset per partition and
    the cluster they were read from (a checkpoint pointed at another cluster is refused);
    topics that appear later (subscribePattern, or a new region's op log) start at their
    earliest offset."""

    def __init__(self, opts: SourceOptions, columns: list[str] | None = None) -> None:
        self.opts = opts
        self.columns = columns
        self.learned = Learned(opts)
        self.regions: dict[int, str] | None = None
        self.cluster: str | None = None
        self._warned = False

    def _describe(self, consumer: Consumer) -> list[tuple[str, int]]:
        """The subscribed partitions; notes the cluster's id and the regions its logs name."""
        tps, self.cluster = kafka_io.describe(self.opts, consumer)
        self.regions = self.learned.regions_for(consumer, tps)
        return tps

    def _latest(self, known: dict[str, dict[int, int]]) -> dict[str, dict[int, int]]:
        consumer = _planning_consumer(self.opts)
        try:
            tps = self._describe(consumer)
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
            tps, cluster = kafka_io.describe(self.opts, consumer)
            check_cluster("startingOffsets", self.opts.offsets_cluster, cluster)
            start = _starting(self.opts, consumer, tps)
        finally:
            consumer.close()
        offsets: dict[str, dict[int, int]] = {}
        for (t, p), o in start.items():
            offsets.setdefault(t, {})[p] = o
        return offsets_json(offsets, cluster)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        latest = self._latest(begin)
        self._check(start)
        maximum = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offsets_json(cap(begin, latest, maximum), self.cluster)

    def _check(self, offset: dict[str, Any]) -> None:
        """A checkpointed offset of another cluster is refused; one of a checkpoint written
        before offsets named their cluster is taken as this cluster's (warned once)."""
        taken_on = offsets_cluster(offset)
        if taken_on is None and self.cluster and not self._warned:
            self._warned = True
            _log.warning("%s", clusters.unknown_warning("the checkpointed offset", self.cluster))
        check_cluster("the checkpointed offset", taken_on, self.cluster)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        stop = offsets_from_json(end)
        if self.cluster is None:  # a batch replayed from the checkpoint after a restart
            consumer = _planning_consumer(self.opts)
            try:
                self._describe(consumer)
            finally:
                consumer.close()
        self._check(start)
        self._check(end)
        ranges = [
            Range(t, p, begin.get(t, {}).get(p, 0), o)
            for t, parts in sorted(stop.items())
            for p, o in sorted(parts.items())
        ]
        ranges = kafka_io.split(ranges, self.opts.min_partitions)
        return [RangePartition(r, self.regions) for r in ranges]

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
