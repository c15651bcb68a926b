"""`streams spark snapshot`: a region's state folded on Spark, written in the snapshot format.

The file is exactly what `streams.snapshot.write_snapshot` writes (the format a node boots from),
built from per-key folds with the node's `streams.crdt` code. Why a causally closed cut: a
cluster's mirrored copies lag one another, and the node holds back an op until everything in its
context arrived; the job folds only the ops inside the closed position (streams.pipeline.audit)
and the local records whose context it covers, and the snapshot's positions point at the first
record left out, so a node booting from it reads those again.

Why it is built this way (what makes it scale with executor cores, docs/benchmarks.md):
- the source is read with only the columns the job uses (no `args` JSON, no timestamps) and in
  at least `READ_PARTITIONS_PER_CORE` partitions per core, so every core reads and decodes;
- the keys are folded, and their records and digest input encoded (`snapshot_file.key_part`), on
  the executors, all partitions at once (the result is persisted, then read by the driver one
  partition at a time: key ranges in key order);
- the driver does byte work only: Avro blocks, deflate in threads, sha256 (`write_parts`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streams.crdt.region import Region
from streams.ids import IdMode
from streams.pipeline import folding, kafka_io
from streams.pipeline.audit import _position
from streams.pipeline.options import parse
from streams.pipeline.snapshot_file import KeyPart, write_parts
from topology.topics import local_topic

COLUMNS = (
    "topic string, partition int, offset long, kind string, origin int, seq long, "
    "ctx map<int,long>, key binary, value binary"
)
"""The source's columns the job reads (the source decodes only these)."""
READ_PARTITIONS_PER_CORE = 4
"""Input partitions per core (`minPartitions`): ranges are cut evenly, and a few per core keep
every core busy to the end; each costs a consumer and a fetch."""
FOLD_PARTITIONS_PER_CORE = 4
"""Key ranges per core for the fold."""


def _map(pos: dict[int, int]) -> Column:
    pairs = [x for o, s in sorted(pos.items()) for x in (F.lit(o), F.lit(s))]
    return F.create_map(*pairs) if pairs else F.create_map().cast("map<int,bigint>")


def snapshot(
    spark: SparkSession, bootstrap: str, region_name: str, out: str,
    id_mode: str = "strict", region_id: int | None = None,
    phases: dict[str, float] | None = None,
) -> str:
    """Write the snapshot of `region_name` to `out`; returns the state digest. `phases`, when
    given, receives the wall seconds of each step (plan, read, cut, fold, write)."""
    clock = _Phases(phases)
    local = local_topic(region_name)
    opts = parse({"kafka.bootstrap.servers": bootstrap})
    consumer = Consumer(kafka_io.consumer_config(opts, "snapshot"))
    try:
        tps = kafka_io.partitions_of(opts, consumer)
        if local in consumer.list_topics(timeout=15).topics:
            tps.append((local, 0))
        ends = kafka_io.resolve(opts, consumer, tps, "latest", "ending")
    finally:
        consumer.close()
    if not ends:
        raise kafka_io.SourceError(f"no op-log topic on {bootstrap}")
    ending: dict[str, dict[str, int]] = {}
    for (t, p), o in ends.items():
        ending.setdefault(t, {})[str(p)] = o
    cores = spark.sparkContext.defaultParallelism
    clock.done("plan")
    df = (
        spark.read.format("streams_oplog").schema(COLUMNS)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(sorted(ending)))
        .option("minPartitions", str(READ_PARTITIONS_PER_CORE * cores))
        .option("endingOffsets", json.dumps(ending)).load()
    ).cache()
    parts = None
    try:
        pos = _position([df.where(F.col("kind") == F.lit("op"))])  # reads and caches the logs
        clock.done("read")
        pos_map = _map(pos)
        inside = F.col("seq") <= F.coalesce(pos_map[F.col("origin")], F.lit(0))
        covered = F.forall(
            F.map_entries("ctx"), lambda e: e["value"] <= F.coalesce(pos_map[e["key"]], F.lit(0))
        )
        is_local = F.col("topic") == F.lit(local)
        keep = ((F.col("kind") == F.lit("op")) & inside) | (is_local & covered)
        # the first record left out of each topic is where a booting node resumes
        left_out = {
            (r["topic"], r["partition"]): r["m"]
            for r in df.where(~keep).groupBy("topic", "partition")
            .agg(F.min("offset").alias("m")).collect()
        }
        positions = {tp: min(end, left_out.get(tp, end)) for tp, end in ends.items()}
        chosen = df.where(keep)
        if region_id is None:
            ids = {r["origin"] for r in chosen.where(
                (F.col("topic") == F.lit(f"{region_name}.oplog")) | is_local
            ).select("origin").distinct().collect()}
            if len(ids) != 1:
                raise ValueError(
                    f"cannot tell region {region_name}'s id from its logs (found {sorted(ids)}); "
                    f"pass --region-id"
                )
            region_id = ids.pop()
        local_seq = chosen.where(is_local).agg(F.max("seq")).collect()[0][0] or 0
        region = Region(region_id, IdMode.parse(id_mode))
        region.causal.applied.update({o: s for o, s in pos.items() if s > 0})
        region.local_seq = local_seq
        clock.done("cut")
        # every key folded and encoded at once, on every core; then read range by range
        parts = folding.key_parts(chosen, local, FOLD_PARTITIONS_PER_CORE * cores).persist()
        parts.count()
        df.unpersist()
        clock.done("fold")
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        with open(out, "wb") as fp:
            digest = write_parts(
                region, positions, _key_parts(parts), fp, region_name=region_name,
                meta={"writer": "streams spark snapshot"},
                threads=min(4, os.cpu_count() or 1),
            )
        clock.done("write")
        return digest
    finally:
        df.unpersist()
        if parts is not None:
            parts.unpersist()


class _Phases:
    def __init__(self, into: dict[str, float] | None) -> None:
        self.into = into
        self.last = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        if self.into is not None:
            self.into[name] = now - self.last
        self.last = now


def _key_parts(parts: DataFrame) -> Iterator[KeyPart]:
    for row in parts.toLocalIterator():
        yield KeyPart(
            bytes(row["key_bytes"]), [bytes(r) for r in row["records"]], row["entries"],
            bytes(row["digest_feed"]),
        )

