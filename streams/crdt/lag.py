"""Redis 7.0's consumer-group read counter (`entries-read`) and `lag`, as pure functions.

Redis keeps, per group, a logical counter of how many entries the group has read counting from
the first entry ever added, and derives `lag = entries_added - entries_read`. The counter can only
be trusted while no deletion fragments the part of the stream it talks about; otherwise Redis
estimates it from the stream's bookkeeping (last ID, entries added, max deleted ID, first entry) or
gives up (`None` here, a null reply there). These are ports of t_stream.c (7.0.15):
`streamEstimateDistanceFromFirstEverEntry`, `streamRangeHasTombstones`, `streamReplyWithCGLag`
and the counter update of `streamReplyWithRange` for group reads.

Multi-region reading of the same rules (docs/architecture.md, "Replicated state"):
- the group's "last ID" is its highest per-origin cursor (`Group.last_delivered()`);
- the stream's counters are the ones this region has materialized (`KeyState`), so two regions can
  show different lags for the same group while ops are in flight, and equal ones once synced;
- a `>` read may deliver an entry that arrived late from another region with an ID below the
  group's last ID; Redis never does that, and here such an entry still counts as one read (it was
  added, so it must be read for the lag to reach 0).

Pure: reads only its arguments, never a clock; `None` stands for Redis's SCG_INVALID_ENTRIES_READ.
"""

from __future__ import annotations

from collections.abc import Iterable

from streams.crdt.groups import Group
from streams.crdt.state import KeyState
from streams.ids import MAX_ID, MIN_ID, StreamID
from streams.numbers import wrap64


def first_id(ks: KeyState) -> StreamID:
    """Redis's `s->first_id`: the first live entry's ID, 0-0 for an empty stream."""
    first = ks.entries.first()
    return MIN_ID if first is None else first[0]


def estimate_distance(ks: KeyState, sid: StreamID) -> int | None:
    """streamEstimateDistanceFromFirstEverEntry: the read counter at `sid`, or None if unknown.

    Known exactly for the last ID and (without fragmentation) at or before the first entry; every
    ID in a stream that never had an entry is at 0, and an emptied stream is at entries_added.
    """
    if not ks.entries_added:
        return 0
    length = ks.entries.length
    if not length and sid <= ks.last_id:
        return ks.entries_added
    if sid == ks.last_id:
        return ks.entries_added
    if sid > ks.last_id:
        return None
    first = first_id(ks)
    if ks.max_deleted_id == MIN_ID or ks.max_deleted_id < first:
        if sid < first:
            return wrap64(ks.entries_added - length)
        if sid == first:
            return wrap64(ks.entries_added - length + 1)
    return None


def range_has_tombstones(ks: KeyState, start: StreamID | None, end: StreamID | None) -> bool:
    """streamRangeHasTombstones: may a deleted entry lie in [start, end]?

    Redis only remembers the highest deleted ID, so this is "the max deleted ID is in the range
    and not before the first live entry".
    """
    if not ks.entries.length or ks.max_deleted_id == MIN_ID:
        return False
    if first_id(ks) > ks.max_deleted_id:
        return False
    lo = MIN_ID if start is None else start
    hi = MAX_ID if end is None else end
    return lo <= ks.max_deleted_id <= hi


def group_lag(ks: KeyState, group: Group) -> int | None:
    """streamReplyWithCGLag: entries added but not yet read by the group, None when unknown."""
    if not ks.entries_added:
        return 0
    last = group.last_delivered()
    if group.entries_read is not None and not range_has_tombstones(ks, last, None):
        return wrap64(ks.entries_added - group.entries_read)
    estimated = estimate_distance(ks, last)
    if estimated is None:
        return None
    return wrap64(ks.entries_added - estimated)


def entries_read_after(ks: KeyState, group: Group, delivered: Iterable[StreamID]) -> int | None:
    """The group's read counter after a `>` read hands out `delivered` (IDs in reply order).

    Redis's per-entry rule: with a valid counter and no tombstone at or after the entry, count
    one; otherwise re-estimate the counter at the new last ID. Computed before the read is
    applied, so the Deliver op can carry the result.
    """
    counter = group.entries_read
    last = group.last_delivered()
    for sid in delivered:
        top = max(sid, last)
        if counter is not None and not range_has_tombstones(ks, sid, None):
            counter = wrap64(counter + 1)
        elif ks.entries_added:
            counter = estimate_distance(ks, top)
        last = top
    return counter
