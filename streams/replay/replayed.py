"""What a replay gives back: one fold per shard replayed, and the region seen through them.

Every figure a live node reports for its region has its replay twin here, computed the same
way: `digest()` is CRDT.DIGEST (`streams.crdt.keyspace.digest` over the shards' digests, in shard
order; one shard's own digest when one shard was replayed), `vector()` is CRDT.VECTOR (per
origin, the sum over shards of the applied seq), `shard_vectors()` is what CRDT.SHARDS reports
per shard, and `keyspace()` is what commands read (one shard's `State`, or `Sharded` over all).
With one shard everything is exactly that shard's, as before shards existed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streams.crdt import keyspace
from streams.crdt.fold import Fold
from streams.crdt.keyspace import Keyspace, Sharded
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.replay.logs import Logs
from streams.replay.positions import at_text
from streams.slots import shard_of


@dataclass
class Replayed:
    folds: dict[int, Fold]
    """shard index -> its fold, in shard order: every shard, or the one asked for."""
    logs: Logs
    skipped: list[dict[str, Any]] = field(default_factory=list)
    tainted_shards: set[int] = field(default_factory=set)
    """Shards built over skipped records (or from a tainted snapshot)."""
    records: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    """What the operator should know about how the result was read (a snapshot translated
    from another cluster, one without a cluster id), for stderr."""
    checks: str = ""
    """What the record gate could check (`streams.kafka.records.Trust.describe`)."""

    @property
    def cluster_id(self) -> str | None:
        """The Kafka cluster read: the positions are its offsets."""
        return self.logs.cluster_id

    def skipped_by_kind(self) -> dict[str, int]:
        """Records skipped, per why (`forged`, `corrupt`, `untrusted`)."""
        counts: dict[str, int] = {}
        for entry in self.skipped:
            kind = str(entry.get("kind", "corrupt"))
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    @property
    def tainting(self) -> int:
        """Skipped records that may have held a real op (all but forged ones)."""
        return sum(n for kind, n in self.skipped_by_kind().items() if kind != "forged")

    # --- the region's identity --------------------------------------------------------------

    @property
    def region_name(self) -> str:
        return self.logs.region_name

    @property
    def region_id(self) -> int:
        return self.logs.region_id

    @property
    def names(self) -> dict[int, str]:
        return self.logs.names

    @property
    def topics(self) -> list[str]:
        return self.logs.topics

    @property
    def shards(self) -> int:
        """How many shards the region has (not how many were replayed: `folds`)."""
        return self.logs.shards

    @property
    def whole(self) -> bool:
        """Every shard was replayed: the figures speak for the whole region."""
        return len(self.folds) == self.logs.shards

    @property
    def mode(self) -> IdMode:
        return next(iter(self.folds.values())).region.mode

    @property
    def tainted(self) -> bool:
        return bool(self.tainted_shards)

    # --- one shard ----------------------------------------------------------------------------

    @property
    def fold(self) -> Fold:
        """The fold, when one shard was replayed (a region of one shard, `--shard`, a key's)."""
        if len(self.folds) != 1:
            raise ValueError(f"{len(self.folds)} shards were replayed: use .folds")
        return next(iter(self.folds.values()))

    @property
    def region(self) -> Region:
        """The `Region`, when one shard was replayed (see `fold`)."""
        return self.fold.region

    @property
    def shard(self) -> int | None:
        """The shard replayed, when one was picked out of several; else None."""
        return None if self.whole else next(iter(self.folds))

    # --- the region as a live node reports it -------------------------------------------------

    def regions(self) -> dict[int, Region]:
        return {s: f.region for s, f in self.folds.items()}

    def digest(self) -> str:
        """CRDT.DIGEST at this position (one shard's digest when one was picked out)."""
        return keyspace.digest([f.region.state.digest() for f in self.folds.values()])

    def shard_vectors(self) -> dict[int, dict[int, int]]:
        return {s: dict(f.region.vector) for s, f in self.folds.items()}

    def vector(self) -> dict[int, int]:
        """CRDT.VECTOR: per origin, the applied seqs summed over the shards replayed."""
        total: dict[int, int] = {}
        for vector in self.shard_vectors().values():
            for origin, seq in vector.items():
                total[origin] = total.get(origin, 0) + seq
        return dict(sorted(total.items()))

    def vector_named(self) -> dict[str, int]:
        return {self.names.get(o, str(o)): s for o, s in self.vector().items()}

    def at(self) -> str:
        """The position as `--at` takes it back (per-shard form with several shards)."""
        return at_text(self.shard_vectors(), self.names, self.shards)

    def keyspace(self) -> Keyspace:
        """What commands read: the one shard's state, or every shard's routed by key."""
        if len(self.folds) == 1:
            return self.region.state
        states = {s: f.region.state for s, f in self.folds.items()}
        count = self.shards
        return Sharded(states, lambda key: shard_of(key, count))

    @property
    def local_seq(self) -> int:
        return sum(f.region.local_seq for f in self.folds.values())

    def waiting(self, shard: int | None = None) -> int:
        """Ops read but not applied (a causal dependency, a gate, a cut, another region's
        transaction read in part), in one shard or all."""
        folds = self.folds.values() if shard is None else [self.folds[shard]]
        return sum(
            f.region.causal.waiting + f.gated + f.waiting_local + f.assembling for f in folds
        )

    def positions(self) -> dict[tuple[str, int], int]:
        """Where reading got, per topic partition (the shards' partitions are disjoint)."""
        out: dict[tuple[str, int], int] = {}
        for f in self.folds.values():
            out.update(f.read)
        return dict(sorted(out.items()))

    @property
    def beyond_cut(self) -> int:
        return sum(f.beyond_cut for f in self.folds.values())
