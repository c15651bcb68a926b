"""`streams spark audit`: compare the op logs of several clusters (one per region).

What it reports, per cluster:
- op counts per origin region and op type;
- replication lag percentiles per origin: the record's Kafka timestamp minus the op's origin time.
  The lag is what the Kafka timestamp says: on topics with `LogAppendTime` it is the mirror's
  append time; our mirror and MirrorMaker 2 keep the producer's `CreateTime` by default, and then
  the figure is the origin's own produce delay (timestampType says which);
- duplicate IDs: the same entry ID from several origins in one key (semi-strict and liberal modes);
- per-key digests at a common position, the keys whose digests differ between clusters, and
  each cluster's region digest there (its shards' digests combined as CRDT.DIGEST combines them).

Why a common position: clusters lag one another, so comparing everything each holds would flag
every key a mirror has not copied yet. The position (`streams.pipeline.cut`) is, per shard and
origin, the highest seq every cluster holds, lowered until it is causally closed (no op inside
depends on an op outside); each cluster folds exactly the ops inside it, so digests must agree
unless a log diverged (a transaction is never cut: `streams.pipeline.cut`). Ops whose dot
carries different contents in different clusters are reported on their own: that is a
divergence at the source. Records the record gate skipped (forged: a signing region's, unsigned;
`--topology` gives the keys) are counted per cluster and left out of everything else. A dot is
(shard, origin, seq): every shard numbers its ops from 1, so (r1, 5) of shard 0 and (r1, 5) of
shard 3 are different ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streams.pipeline import cut, folding, kafka_io
from streams.pipeline.export import read_oplogs
from streams.pipeline.shards import region_digest, shard_count, shard_digests

PERCENTILES = (0.5, 0.9, 0.99)


@dataclass
class AuditReport:
    clusters: list[str]
    position: cut.Cut
    """shard (partition) -> origin -> the highest seq inside the common position."""
    shards: int = 1
    op_counts: list[tuple[str, int, str, int]] = field(default_factory=list)
    """(cluster, origin, op type, count)."""
    lag_ms: list[tuple[str, int, list[float], float, int]] = field(default_factory=list)
    """(cluster, origin, [p50, p90, p99], max, timestampType)."""
    digests: dict[bytes, dict[str, str]] = field(default_factory=dict)
    """key -> cluster -> digest ('' when the key does not exist there)."""
    region_digests: dict[str, str] = field(default_factory=dict)
    """cluster -> the region's digest at the common position (CRDT.DIGEST's rule)."""
    shard_digests: dict[str, list[str]] = field(default_factory=dict)
    """cluster -> each shard's digest at the common position, in shard order."""
    differing_keys: list[bytes] = field(default_factory=list)
    duplicate_ids: list[tuple[str, bytes, list[str]]] = field(default_factory=list)
    """(cluster, key, IDs held by more than one origin)."""
    conflicting_dots: list[tuple[int, int, int]] = field(default_factory=list)
    """(shard, origin, seq) whose op differs between clusters (or within one)."""
    skipped: list[tuple[str, str, int]] = field(default_factory=list)
    """(cluster, why, count): records the record gate skipped there (forged: a signing
    region's, unsigned; the node skips them too), left out of everything above."""

    @property
    def ok(self) -> bool:
        return not self.differing_keys and not self.conflicting_dots

    def render(self) -> str:
        lines = [f"clusters: {', '.join(self.clusters)}; shards: {self.shards}"]
        pos = cut.render(self.position)
        lines.append(f"common position (origin:seq): {pos or 'nothing in common'}")
        lines.append("op counts (cluster origin op count):")
        lines += [f"  {c} {o} {t} {n}" for c, o, t, n in self.op_counts]
        lines.append("lag ms, record timestamp - origin time (cluster origin p50 p90 p99 max):")
        for c, o, ps, mx, tt in self.lag_ms:
            kind = {0: "CreateTime", 1: "LogAppendTime"}.get(tt, "unknown")
            lines.append(f"  {c} {o} " + " ".join(f"{p:.0f}" for p in ps) + f" {mx:.0f} ({kind})")
        lines.append("region digest at the common position:")
        lines += [f"  {c} {d}" for c, d in sorted(self.region_digests.items())]
        lines.append(f"keys compared: {len(self.digests)}; differing: {len(self.differing_keys)}")
        for key in self.differing_keys:
            per = ", ".join(f"{c}={d[:12] or '-'}" for c, d in sorted(self.digests[key].items()))
            lines.append(f"  DIFFERS {folding.key_text(key)}: {per}")
        for shard, origin, seq in self.conflicting_dots:
            lines.append(
                f"  CONFLICTING OP shard {shard} origin {origin} seq {seq}: contents differ"
            )
        lines.append(f"records skipped by the record gate: {sum(n for *_x, n in self.skipped)}")
        lines += [f"  {c} {why} {n}" for c, why, n in self.skipped]
        lines.append(f"keys with duplicate IDs: {len(self.duplicate_ids)}")
        for c, key, ids in self.duplicate_ids:
            lines.append(f"  {c} {folding.key_text(key)}: {', '.join(ids)}")
        lines.append("OK: the clusters agree" if self.ok else "DIVERGED")
        return "\n".join(lines)


def audit(spark: SparkSession, bootstraps: list[str], topology: str | None = None) -> AuditReport:
    """`topology`: a topology file, what the record gate checks records against (its signing
    keys included); without it, the regions each cluster's logs name."""
    shards = {_shards_of(b) for b in bootstraps}
    if len(shards) > 1:
        raise ValueError(f"the clusters' op logs have different shard counts: {sorted(shards)}")
    options = {} if topology is None else {"topology": topology}
    read = [read_oplogs(spark, b, **options).cache() for b in bootstraps]
    frames = [df.where(F.col("kind") == F.lit("op")) for df in read]
    try:
        report = _audit(bootstraps, frames, shards.pop() if shards else 1)
        for name, df in zip(bootstraps, read, strict=True):
            for r in df.where(F.col("kind") == F.lit("skipped")).groupBy("op").count().collect():
                report.skipped.append((name, r["op"], r["count"]))
        report.skipped.sort()
        return report
    finally:
        for df in read:
            df.unpersist()


def _shards_of(bootstrap: str) -> int:
    with kafka_io.planning(bootstrap, "audit") as (opts, consumer):
        tps = kafka_io.partitions_of(opts, consumer)
        kafka_io.refuse_truncated(consumer, tps, "audit")
        return shard_count(tps)


def _audit(bootstraps: list[str], frames: list[DataFrame], shards: int) -> AuditReport:
    pos = cut.position(frames)
    report = AuditReport(list(bootstraps), pos, shards)
    at = cut.cut_map(pos)
    for name, df in zip(bootstraps, frames, strict=True):
        for r in df.groupBy("origin", "op").count().orderBy("origin", "op").collect():
            report.op_counts.append((name, r["origin"], r["op"], r["count"]))
        lag = (F.unix_micros("timestamp") - F.unix_micros("ts")) / 1000.0
        for r in (
            df.groupBy("origin")
            .agg(
                F.percentile_approx(lag, list(PERCENTILES)).alias("p"),
                F.max(lag).alias("mx"),
                F.max("timestampType").alias("tt"),
            )
            .orderBy("origin")
            .collect()
        ):
            report.lag_ms.append((name, r["origin"], list(r["p"]), r["mx"], r["tt"]))
        keys = folding.audit_keys(df.where(cut.inside(at))).cache()
        try:
            _key_digests(report, name, keys)
        finally:
            keys.unpersist()
    for key, per in sorted(report.digests.items()):
        values = {per.get(name, "") for name in bootstraps}
        if len(values) > 1:
            report.differing_keys.append(key)
    union = reduce(
        DataFrame.unionByName,
        [df.select("partition", "origin", "seq", F.sha2("value", 256).alias("h")) for df in frames],
    )
    report.conflicting_dots = sorted(
        (r["partition"], r["origin"], r["seq"])
        for r in union.groupBy("partition", "origin", "seq")
        .agg(F.countDistinct("h").alias("n"))
        .where(F.col("n") > 1)
        .collect()
    )
    report.duplicate_ids.sort()
    return report


def _key_digests(report: AuditReport, name: str, keys: DataFrame) -> None:
    """One cluster's per-key digests and duplicate IDs (collected without the digest inputs),
    then its shard and region digests from the digest inputs streamed to the driver in (shard,
    key) order, one Spark partition at a time."""
    for r in keys.drop("digest_feed").collect():
        key = bytes(r["key_bytes"])
        report.digests.setdefault(key, {})[name] = r["digest"]
        if r["duplicate_ids"]:
            report.duplicate_ids.append((name, key, list(r["duplicate_ids"])))
    feeds = (
        (r["shard"], bytes(r["digest_feed"]))
        for r in keys.select("shard", "key_bytes", "digest_feed")
        .orderBy("shard", "key_bytes")
        .toLocalIterator()
    )
    per_shard = shard_digests(feeds, report.shards)
    report.shard_digests[name] = per_shard
    report.region_digests[name] = region_digest(per_shard)
