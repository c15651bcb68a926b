"""Undo records of the ops a shard applied before the op log confirmed them.

Group commit applies a command's ops at dispatch and logs them afterwards
(`streams.node.runtime.writepath`). When a batch fails (the broker is away, the commit timed out),
the state holds ops the log may not: the failed batch's and those of the open batch built on it.
Each batch therefore carries a `Journal` of what its ops changed, and a failure undoes the open
batch's journal, then the failed one's, newest op first: the state is again the one the log
holds, and reads go on being served from it while the node re-reads its log in the background.

Why records per op rather than a copy of each touched key: an XADD is the common write and
touches one key, which may hold millions of entries; copying it for each batch would cost a
stream's size per transaction. Its undo is exact and small (drop the entry, put back the key's
three counters). XDEL and XTRIM (an XADD with MAXLEN trims each time) keep the entries they
remove, and their undo adds them back. The rarer ops (DEL, XSETID, group create/destroy, the ack
effect, and the local ops of XREADGROUP/XACK/XCLAIM...) keep a copy of what they touch, once per
batch: the key for the replicated ones, the group for the local ones; their undo puts the copy
back.

The same records serve reads while a batch is slow to commit (the broker stalls): a
`CommittedView` is the keyspace with the pending batches' ops undone on private copies of the
keys they touched, so a read is answered at once from what the log holds instead of waiting for
the commit (`streams.node.runtime.shard.Shard.committed_view`). Only the touched keys a read asks
for are copied, and only while a batch is slow.

One approximation, on the failure path only: a copy put back also drops what another region's ops
applied to that key after it was taken. The state then shows less than the log holds, never
more, and the reload that follows a failed batch replaces it with the log's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator

from streams.crdt import ops
from streams.crdt.groups import Group
from streams.crdt.idmp_undo import IdmpUndo
from streams.crdt.ops import Fields
from streams.crdt.region import Region
from streams.crdt.state import KeyState, State
from streams.ids import MIN_ID, StreamID


class _XAdd:
    __slots__ = ("key", "origin", "seq", "sid", "had_key", "had_entry", "last_id", "added")

    def __init__(self, state: State, op: ops.Op, body: ops.XAdd) -> None:
        ks = state.keys.get(body.key)
        self.key, self.origin, self.seq, self.sid = body.key, op.origin, op.seq, body.id
        self.had_key = ks is not None
        # An ID above the key's top cannot be there yet (the common case: no lookup).
        self.had_entry = (
            ks is not None
            and body.id <= ks.last_id
            and ks.entries.get(op.origin, body.id) is not None
        )
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

    def undo_private(self, state: State) -> None:
        """`undo` on a state whose objects are private copies (a view's)."""
        self.undo(state)


class _Removed:
    """The entries an XDEL or XTRIM is about to remove (and the counter XDEL moves): an XADD
    with MAXLEN trims every time, and copying its key per batch would cost the stream's size."""

    __slots__ = ("key", "entries", "max_deleted_id")

    def __init__(self, state: State, op: ops.Op, body: ops.XDel | ops.XTrim) -> None:
        self.key = body.key
        self.entries: list[tuple[int, int, StreamID, Fields]] = []
        ks = state.keys.get(body.key)
        self.max_deleted_id = MIN_ID if ks is None else ks.max_deleted_id
        if ks is None:
            return
        covered = op.observed()
        logs = ks.entries.logs
        if isinstance(body, ops.XTrim):
            for origin, threshold in body.thresholds:
                log = logs.get(origin)
                seen = covered.get(origin, 0)
                if log is not None:
                    self.entries += [
                        (origin, dot, sid, fields)
                        for sid, dot, fields in log.entries(MIN_ID, threshold)
                        if dot <= seen
                    ]
            return
        for sid in set(body.ids):
            for origin in ks.entries.origins_with(sid):
                seen = covered.get(origin, 0)
                self.entries += [
                    (origin, dot, sid, fields)
                    for _sid, dot, fields in logs[origin].entries(sid, sid)
                    if dot <= seen
                ]

    def undo(self, state: State) -> None:
        ks = state.keys.get(self.key)
        if ks is None:
            return
        for origin, dot, sid, fields in self.entries:
            ks.entries.add(origin, dot, sid, fields)
        ks.max_deleted_id = self.max_deleted_id

    def undo_private(self, state: State) -> None:
        self.undo(state)


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

    def undo_private(self, state: State) -> None:
        """`undo` leaving the saved copy as it is (a view may mutate what it puts back)."""
        if self.saved is None:
            state.keys.pop(self.key, None)
        else:
            state.keys[self.key] = copy_key(self.saved)


class _Group:
    """A group as it was before a local op (or the ack effect) changed it."""

    __slots__ = ("key", "name", "saved")

    def __init__(self, key: bytes, group: Group) -> None:
        self.key, self.name, self.saved = key, group.name, group.copy()

    def undo(self, state: State) -> None:
        ks = state.keys.get(self.key)
        if ks is not None:
            ks.groups[self.name] = self.saved

    def undo_private(self, state: State) -> None:
        ks = state.keys.get(self.key)
        if ks is not None:
            ks.groups[self.name] = self.saved.copy()


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
    twin.idmp = None if ks.idmp is None else ks.idmp.copy()
    return twin


class Journal:
    """What one batch's ops changed, in the order they were applied."""

    __slots__ = ("records", "copied", "groups", "own_seq", "local_seq")

    def __init__(self, region: Region) -> None:
        self.records: list[_XAdd | _Removed | _Key | _Group | IdmpUndo] = []
        self.copied: set[bytes] = set()
        """Keys copied whole in this batch: a later op on them needs no record of its own."""
        self.groups: set[tuple[bytes, bytes]] = set()
        """Groups copied in this batch (likewise)."""
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
        elif isinstance(body, ops.XDel | ops.XTrim):
            self.records.append(_Removed(state, op, body))
        elif isinstance(body, ops.AckEffect):
            self._group(state, key, body.group)
        elif isinstance(body, ops.Idmp | ops.IdmpDuplicate):
            self.records.append(IdmpUndo(state, op, body))
        else:
            self.records.append(_Key(state, key))
            self.copied.add(key)

    def before_local(self, state: State, record: ops.LocalOp) -> None:
        body = record.body
        if body.key not in self.copied:
            self._group(state, body.key, body.group)

    def _group(self, state: State, key: bytes, name: bytes) -> None:
        group = state.group(key, name)
        if group is not None and (key, name) not in self.groups:  # else it changes nothing
            self.records.append(_Group(key, group))
            self.groups.add((key, name))

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


class CommittedView:
    """The keyspace (`streams.crdt.keyspace.Keyspace`) without the ops of the pending batches:
    the keys they touched are rebuilt on first read from a copy of the live key with their
    records undone, newest first; every other key is the live one. Read-only, and valid while
    the journals and the live state it was made of hold no further op (the shard makes a new
    one then)."""

    __slots__ = ("live", "journals", "touched", "_made")

    def __init__(self, live: State, journals: list[Journal]) -> None:
        """`journals`: of the pending batches, oldest first."""
        self.live = live
        self.journals = journals
        self.touched: set[bytes] = set().union(*(j.keys() for j in journals))
        self._made: dict[bytes, KeyState | None] = {}

    def raw(self, key: bytes) -> KeyState | None:
        if key not in self.touched:
            return self.live.raw(key)
        if key not in self._made:
            self._made[key] = self._undone(key)
        return self._made[key]

    def get(self, key: bytes) -> KeyState | None:
        ks = self.raw(key)
        return ks if ks is not None and ks.exists else None

    def existing_keys(self) -> Iterator[bytes]:
        for key in list(self.live.keys):
            if self.get(key) is not None:
                yield key
        for key in sorted(self.touched - self.live.keys.keys()):
            if self.get(key) is not None:
                yield key

    def remembered_keys(self) -> list[bytes]:
        keys = self.live.keys.keys() | self.touched
        return sorted(
            k
            for k in keys
            if (ks := self.raw(k)) is not None and (ks.exists or ks.last_id != MIN_ID)
        )

    def digest(self) -> str:
        state = State()
        for key in self.live.keys.keys() | self.touched:
            ks = self.raw(key)
            if ks is not None:
                state.keys[key] = ks
        return state.digest()

    def _undone(self, key: bytes) -> KeyState | None:
        scratch = State()
        live = self.live.keys.get(key)
        if live is not None:
            scratch.keys[key] = copy_key(live)
        for journal in reversed(self.journals):
            for record in reversed(journal.records):
                if record.key == key:
                    record.undo_private(scratch)
        return scratch.keys.get(key)
