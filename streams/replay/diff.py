"""Why two replicas differ: replay both to the newest position they share and compare per key.

A key that differs at the *same* position (both applied exactly the same ops) is a convergence
bug: `bisect` finds the first op after which the two folds disagree, by replaying both to
growing prefixes of one side's apply order (O(log n) replays, in memory). A key that differs only
because one side has not applied some ops yet is "lagging": those ops are listed, each as
missing (not in that cluster's logs) or held back (read, waiting for a causal dependency).

Shards: a region's shards never depend on each other, so two regions are compared shard by
shard (shard s of one against shard s of the other: the same slots, the same keys), each with its
own shared position and its own first diverging op; `diff_clusters` does that over every shard
(or the one asked for).

Pure: works on records already read (`Loaded`, one shard's); `load` reads them from a cluster.
Both can take minutes on long logs, so they tick a `streams.progress.Progress`: records read,
then records folded (every refold of the bisection counts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from streams.crdt import ops
from streams.crdt.fold import Applied, Fold
from streams.crdt.region import Region
from streams.kafka.records import Admission, Skip, Trust
from streams.progress import Progress
from streams.replay import reader
from streams.replay.describe import key_digests, text
from streams.replay.logs import discover
from streams.replay.positions import PositionError

Partition = tuple[str, int]
Logged = tuple[Partition, int, ops.Op | ops.LocalOp, int]
"""Where a record was read, one of its ops, and its `continues` (the fold's `txn_last`)."""
RegionFactory = Callable[[int], Region]


@dataclass
class Loaded:
    """One cluster's records for one region, in the order a replay feeds them."""

    name: str
    region_id: int
    records: list[Logged]
    names: dict[int, str] = field(default_factory=dict)


@dataclass
class Cluster:
    """One cluster's records for one region, per shard (every shard, or the one asked for)."""

    name: str
    shards: int
    """The region's shard count (its logs' partition count)."""
    loaded: dict[int, Loaded]
    names: dict[int, str] = field(default_factory=dict)
    cluster_id: str | None = None
    """The Kafka cluster read: the offsets named are its own."""
    skipped: list[Skip] = field(default_factory=list)
    """Records the record gate skipped (forged: a signing region's, unsigned)."""


def load(
    bootstrap: str,
    region: str | None = None,
    shard: int | None = None,
    progress: Progress | None = None,
    trust: Trust | None = None,
) -> Cluster:
    """Every record of the region's logs on this cluster, in memory (bisection refolds them),
    split by shard: partition s of every log is shard s. Each record passes the shared
    admission step (`streams.kafka.records`, one gate per shard, checking against `trust`, or
    the regions the logs name): a forged record is skipped and counted, one that does not
    decode or that the gate refuses stops the diff (`RecordRefused`)."""
    logs = discover(bootstrap, region)
    tick = progress or Progress.off()
    tick.stage(f"reading {logs.region_name} from {bootstrap}", unit="records")
    shards = logs.shards_for(shard)
    records: dict[int, list[Logged]] = {s: [] for s in shards}
    checked = logs.trust(trust)
    admissions = {s: Admission(checked.gate(logs.region_id)) for s in shards}
    skipped: list[Skip] = []

    def sink(raw: reader.Raw) -> bool:
        part = (raw.topic, raw.partition)
        admitted = admissions[raw.partition].admit(*part, raw.offset, raw.value, raw.headers)
        skipped.extend(admitted.skipped)
        more = admitted.continues
        records[raw.partition].extend((part, raw.offset, r, more) for r in admitted.records)
        tick.tick()
        return True

    heads = bool(checked.keys)
    reader.refuse_truncated(
        bootstrap,
        {(t, s): 0 for t in [logs.local, *logs.oplogs] for s in shards},
        "streams diff, which folds every log from its beginning (it does not start from"
        " snapshots yet),",
    )
    reader.read(bootstrap, {(logs.local, s): 0 for s in shards}, sink, headers=heads)
    reader.read(bootstrap, {(t, s): 0 for t in logs.oplogs for s in shards}, sink, headers=heads)
    loaded = {s: Loaded(logs.region_name, logs.region_id, records[s], logs.names) for s in shards}
    return Cluster(logs.region_name, logs.shards, loaded, logs.names, logs.cluster_id, skipped)


def diff_clusters(a: Cluster, b: Cluster, progress: Progress | None = None) -> dict[int, Report]:
    """`diff` of each shard: shard s of `a` against shard s of `b`."""
    if a.shards != b.shards:
        raise PositionError(
            f"{a.name} has {a.shards} shard(s) and {b.name} {b.shards}: regions of one database "
            "have the same shards"
        )
    reports: dict[int, Report] = {}
    for s in sorted(a.loaded):
        if progress is not None:
            which = f" shard {s}" if a.shards > 1 else ""
            progress.stage(f"comparing{which}", unit="records folded")
        reports[s] = diff(a.loaded[s], b.loaded[s], progress=progress)
    return reports


def fold(
    loaded: Loaded,
    cut: dict[int, int] | None = None,
    make_region: RegionFactory = Region,
    observer: Callable[[Applied], None] | None = None,
    progress: Progress | None = None,
) -> Fold:
    f = Fold(make_region(loaded.region_id), cut=cut, observer=observer)
    tick = (progress or Progress.off()).tick
    for part, offset, record, txn_last in loaded.records:
        f.feed(part, offset, record, txn_last)
        tick()
    f.finish()
    return f


@dataclass
class Divergence:
    key: bytes
    op: ops.Op | None
    """The first op after which the two sides' key differs (None: differs from the start)."""
    where: tuple[Partition, int] | None
    index: int


@dataclass
class Lag:
    key: bytes
    side: str
    """The side that has not applied the ops."""
    missing: list[ops.Op]
    held: list[ops.Op]


@dataclass
class Report:
    shared: dict[int, int]
    bugs: list[Divergence]
    lagging: list[Lag]
    equal_keys: int

    @property
    def differs(self) -> bool:
        return bool(self.bugs or self.lagging)


def _min_vector(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    return {o: min(a.get(o, 0), b.get(o, 0)) for o in set(a) | set(b)}


def _changed(a: dict[bytes, str], b: dict[bytes, str]) -> list[bytes]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def diff(
    a: Loaded,
    b: Loaded,
    make_a: RegionFactory = Region,
    make_b: RegionFactory = Region,
    progress: Progress | None = None,
) -> Report:
    p = progress
    full_a = fold(a, make_region=make_a, progress=p)
    full_b = fold(b, make_region=make_b, progress=p)
    shared = _min_vector(full_a.region.vector, full_b.region.vector)
    order: list[Applied] = []

    def keep(x: Applied) -> None:
        if isinstance(x.record, ops.Op):
            order.append(x)

    at_a = fold(a, shared, make_a, keep, p)
    at_b = fold(b, shared, make_b, progress=p)
    bug_keys = _changed(key_digests(at_a.region), key_digests(at_b.region))
    bugs = [_bisect(a, b, key, order, make_a, make_b, p) for key in bug_keys]
    lagging: list[Lag] = []
    for key in _changed(key_digests(full_a.region), key_digests(full_b.region)):
        if key in bug_keys:
            continue
        for side, ahead, make, behind, behind_fold in (
            ("b", a, make_a, b, full_b),
            ("a", b, make_b, a, full_a),
        ):
            lag = _lag(key, side, ahead, make, behind, behind_fold, p)
            if lag is not None:
                lagging.append(lag)
    equal = len(set(key_digests(full_a.region)) | set(key_digests(full_b.region))) - len(
        set(bug_keys) | {lag.key for lag in lagging}
    )
    return Report(shared, bugs, lagging, equal)


def _lag(
    key: bytes,
    side: str,
    ahead: Loaded,
    make: RegionFactory,
    behind: Loaded,
    behind_fold: Fold,
    progress: Progress | None = None,
) -> Lag | None:
    """Ops on `key` that the `ahead` side applied and `side` (the behind one) did not."""
    applied = behind_fold.region.vector
    ops_ahead: list[ops.Op] = []

    def keep(x: Applied) -> None:
        record = x.record
        if isinstance(record, ops.Op) and record.body.key == key:
            if record.seq > applied.get(record.origin, 0):
                ops_ahead.append(record)

    fold(ahead, make_region=make, observer=keep, progress=progress)
    if not ops_ahead:
        return None
    in_behind = {(r.origin, r.seq) for _p, _o, r, _t in behind.records if isinstance(r, ops.Op)}
    missing = [op for op in ops_ahead if (op.origin, op.seq) not in in_behind]
    held = [op for op in ops_ahead if (op.origin, op.seq) in in_behind]
    return Lag(key, side, missing, held)


def _bisect(
    a: Loaded,
    b: Loaded,
    key: bytes,
    order: list[Applied],
    make_a: RegionFactory,
    make_b: RegionFactory,
    progress: Progress | None = None,
) -> Divergence:
    """Smallest i such that, after side a's first i ops, the key differs between the sides."""
    vectors: list[dict[int, int]] = [{}]
    current: dict[int, int] = {}
    for applied in order:
        record = applied.record
        assert isinstance(record, ops.Op)
        current = {**current, record.origin: record.seq}
        vectors.append(current)

    def differs(i: int) -> bool:
        da = key_digests(fold(a, vectors[i], make_a, progress=progress).region).get(key)
        db = key_digests(fold(b, vectors[i], make_b, progress=progress).region).get(key)
        return da != db

    lo, hi = 0, len(order)  # differs(hi) is known; find the first i that differs
    if differs(0):
        return Divergence(key, None, None, 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if differs(mid):
            hi = mid
        else:
            lo = mid
    first = order[hi - 1]
    assert isinstance(first.record, ops.Op)
    return Divergence(key, first.record, (first.part, first.offset), hi)


def describe_op(op: ops.Op, names: dict[int, str]) -> str:
    who = names.get(op.origin, f"r{op.origin}")
    return f"{who}:{op.seq} {type(op.body).__name__} {text(op.body.key)}"
