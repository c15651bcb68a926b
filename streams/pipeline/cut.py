"""The causally closed cut of op logs, per shard: which ops a job may fold together.

Why per shard: each shard (partition s of every op log) is a replicated state machine of its own,
numbering its ops per origin from 1 (DESIGN.md section 13). The dot (origin, seq) names an op only
together with its partition, and an op's causal context counts ops of its own shard. So a cut is
a position per (partition, origin), and "this op is inside" or "its context is covered" always
compares numbers of one partition; with S shards, (r1, 5) exists S times and every copy has its
own place in the cut.

Why a closed cut: clusters (or the mirrored copies inside one cluster) lag one another, and a node
holds back an op until everything its context names arrived. The position is, per partition and
origin, the highest seq that every frame holds, lowered until no op inside depends on an op
outside and no transaction is cut (a node applies another region's transaction whole, so a cut
inside one would hold part of it: `txn_last`); folding exactly the ops inside gives what any node
that applied that much holds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

Cut = dict[int, dict[int, int]]
"""partition -> origin -> the highest seq inside (an origin not named: nothing inside)."""

_SHIFT = 1 << 32


def _slot(partition: Column, origin: Column) -> Column:
    """One map key for (partition, origin): Spark map lookups take one key (origins are < 2^32)."""
    return partition.cast("long") * F.lit(_SHIFT) + origin.cast("long")


def cut_map(cut: Cut) -> Column:
    """The cut as a literal map column keyed by `_slot(partition, origin)`."""
    pairs = [
        x
        for p, per in sorted(cut.items())
        for o, s in sorted(per.items())
        for x in (F.lit(p * _SHIFT + o).cast("long"), F.lit(s).cast("long"))
    ]
    return F.create_map(*pairs) if pairs else F.create_map().cast("map<bigint,bigint>")


def _at(pos: Column, partition: Column, origin: Column) -> Column:
    return F.coalesce(pos[_slot(partition, origin)], F.lit(0))


def inside(pos: Column) -> Column:
    """The op (its partition, origin and seq) is inside the cut `pos` (`cut_map`)."""
    return F.col("seq") <= _at(pos, F.col("partition"), F.col("origin"))


def _ctx_test(pos: Column, beyond: bool) -> Callable[[Column], Column]:
    def test(e: Column) -> Column:
        limit = _at(pos, F.col("partition"), e["key"])
        return e["value"] > limit if beyond else e["value"] <= limit

    return test


def covered(pos: Column) -> Column:
    """Everything the record's context names (in its partition) is inside the cut: a local
    record goes into a fold that stops at the cut only then."""
    return F.forall(F.map_entries("ctx"), _ctx_test(pos, beyond=False))


def _depends_outside(pos: Column) -> Column:
    return F.exists(F.map_entries("ctx"), _ctx_test(pos, beyond=True))


def _transaction_outside(pos: Column) -> Column:
    """The op's transaction goes on past the cut (its `txn_last`, set on the ops of every record
    of a transaction but its last, lies beyond its origin's position): the cut is lowered below
    the transaction's first op, so it is folded whole or not at all, as a node applies it."""
    txn = F.coalesce(F.col("txn_last"), F.lit(0))
    return txn > _at(pos, F.col("partition"), F.col("origin"))


def _per_origin(df: DataFrame, agg: Callable[[str], Column]) -> Cut:
    """`agg` (max, min) of the seqs per partition and origin."""
    out: Cut = {}
    for r in df.groupBy("partition", "origin").agg(agg("seq").alias("m")).collect():
        out.setdefault(r["partition"], {})[r["origin"]] = r["m"]
    return out


def position(ops: list[DataFrame]) -> Cut:
    """Per partition and origin: the highest seq every frame holds, lowered to a causally
    closed cut that cuts no transaction. `ops`: replicated ops only, with partition, origin,
    seq, ctx and txn_last."""
    per = [_per_origin(df, F.max) for df in ops]
    pos: Cut = {}
    for p in set().union(*per) if per else set():
        origins = set().union(*(c.get(p, {}) for c in per))
        pos[p] = {o: min(c.get(p, {}).get(o, 0) for c in per) for o in origins}
    # One frame (the snapshot's, already cached): read as is; a dot read twice has the same
    # context both times, so it changes no minimum. Several: deduplicated once (by the dot AND
    # its partition: other shards hold the same dots), cached.
    cols = ("partition", "origin", "seq", "ctx", "txn_last")
    union = (
        ops[0].select(*cols)
        if len(ops) == 1
        else reduce(DataFrame.unionByName, ops)
        .select(*cols)
        .dropDuplicates(["partition", "origin", "seq"])
        .cache()
    )
    try:
        while True:
            at = cut_map(pos)
            bad = union.where(inside(at) & (_depends_outside(at) | _transaction_outside(at)))
            # the first op inside that depends on one outside, or whose transaction goes on
            # past the cut (its first op: the ops of every record but the last say so)
            lowered = _per_origin(bad, F.min)
            if not lowered:
                return pos
            for p, per_origin in lowered.items():
                for origin, seq in per_origin.items():
                    pos[p][origin] = min(pos[p][origin], seq - 1)
    finally:
        if len(ops) > 1:
            union.unpersist()


def render(cut: Cut) -> str:
    """`origin:seq, ...` for one shard; `shard 0: ...; shard 1: ...` for several."""

    def one(per: dict[int, int]) -> str:
        return ", ".join(f"{o}:{s}" for o, s in sorted(per.items()))

    if set(cut) <= {0}:
        return one(cut.get(0, {}))
    return "; ".join(f"shard {p}: {one(per)}" for p, per in sorted(cut.items()))
