"""Which records of an op log may go: the retention rule, pure (no Kafka, no clock).

A reader of an op log on cluster C starts from a snapshot of C's region (its positions are
offsets on C) or from offset 0. So a record of topic T, partition p, on cluster C may be deleted
once nobody will ever read it again:

- the region's kept snapshots cover it: its offset is below the position of T/p in the *oldest*
  snapshot the policy keeps (`anchor`; a topic that snapshot does not name is kept whole: some
  reader may still need it from 0);
- it is older than the tail the policy keeps (`tail`: the first offset written within the last
  `tail_seconds`, as Kafka's `offsets_for_times` finds it);
- on the origin's own cluster (`<origin>.oplog` at home, the only topic a mirror copies from):
  every other region holds it, i.e. the oldest kept snapshot of every other region has applied
  its ops (`copied_seq`, the minimum of their applied seqs of this origin in this shard). A
  region that applied an op has read it from its copy, so the mirror copied it; and that
  region's own readers start at or past that snapshot. This needs nothing of the mirror's
  internals (MirrorMaker 2's offsets or the embedded mirror's headers): one rule for both.

The cut is the minimum of the bounds; any unknown bound (no snapshot, a region without one)
keeps everything. The cut never moves back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def choose_anchor(starts: Sequence[int], keep: int) -> int | None:
    """The index (into `starts`, the complete snapshots' first offsets, oldest first) of the
    oldest snapshot the policy keeps: the `keep`-th newest, or the oldest there is when fewer
    exist; None when there is none."""
    if not starts:
        return None
    return max(0, len(starts) - keep)


def first_offset_past(records: Iterable[tuple[int, int]], seq: int) -> int | None:
    """The offset of the first record (offset, highest seq of its ops), in offset order, that
    holds an op past `seq`: every record before it holds only ops at or below `seq`. None when
    none does among those given (the caller bounds the scan)."""
    for offset, highest in records:
        if highest > seq:
            return offset
    return None


def cut(low: int, bounds: Iterable[int | None]) -> int | None:
    """The offset before which records may be deleted: the minimum of `bounds`, if every bound
    is known and the minimum is past the partition's current start `low`; else None (nothing to
    delete)."""
    known: list[int] = []
    for bound in bounds:
        if bound is None:
            return None
        known.append(bound)
    if not known:
        return None
    point = min(known)
    return point if point > low else None


def copied_seq(vectors: Iterable[dict[int, int] | None], origin: int) -> int:
    """The highest seq of `origin` (in one shard) that every other region's oldest kept snapshot
    has applied: 0 (nothing) when a region has no snapshot (`None`) or none is given."""
    seqs: list[int] = []
    for vector in vectors:
        if vector is None:
            return 0
        seqs.append(vector.get(origin, 0))
    return min(seqs) if seqs else 0


def reaches(low: int, start: int | None) -> bool:
    """Whether a partition starting at `low` still holds every record a reader starting at
    `start` (a snapshot's position; None or 0: the beginning) needs."""
    return low <= (start or 0)


class LogTruncated(RuntimeError):
    """A reader needs records that retention deleted: said once, with what to do, instead of
    reading on from the partition's new start (a gap would leave ops out without a word)."""

    def __init__(self, who: str, topic: str, partition: int, low: int, start: int, why: str):
        super().__init__(
            f"{who}: {topic} partition {partition} now starts at offset {low} (the records"
            f" before it were deleted by the retention policy), but reading {why} needs it from"
            f" offset {start}: start from a snapshot at or past it (a node uses the newest"
            " complete one in <region>.snapshot; replay: --snapshot FILE)"
        )
        self.topic = topic
        self.partition = partition
        self.low = low
        self.start = start


def check_reaches(
    who: str, lows: dict[tuple[str, int], int], starts: dict[tuple[str, int], int], why: str
) -> None:
    """Raise `LogTruncated` for the first partition (in order) whose start `lows` says is gone."""
    for part in sorted(starts):
        low = lows.get(part, 0)
        if not reaches(low, starts[part]):
            raise LogTruncated(who, part[0], part[1], low, starts[part], why)
