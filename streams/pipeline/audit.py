"""`streams spark audit`: compare the op logs of several clusters (one per region).

What it reports, per cluster:
- op counts per origin region and op type;
- replication lag percentiles per origin: the record's Kafka timestamp minus the op's origin time.
  The lag is what the Kafka timestamp says: on topics with `LogAppendTime` it is the mirror's
  append time; our mirror and MirrorMaker 2 keep the producer's `CreateTime` by default, and then
  the figure is the origin's own produce delay (timestampType says which);
- duplicate IDs: the same entry ID from several origins in one key (semi-strict and liberal modes);
- per-key digests at a common position, and the keys whose digests differ between clusters.

Why a common position: clusters lag one another, so comparing everything each holds would flag
every key a mirror has not copied yet. The position is, per origin, the highest seq every cluster
holds, lowered until it is causally closed (no op inside depends on an op outside); each cluster
folds exactly the ops inside it, so digests must agree unless a log diverged. Ops whose dot
(origin, seq) carries different contents in different clusters are reported on their own: that is
a divergence at the source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streams.pipeline import folding
from streams.pipeline.export import read_oplogs

PERCENTILES = (0.5, 0.9, 0.99)


@dataclass
class AuditReport:
    clusters: list[str]
    position: dict[int, int]
    op_counts: list[tuple[str, int, str, int]] = field(default_factory=list)
    """(cluster, origin, op type, count)."""
    lag_ms: list[tuple[str, int, list[float], float, int]] = field(default_factory=list)
    """(cluster, origin, [p50, p90, p99], max, timestampType)."""
    digests: dict[bytes, dict[str, str]] = field(default_factory=dict)
    """key -> cluster -> digest ('' when the key does not exist there)."""
    differing_keys: list[bytes] = field(default_factory=list)
    duplicate_ids: list[tuple[str, bytes, list[str]]] = field(default_factory=list)
    """(cluster, key, IDs held by more than one origin)."""
    conflicting_dots: list[tuple[int, int]] = field(default_factory=list)
    """(origin, seq) whose op differs between clusters (or within one)."""

    @property
    def ok(self) -> bool:
        return not self.differing_keys and not self.conflicting_dots

    def render(self) -> str:
        lines = [f"clusters: {', '.join(self.clusters)}"]
        pos = ", ".join(f"{o}:{s}" for o, s in sorted(self.position.items()))
        lines.append(f"common position (origin:seq): {pos or 'nothing in common'}")
        lines.append("op counts (cluster origin op count):")
        lines += [f"  {c} {o} {t} {n}" for c, o, t, n in self.op_counts]
        lines.append("lag ms, record timestamp - origin time (cluster origin p50 p90 p99 max):")
        for c, o, ps, mx, tt in self.lag_ms:
            kind = {0: "CreateTime", 1: "LogAppendTime"}.get(tt, "unknown")
            lines.append(f"  {c} {o} " + " ".join(f"{p:.0f}" for p in ps) + f" {mx:.0f} ({kind})")
        lines.append(f"keys compared: {len(self.digests)}; differing: {len(self.differing_keys)}")
        for key in self.differing_keys:
            per = ", ".join(f"{c}={d[:12] or '-'}" for c, d in sorted(self.digests[key].items()))
            lines.append(f"  DIFFERS {folding.key_text(key)}: {per}")
        for origin, seq in self.conflicting_dots:
            lines.append(f"  CONFLICTING OP origin {origin} seq {seq}: contents differ")
        lines.append(f"keys with duplicate IDs: {len(self.duplicate_ids)}")
        for c, key, ids in self.duplicate_ids:
            lines.append(f"  {c} {folding.key_text(key)}: {', '.join(ids)}")
        lines.append("OK: the clusters agree" if self.ok else "DIVERGED")
        return "\n".join(lines)


def _beyond(pos_map: Column) -> Callable[[Column], Column]:
    """A context entry (region, seq) past the position: the op depends on an op outside."""
    return lambda e: e["value"] > F.coalesce(pos_map[e["key"]], F.lit(0))


def _position(ops: list[DataFrame]) -> dict[int, int]:
    """Per origin: the highest seq every cluster holds, lowered to a causally closed cut."""
    per = [
        {r["origin"]: r["m"] for r in df.groupBy("origin").agg(F.max("seq").alias("m")).collect()}
        for df in ops
    ]
    origins = set().union(*per) if per else set()
    pos = {o: min(p.get(o, 0) for p in per) for o in origins}
    # One frame (the snapshot's, already cached): read as is; a dot read twice has the same
    # context both times, so it changes no minimum. Several: deduplicated once, cached.
    union = (
        ops[0].select("origin", "seq", "ctx") if len(ops) == 1 else
        reduce(DataFrame.unionByName, ops).select("origin", "seq", "ctx")
        .dropDuplicates(["origin", "seq"]).cache()
    )
    try:
        while True:
            pos_map = F.create_map(*[x for o, s in pos.items() for x in (F.lit(o), F.lit(s))])
            inside = union.where(F.col("seq") <= F.coalesce(pos_map[F.col("origin")], F.lit(0)))
            outside_dep = F.exists(F.map_entries("ctx"), _beyond(pos_map))
            bad = {
                r["origin"]: r["m"]
                for r in inside.where(outside_dep).groupBy("origin")
                .agg(F.min("seq").alias("m")).collect()
            }
            if not bad:
                return pos
            for origin, seq in bad.items():
                pos[origin] = min(pos[origin], seq - 1)
    finally:
        if len(ops) > 1:
            union.unpersist()


def audit(spark: SparkSession, bootstraps: list[str]) -> AuditReport:
    frames = [read_oplogs(spark, b).where(F.col("kind") == F.lit("op")).cache() for b in bootstraps]
    try:
        return _audit(bootstraps, frames)
    finally:
        for df in frames:
            df.unpersist()


def _audit(bootstraps: list[str], frames: list[DataFrame]) -> AuditReport:
    pos = _position(frames)
    report = AuditReport(list(bootstraps), pos)
    pos_map = F.create_map(*[x for o, s in pos.items() for x in (F.lit(o), F.lit(s))]) if pos \
        else None
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
        at = df if pos_map is None else df.where(
            F.col("seq") <= F.coalesce(pos_map[F.col("origin")], F.lit(0))
        )
        for r in folding.audit_keys(at).collect():
            key = bytes(r["key_bytes"])
            report.digests.setdefault(key, {})[name] = r["digest"]
            if r["duplicate_ids"]:
                report.duplicate_ids.append((name, key, list(r["duplicate_ids"])))
    for key, per in sorted(report.digests.items()):
        values = {per.get(name, "") for name in bootstraps}
        if len(values) > 1:
            report.differing_keys.append(key)
    union = reduce(
        DataFrame.unionByName,
        [df.select("origin", "seq", F.sha2("value", 256).alias("h")) for df in frames],
    )
    report.conflicting_dots = sorted(
        (r["origin"], r["seq"])
        for r in union.groupBy("origin", "seq").agg(F.countDistinct("h").alias("n"))
        .where(F.col("n") > 1).collect()
    )
    report.duplicate_ids.sort()
    return report
