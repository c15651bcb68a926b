"""Positions belong to the Kafka cluster they were read from: what a reader does with a position
(a snapshot's offsets, `--offsets`, a Spark checkpoint) taken on another cluster. Pure.

Why: a region's op log has a copy on every other region's cluster, under the same name with the
identity replication policy, at other offsets: MirrorMaker 2 does not copy transaction markers,
copies at least once, and a copy may start later. An offset of `r2.oplog` on r1's cluster names
nothing in particular on r2's cluster. Taken there as it is, it skips ops (the copy is shorter
there), waits for records that never come, or makes a Spark fold miss ops, without a word.

So every stored or printed position says which cluster it was read from (Kafka's cluster id:
`Metadata.cluster_id`, what `AdminClient.describe_cluster()` reports; the embedded Tansu broker
reports the `--cluster-id` it was started with, `streams-<region>`), and a reader compares it
with the cluster it reads (`compare`):

- `Origin.SAME`: the offsets are used as they are.
- `Origin.OTHER`: refused (`ClusterMismatch`, naming both ids) where nothing but offsets is
  known (`--offsets`, a Spark checkpoint), or *translated by seq* where a state comes with them
  (`translate`: a snapshot): the logs are read from their beginning and the fold drops every op
  the snapshot's state already covers (an op at or below its applied seq, a local op at or below
  its local seq), which is exact, since the fold applies each origin's ops in seq order; only
  the time to read the logs again is lost.
- `Origin.UNKNOWN`: a position written before positions carried a cluster id (or a broker that
  reports none): used as before, with a warning where it matters (`unknown_warning`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import TypeVar

SNAPSHOT_META = "cluster_id"
"""The snapshot meta key (`streams.snapshot`) naming the cluster its positions were read from."""

P = TypeVar("P")


class Origin(Enum):
    """Where a position was taken, relative to the cluster being read."""

    SAME = "same"
    OTHER = "other"
    UNKNOWN = "unknown"


class ClusterMismatch(ValueError):
    """A position taken on another cluster where it cannot be translated."""

    def __init__(self, what: str, taken_on: str, here: str, hint: str = "") -> None:
        super().__init__(
            f"{what} was read from Kafka cluster {taken_on}, but this is cluster {here}: "
            "offsets of one cluster name other records on another (a mirrored log's copy sits "
            f"at other offsets){'; ' + hint if hint else ''}"
        )
        self.taken_on = taken_on
        self.here = here


def compare(taken_on: str | None, here: str | None) -> Origin:
    if not taken_on or not here:
        return Origin.UNKNOWN
    return Origin.SAME if taken_on == here else Origin.OTHER


def check(what: str, taken_on: str | None, here: str | None, hint: str = "") -> Origin:
    """Refuse a position of another cluster (`ClusterMismatch`); SAME or UNKNOWN otherwise."""
    origin = compare(taken_on, here)
    if origin is Origin.OTHER:
        assert taken_on is not None and here is not None
        raise ClusterMismatch(what, taken_on, here, hint)
    return origin


def translate(
    positions: Mapping[P, int], taken_on: str | None, here: str | None
) -> tuple[dict[P, int], Origin]:
    """A snapshot's positions for reading cluster `here`: as they are when taken there (or when
    either id is unknown), none (every log from its beginning; the fold drops what the state
    covers, by seq) when taken on another cluster."""
    origin = compare(taken_on, here)
    return ({} if origin is Origin.OTHER else dict(positions)), origin


def translated_note(what: str, taken_on: str | None, here: str | None) -> str:
    return (
        f"{what} was taken on Kafka cluster {taken_on}, this is cluster {here}: its offsets do "
        "not apply here, so every log is read from its beginning and the ops the snapshot "
        "covers are dropped by seq (the same state, read in full)"
    )


def unknown_warning(what: str, here: str | None) -> str:
    return (
        f"{what} does not say which Kafka cluster its offsets were read from (written before "
        f"positions carried a cluster id): they are taken as offsets of this cluster "
        f"({here or 'id unknown'}); if it was taken on another cluster, the result is wrong"
    )


def snapshot_cluster(meta: Mapping[str, str]) -> str | None:
    """The cluster a snapshot's positions were read from (None: an older snapshot)."""
    return meta.get(SNAPSHOT_META) or None


def elsewhere(meta: Mapping[str, str], bootstrap: str) -> str | None:
    """For a snapshot without a cluster id: the bootstrap `streams snapshot` wrote it from (its
    `source` meta) when that is not `bootstrap`, else None. Another address may reach the same
    cluster, but nothing says so: a reader translates such a snapshot by seq, which is exact
    either way and costs only the time to read the logs in full."""
    source = meta.get("source") or ""
    return source if source and source != bootstrap and not snapshot_cluster(meta) else None
