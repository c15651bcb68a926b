"""`streams spark export` and `streams spark follow`: converged entries as Parquet, by key.

Layout (both jobs): `OUT/key=<key>/part-*.parquet` with columns key_bytes (the exact key), pos
(rank in ID order), id ('ms-seq'), origin (region id that wrote the entry), fields (map of field to
value, bytes). The key directory name is the key as UTF-8 text, escaped the way Spark escapes
partition values; read `key_bytes` for the exact bytes.

Why follow refolds touched keys instead of appending entries: a later DEL, XDEL or XTRIM removes
entries that were already exported, so an append-only sink cannot hold the converged entries. Each
micro-batch first stores its ops under `OUT/_ops/batch_id=N` (overwritten if Spark replays batch
N after a crash: same offsets, same rows), then refolds every key the batch touched from all
stored ops of batches <= N and overwrites those keys' directories. A replayed batch therefore
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

from streams.pipeline import folding

OPS_DIR = "_ops"
_ESCAPE = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(1, 32)}


def escape_path_name(text: str) -> str:
    """Spark's escaping of a partition value in a directory name (ExternalCatalogUtils)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in text)


def read_oplogs(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format("streams_oplog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def export(
    spark: SparkSession,
    bootstrap: str,
    out: str,
    fmt: str = "parquet",
    min_partitions: int | None = None,
) -> int:
    """Write the converged entries of the cluster's op logs to `out` (replacing it); returns
    the number of entries written."""
    if fmt != "parquet":
        raise ValueError(f"unknown export format {fmt!r}: only parquet is built")
    options = {} if min_partitions is None else {"minPartitions": str(min_partitions)}
    entries = folding.entries(read_oplogs(spark, bootstrap, **options)).cache()
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


def _apply_batch(spark: SparkSession, out: str, batch: DataFrame, batch_id: int) -> None:
    ops = batch.where(F.col("kind") == F.lit("op")).select(
        "kind", "key", "value", "topic", "partition", "offset"
    )
    store = Path(out) / OPS_DIR
    (
        ops.withColumn("batch_id", F.lit(batch_id))
        .write.mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")
        .partitionBy("batch_id")
        .parquet(str(store))
    )
    touched = ops.select("key").distinct()
    keys = [bytes(r["key"]) for r in touched.collect()]
    if not keys:
        return
    history = (
        spark.read.parquet(str(store))
        .where(F.col("batch_id") <= batch_id)
        .join(F.broadcast(touched), "key")
    )
    entries = folding.entries(history).cache()
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


def follow(
    spark: SparkSession,
    bootstrap: str,
    out: str,
    checkpoint: str,
    trigger_seconds: float = 1.0,
    max_offsets_per_trigger: int | None = None,
    available_now: bool = False,
) -> StreamingQuery:
    """Start the streaming query that keeps `out` equal to the converged entries."""
    reader = (
        spark.readStream.format("streams_oplog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("startingOffsets", "earliest")
    )
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
