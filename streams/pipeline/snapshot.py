"""`streams spark snapshot`: a region's state folded on Spark, written in the snapshot format.

Each file is exactly what `streams.snapshot.write_snapshot` writes (the format a node boots from),
built from per-key folds with the node's `streams.crdt` code. Why a causally closed cut: a
cluster's mirrored copies lag one another, and the node holds back an op until everything in its
context arrived; the job folds only the ops inside the closed position (`streams.pipeline.cut`)
and the local records whose context it covers, and the snapshot's positions point at the first
record left out, so a node booting from it reads those again.

Why one file per shard: a database of S shards is S state machines (partition s of every log is
shard s, with its own op numbering, vector and local seq), and a node boots each shard it owns
from a snapshot of that shard (`--snapshot` once per shard). File s holds shard s's keys, vector
and local seq, positions in partition s only and, with S > 1, meta `shard=<s>`; the region's
digest combines the shards' digests as CRDT.DIGEST does (`streams.crdt.keyspace.digest`).

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
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streams.crdt.region import Region
from streams.ids import IdMode
from streams.kafka.clusters import SNAPSHOT_META
from streams.kafka.topics import local_topic, oplog_topic
from streams.pipeline import cut, folding, kafka_io
from streams.pipeline.folding import ConflictingDot
from streams.pipeline.options import CLUSTER_KEY
from streams.pipeline.shards import ShardStream, region_digest, shard_count, shard_path
from streams.pipeline.snapshot_file import KeyPart, write_parts
from streams.snapshot import Positions

COLUMNS = (
    "topic string, partition int, offset long, kind string, origin int, seq long, "
    "ctx map<int,long>, key binary, value binary, txn_last long"
)
"""The source's columns the job reads (the source decodes only these)."""
READ_PARTITIONS_PER_CORE = 4
"""Input partitions per core (`minPartitions`): ranges are cut evenly, and a few per core keep
every core busy to the end; each costs a consumer and a fetch."""
FOLD_PARTITIONS_PER_CORE = 4
"""Key ranges per core for the fold."""
WRITER = "streams spark snapshot"


@dataclass(frozen=True)
class SnapshotResult:
    digest: str
    """The region's digest (CRDT.DIGEST of a node holding this state)."""
    files: list[str]
    """Shard s's snapshot file at index s (one file for a database of one shard)."""
    shard_digests: list[str]
    """Each shard's `State.digest()`, in shard order."""


def snapshot(
    spark: SparkSession,
    bootstrap: str,
    region_name: str,
    out: str,
    id_mode: str = "strict",
    region_id: int | None = None,
    phases: dict[str, float] | None = None,
    topology: str | None = None,
) -> SnapshotResult:
    """Write the snapshot of `region_name`: to `out` with one shard, else one file per shard
    (`shards.shard_path`). `phases`, when given, receives the wall seconds of each step (plan,
    read, cut, fold, write). `topology`: a topology file, what the record gate checks records
    against (else the regions the logs name)."""
    clock = _Phases(phases)
    local = local_topic(region_name)
    ends, shards, cluster_id = _plan(bootstrap, local)
    ending: dict[str, dict[str, int]] = {}
    for (t, p), o in ends.items():
        ending.setdefault(t, {})[str(p)] = o
    cores = spark.sparkContext.defaultParallelism
    clock.done("plan")
    reader = (
        spark.read.format("streams_oplog")
        .schema(COLUMNS)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(sorted(ending)))
        .option("minPartitions", str(READ_PARTITIONS_PER_CORE * cores))
        .option("endingOffsets", json.dumps({**ending, **_cluster_item(cluster_id)}))
    )
    if topology is not None:
        reader = reader.option("topology", topology)
    df = reader.load().cache()
    parts = None
    try:
        is_op = F.col("kind") == F.lit("op")
        pos = cut.position([df.where(is_op)])  # reads, caches the logs
        _refuse_conflicting_dots(df.where(is_op))
        clock.done("read")
        at = cut.cut_map(pos)
        is_local = (F.col("topic") == F.lit(local)) & (F.col("kind") == F.lit("local"))
        keep = (is_op & cut.inside(at)) | (is_local & cut.covered(at))
        # the first record left out of each partition is where a booting node resumes (a
        # record the gate skipped is not left out: it is no op, a node skips it again)
        left_out = {
            (r["topic"], r["partition"]): r["m"]
            for r in df.where(~keep & (F.col("kind") != F.lit("skipped")))
            .groupBy("topic", "partition")
            .agg(F.min("offset").alias("m"))
            .collect()
        }
        positions = {tp: min(end, left_out.get(tp, end)) for tp, end in ends.items()}
        chosen = df.where(keep)
        if region_id is None:
            region_id = _region_id(chosen, region_name, is_local)
        local_seqs = {
            r["partition"]: r["m"]
            for r in chosen.where(is_local)
            .groupBy("partition")
            .agg(F.max("seq").alias("m"))
            .collect()
        }
        regions = [
            _shard_region(region_id, id_mode, pos.get(s, {}), local_seqs.get(s) or 0)
            for s in range(shards)
        ]
        clock.done("cut")
        # every key folded and encoded at once, on every core; then read range by range
        parts = folding.key_parts(chosen, local, FOLD_PARTITIONS_PER_CORE * cores).persist()
        parts.count()
        df.unpersist()
        clock.done("fold")
        result = _write(regions, positions, _key_parts(parts), out, region_name, cluster_id)
        clock.done("write")
        return result
    finally:
        df.unpersist()
        if parts is not None:
            parts.unpersist()


def _plan(bootstrap: str, local: str) -> tuple[Positions, int, str | None]:
    """The end of every partition of every op log and of the region's `.local` log, the
    database's shard count (their partition count) and the cluster's id (the snapshot's
    positions are its offsets: the files say so)."""
    with kafka_io.planning(bootstrap, "snapshot") as (opts, consumer):
        tps, cluster_id = kafka_io.describe(opts, consumer)
        topics = consumer.list_topics(timeout=15).topics
        if local in topics:
            tps += [(local, p) for p in sorted(topics[local].partitions)]
        kafka_io.refuse_truncated(consumer, tps, "snapshot")
        ends = kafka_io.resolve(opts, consumer, tps, "latest", "ending")
    if not ends:
        raise kafka_io.SourceError(f"no op-log topic on {bootstrap}")
    return ends, shard_count(tps), cluster_id


def _cluster_item(cluster_id: str | None) -> dict[str, str]:
    """Offsets JSON names the cluster they were planned on: read from another, refused."""
    return {CLUSTER_KEY: cluster_id} if cluster_id else {}


def _refuse_conflicting_dots(ops: DataFrame) -> None:
    """Two records under one dot (per shard) with other bytes: one was not written by the
    region's writer, and a node stops on it; so does the snapshot a node boots from, whatever
    input partitions the two records fell in (each range's own gate sees only its range)."""
    conflicts = (
        ops.groupBy("partition", "origin", "seq")
        .agg(F.countDistinct(F.sha2("value", 256)).alias("n"))
        .where(F.col("n") > 1)
        .limit(5)
        .collect()
    )
    if conflicts:
        dots = ", ".join(f"{r['origin']}:{r['seq']} (shard {r['partition']})" for r in conflicts)
        raise ConflictingDot(
            f"records under dot(s) {dots} differ: one of each was not written by the region's "
            "writer (a node stops on them too; `streams log` lists both)"
        )


def _region_id(chosen: DataFrame, region_name: str, is_local: Column) -> int:
    """The region's id: the origin of its own op log's and `.local` log's records."""
    ids = {
        r["origin"]
        for r in chosen.where((F.col("topic") == F.lit(oplog_topic(region_name))) | is_local)
        .select("origin")
        .distinct()
        .collect()
    }
    if len(ids) != 1:
        raise ValueError(
            f"cannot tell region {region_name}'s id from its logs (found {sorted(ids)}); "
            f"pass --region-id"
        )
    return int(ids.pop())


def _shard_region(region_id: int, id_mode: str, vector: dict[int, int], local_seq: int) -> Region:
    """A shard's Region as its snapshot header needs it: id, mode, applied vector, local seq
    (the state itself comes from the key parts)."""
    region = Region(region_id, IdMode.parse(id_mode))
    region.causal.applied.update({o: s for o, s in vector.items() if s > 0})
    region.local_seq = local_seq
    return region


def _write(
    regions: list[Region],
    positions: Positions,
    parts: Iterator[KeyPart],
    out: str,
    region_name: str,
    cluster_id: str | None = None,
) -> SnapshotResult:
    """Shard by shard, the file of each from the parts (ordered by shard, then key)."""
    shards = len(regions)
    stream = ShardStream(parts, lambda part: part.shard)
    files: list[str] = []
    digests: list[str] = []
    for s, region in enumerate(regions):
        path = shard_path(out, s, shards)
        meta = {"writer": WRITER, **({"shard": str(s)} if shards > 1 else {})}
        if cluster_id:  # the positions are this cluster's offsets
            meta[SNAPSHOT_META] = cluster_id
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fp:
            digests.append(
                write_parts(
                    region,
                    {(t, p): o for (t, p), o in positions.items() if p == s},
                    stream.of(s),
                    fp,
                    region_name=region_name,
                    meta=meta,
                    threads=min(4, os.cpu_count() or 1),
                )
            )
        files.append(path)
    extra = stream.rest()
    if extra is not None:
        raise ValueError(f"keys of partition {extra}, beyond the logs' {shards} partition(s)")
    return SnapshotResult(region_digest(digests), files, digests)


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
            bytes(row["key_bytes"]),
            [bytes(r) for r in row["records"]],
            row["entries"],
            bytes(row["digest_feed"]),
            row["shard"],
        )
