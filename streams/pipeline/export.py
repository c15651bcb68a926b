"""`streams spark export` and `streams spark follow`: converged entries as Parquet, by key.

Layout (both jobs): `OUT/key=<key>/part-*.parquet` with columns key_bytes (the exact key), pos
(rank in ID order), id ('ms-seq'), origin (region id that wrote the entry), fields (map of field to
value, bytes). The key directory name is the key as UTF-8 text, escaped the way Spark escapes
partition values; read `key_bytes` for the exact bytes.

Why follow refolds touched keys instead of appending entries: a later DEL, XDEL or XTRIM removes
entries that were already exported, so an append-only sink cannot hold the converged entries. Each
micro-batch first stores its ops under `OUT/_ops/batch_id=N` (overwritten if Spark replays batch
N after a crash: same offsets, same rows), then refolds every key the batch touched from all
stored ops of batches <= N and overwrites those keys' directories. Another region's transaction
read in part (a micro-batch ends inside it, a mirror copied its first records) is left out whole
until its last op is stored; the batch that stores it refolds every key of the transaction
(`folding.whole_transactions`). A replayed batch therefore
writes exactly what it wrote the first time: exactly once across restarts, with Spark's checkpoint
holding the offsets. The cost is a refold of each touched key's whole history per batch.

Both read every partition of every op log: with S shards, partition s holds shard s's keys, and
the folds group by (partition, key) (`streams.pipeline.folding`), so the stored ops keep their
partition.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streams.pipeline import folding, kafka_io

OPS_DIR = "_ops"
_ESCAPE = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(1, 32)}


def escape_path_name(text: str) -> str:
    """Spark's escaping of a partition value in a directory name (ExternalCatalogUtils)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in text)


FOLD_COLUMNS = (
    "topic string, partition int, kind string, origin int, seq long, key binary, value binary, "
    "txn_last long"
)
"""What the folds read of the source (`folding.entries`): the other columns are not computed."""


def read_oplogs(
    spark: SparkSession, bootstrap: str, schema: str | None = None, **options: str
) -> DataFrame:
    reader = spark.read.format("streams_oplog").option("kafka.bootstrap.servers", bootstrap)
    if schema is not None:
        reader = reader.schema(schema)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def export(
    spark: SparkSession,
    bootstrap: str,
    out: str,
    fmt: str = "parquet",
    min_partitions: int | None = None,
    topology: str | None = None,
) -> int:
    """Write the converged entries of the cluster's op logs to `out` (replacing it); returns
    the number of entries written. `topology`: what the record gate checks against."""
    if fmt != "parquet":
        raise ValueError(f"unknown export format {fmt!r}: only parquet is built")
    with kafka_io.planning(bootstrap, "export") as (plan, consumer):
        kafka_io.refuse_truncated(consumer, kafka_io.partitions_of(plan, consumer), "export")
    options = {} if min_partitions is None else {"minPartitions": str(min_partitions)}
    if topology is not None:
        options["topology"] = topology
    # cached: the fold reads the logs twice (what was read of each origin, then the ops)
    logs = read_oplogs(spark, bootstrap, FOLD_COLUMNS, **options).cache()
    entries = folding.entries(logs).cache()
    try:
        (
            entries.write.mode("overwrite")
            .option("partitionOverwriteMode", "static")
            .partitionBy("key")
            .parquet(out)
        )
        return entries.count()
    finally:
        entries.unpersist()
        logs.unpersist()


STORED = ("kind", "key", "value", "topic", "partition", "offset", "origin", "seq", "txn_last")
"""The columns of the stored ops (a store written before `origin`, `seq` and `txn_last` were
kept reads them as null: every op taken as a whole transaction, as before)."""


def _apply_batch(spark: SparkSession, out: str, batch: DataFrame, batch_id: int) -> None:
    ops = batch.where(F.col("kind") == F.lit("op")).select(*STORED)
    store = Path(out) / OPS_DIR
    (
        ops.withColumn("batch_id", F.lit(batch_id))
        .write.mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")
        .partitionBy("batch_id")
        .parquet(str(store))
    )
    # mergeSchema: a store begun by an older version holds batches without origin, seq and
    # txn_last (read as null there)
    stored = (
        spark.read.option("mergeSchema", "true")
        .parquet(str(store))
        .where(F.col("batch_id") <= batch_id)
    )
    # Keys whose ops this batch stored, and keys of earlier batches' ops whose transaction
    # this batch completed (they were held back: `folding.whole_transactions`).
    touched = ops.select("key").union(_completed(stored, batch_id)).distinct()
    keys = [bytes(r["key"]) for r in touched.collect()]
    if not keys:
        return
    history = stored.join(F.broadcast(touched), "key")
    entries = folding.entries(history, reference=stored).cache()
    try:
        (
            entries.write.mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy("key")
            .parquet(out)
        )
        alive = {bytes(r["key_bytes"]) for r in entries.select("key_bytes").distinct().collect()}
    finally:
        entries.unpersist()
    for key in keys:
        if key not in alive:  # the key lost its last entry: its directory goes
            shutil.rmtree(
                Path(out) / f"key={escape_path_name(folding.key_text(key))}", ignore_errors=True
            )


def _completed(stored: DataFrame, batch_id: int) -> DataFrame:
    """The keys of ops stored by earlier batches whose transaction was read in part then and
    is whole now (its last seq arrived in batch `batch_id`)."""
    txn = F.coalesce(F.col("txn_last"), F.lit(0))
    before = stored.where(F.col("batch_id") < batch_id)
    ends = [
        stored.groupBy("partition", "origin").agg(F.max("seq").alias("_now")),
        before.groupBy("partition", "origin").agg(F.max("seq").alias("_then")),
    ]
    return (
        before.where(txn > 0)
        .join(ends[0], ["partition", "origin"])
        .join(ends[1], ["partition", "origin"])
        .where((txn > F.col("_then")) & (txn <= F.col("_now")))
        .select("key")
    )


def follow(
    spark: SparkSession,
    bootstrap: str,
    out: str,
    checkpoint: str,
    trigger_seconds: float = 1.0,
    max_offsets_per_trigger: int | None = None,
    available_now: bool = False,
    topology: str | None = None,
) -> StreamingQuery:
    """Start the streaming query that keeps `out` equal to the converged entries. Spark's
    checkpoint holds the offsets with the cluster they were read from: pointed at another
    cluster, the query refuses to go on (`streams.kafka.clusters`)."""
    reader = (
        spark.readStream.format("streams_oplog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("startingOffsets", "earliest")
    )
    if topology is not None:
        reader = reader.option("topology", topology)
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    Path(out).mkdir(parents=True, exist_ok=True)
    writer = (
        reader.load()
        .writeStream.foreachBatch(lambda df, batch_id: _apply_batch(spark, out, df, batch_id))
        .option("checkpointLocation", checkpoint)
        .queryName("streams-follow")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    return writer.start()
