"""Undo records of the ops a shard applied before the op log confirmed them.

Group commit applies a command's ops at dispatch and logs them afterwards
(`streams.node.writepath`). When a batch fails (the broker is away, the commit timed out), the
state holds ops the log may not: the failed batch's and those of the open batch built on it. Each
batch therefore carries a `Journal` of what its ops changed, and a failure undoes the open
batch's journal, then the failed one's, newest op first: the state is again the one the log
holds, and reads go on being served from it while the node re-reads its log in the background.

Why records per op rather than a copy of each touched key: an XADD is the common write and
touches one key, which may hold millions of entries; copying it for each batch would cost a
stream's size per transaction. Its undo is exact and small (drop the entry, put back the key's
three counters). The rarer ops (DEL, XDEL, XTRIM, XSETID, group create/destroy, the ack effect,
and the local ops of XREADGROUP/XACK/XCLAIM...) keep a copy of what they touch, once per batch:
the key for the replicated ones, the group for the local ones; their undo puts the copy back.

One approximation, on the failure path only: a copy put back also drops what another region's ops
applied to that key after it was taken. The state then shows less than the log holds, never
more, and the reload that follows a failed batch replaces it with the log's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from streams.crdt import ops
from streams.crdt.groups import Group
from streams.crdt.region import Region
from streams.crdt.state import KeyState, State
from streams.ids import StreamID


class _XAdd:
    __slots__ = ("key", "origin", "seq", "sid", "had_key", "had_entry", "last_id", "added")

    def __init__(self, state: State, op: ops.Op, body: ops.XAdd) -> None:
        ks = state.keys.get(body.key)
        self.key, self.origin, self.seq, self.sid = body.key, op.origin, op.seq, body.id
        self.had_key = ks is not None
        self.had_entry = ks is not None and ks.entries.get(op.origin, body.id) is not None
        self.last_id: StreamID | None = None if ks is None else ks.last_id
        self.added = 0 if ks is None else ks.entries_added

    def undo(self, state: State) -> None:
        ks = state.keys.get(self.key)
        if ks is None:
            return
        if not self.had_entry:
            ks.entries.remove_observed(self.origin, self.sid, self.seq)
        if not self.had_key:
            if ks.is_empty_husk():
                del state.keys[self.key]
            return
        assert self.last_id is not None
        ks.last_id, ks.entries_added = self.last_id, self.added


class _Key:
    """A key as it was before an op that may change any part of it."""

    __slots__ = ("key", "saved")

    def __init__(self, state: State, key: bytes) -> None:
        ks = state.keys.get(key)
        self.key = key
        self.saved = None if ks is None else copy_key(ks)

    def undo(self, state: State) -> None:
        if self.saved is None:
            state.keys.pop(self.key, None)
        else:
            state.keys[self.key] = self.saved


class _Group:
    """A group as it was before a local op (or the ack effect) changed it."""

    __slots__ = ("key", "name", "saved")

    def __init__(self, key: bytes, group: Group) -> None:
        self.key, self.name, self.saved = key, group.name, group.copy()

    def undo(self, state: State) -> None:
        ks = state.keys.get(self.key)
        if ks is not None:
            ks.groups[self.name] = self.saved


def copy_key(ks: KeyState) -> KeyState:
    twin = KeyState()
    twin.entries = copy.deepcopy(ks.entries)
    twin.groups = {name: group.copy() for name, group in ks.groups.items()}
    twin.last_id, twin.entries_added, twin.max_deleted_id = (
        ks.last_id,
        ks.entries_added,
        ks.max_deleted_id,
    )
    twin.del_tombstones = list(ks.del_tombstones)
    twin.group_tombstones = {name: list(dots) for name, dots in ks.group_tombstones.items()}
    return twin


class Journal:
    """What one batch's ops changed, in the order they were applied."""

    __slots__ = ("records", "copied", "own_seq", "local_seq")

    def __init__(self, region: Region) -> None:
        self.records: list[_XAdd | _Key | _Group] = []
        self.copied: set[bytes] = set()
        """Keys copied whole in this batch: a later op on them needs no record of its own."""
        self.own_seq = region.causal.applied.get(region.id, 0)
        self.local_seq = region.local_seq

    def before(self, state: State, op: ops.Op) -> None:
        """Record what `op` (about to be applied) changes."""
        body = op.body
        key = body.key
        if key in self.copied:
            return
        if isinstance(body, ops.XAdd):
            self.records.append(_XAdd(state, op, body))
        elif isinstance(body, ops.AckEffect):
            group = state.group(key, body.group)
            if group is not None:
                self.records.append(_Group(key, group))
        else:
            self.records.append(_Key(state, key))
            self.copied.add(key)

    def before_local(self, state: State, record: ops.LocalOp) -> None:
        body = record.body
        if body.key in self.copied:
            return
        group = state.group(body.key, body.group)
        if group is not None:  # else the op changes nothing (its group is gone)
            self.records.append(_Group(body.key, group))

    def keys(self) -> set[bytes]:
        return {r.key for r in self.records}

    def undo(self, region: Region) -> None:
        """Put the state back as it was before this batch's first op."""
        state = region.state
        for record in reversed(self.records):
            record.undo(state)
        if self.own_seq:
            region.causal.applied[region.id] = self.own_seq
        else:
            region.causal.applied.pop(region.id, None)
        region.local_seq = self.local_seq
        self.records = []


def undo_all(region: Region, journals: Iterable[Journal]) -> set[bytes]:
    """Undo `journals` (oldest first, as the batches were opened), newest first; the keys they
    touched."""
    ordered = list(journals)
    touched: set[bytes] = set()
    for journal in reversed(ordered):
        touched |= journal.keys()
        journal.undo(region)
    return touched
