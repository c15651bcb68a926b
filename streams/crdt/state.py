"""The replicated keyspace and one `apply` per op type.

`State` is what a region has materialized: stream keys with their per-origin entry logs, groups,
tombstones, and the Redis 7 bookkeeping counters (last ID, entries added, max deleted ID) that
XINFO and ID generation read. Applying is deterministic and reads nothing but the op, so any
region, replay or Spark job folding the same ops in a causal order reaches the same replicated
state (entries and group names, which is what `digest` covers).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streams.crdt import ops
from streams.crdt.digest import feed, feed_entries
from streams.crdt.entries import EntryLogs
from streams.crdt.groups import Group, initial_cursors, pel_key
from streams.crdt.idmp import IdmpState
from streams.ids import MIN_ID, StreamID
from streams.numbers import wrap64

Dot = tuple[int, int]


class KeyState:
    """One stream key. It exists (for EXISTS, TYPE, XLEN...) iff it has an entry or a group."""

    __slots__ = (
        "entries",
        "groups",
        "last_id",
        "entries_added",
        "max_deleted_id",
        "del_tombstones",
        "group_tombstones",
        "idmp",
    )

    def __init__(self) -> None:
        self.entries = EntryLogs()
        self.groups: dict[bytes, Group] = {}
        self.last_id: StreamID = MIN_ID
        self.entries_added = 0
        self.max_deleted_id: StreamID = MIN_ID
        self.del_tombstones: list[Dot] = []
        self.group_tombstones: dict[bytes, list[Dot]] = {}
        self.idmp: IdmpState | None = None
        """XADD IDMP's records and XCFGSET's window (`streams.crdt.idmp`); None until used."""

    def idmp_state(self) -> IdmpState:
        if self.idmp is None:
            self.idmp = IdmpState()
        return self.idmp

    def remove_entry(self, origin: int, sid: StreamID) -> bool:
        """Remove one entry whatever its dot (the loser of concurrent IDMP records)."""
        if self.entries.remove_observed(origin, sid, 1 << 62):
            self.max_deleted_id = max(self.max_deleted_id, sid)
            return True
        return False

    @property
    def exists(self) -> bool:
        return self.entries.length > 0 or bool(self.groups)

    @property
    def top(self) -> StreamID | None:
        """The highest ID this region has seen in the key, for ID generation; None if fresh."""
        if self.last_id == MIN_ID and self.entries.length == 0:
            return None
        return self.last_id

    def is_empty_husk(self) -> bool:
        return not self.exists and not self.del_tombstones and not self.group_tombstones


class State:
    """Every key a region has materialized."""

    __slots__ = ("keys", "_tombstoned")

    def __init__(self) -> None:
        self.keys: dict[bytes, KeyState] = {}
        # Keys that may hold tombstones, so collection does not scan every key; None until the
        # first collection (a snapshot loader fills `keys` directly), which scans once.
        self._tombstoned: set[bytes] | None = None

    def get(self, key: bytes) -> KeyState | None:
        """The key if it exists (has an entry or a group), else None."""
        ks = self.keys.get(key)
        return ks if ks is not None and ks.exists else None

    def raw(self, key: bytes) -> KeyState | None:
        """The key's state even when it holds no entry and no group (bookkeeping only)."""
        return self.keys.get(key)

    def group(self, key: bytes, name: bytes) -> Group | None:
        ks = self.keys.get(key)
        return None if ks is None else ks.groups.get(name)

    def existing_keys(self) -> Iterator[bytes]:
        return (k for k, ks in self.keys.items() if ks.exists)

    def remembered_keys(self) -> list[bytes]:
        """In order, every key with an entry or a group, and every emptied stream whose last ID
        is still remembered: the keys FLUSHALL removes."""
        return sorted(k for k, ks in self.keys.items() if ks.exists or ks.last_id != MIN_ID)

    def _key(self, key: bytes) -> KeyState:
        ks = self.keys.get(key)
        if ks is None:
            ks = self.keys[key] = KeyState()
        return ks

    # --- replicated ops ----------------------------------------------------------------------

    def apply(self, op: ops.Op) -> None:
        _REPLICATED[type(op.body)](self, op, op.body)

    def apply_local(self, body: ops.LocalBody) -> None:
        ks = self.keys.get(body.key)
        group = None if ks is None else ks.groups.get(body.group)
        if ks is None or group is None:
            return  # the group was destroyed (maybe concurrently); its local ops are moot
        _LOCAL[type(body)](ks, group, body)

    def _apply_xadd(self, op: ops.Op, body: ops.XAdd) -> None:
        ks = self._key(body.key)
        ks.entries.add(op.origin, op.seq, body.id, body.fields)
        ks.last_id = max(ks.last_id, body.id)
        ks.entries_added = wrap64(ks.entries_added + 1)

    def _apply_del(self, op: ops.Op, body: ops.Del) -> None:
        ks = self._key(body.key)
        ks.entries.remove_all_observed(op.observed())
        ks.groups.clear()
        ks.del_tombstones.append((op.origin, op.seq))
        if self._tombstoned is not None:
            self._tombstoned.add(body.key)
        top = ks.entries.max_id()
        ks.last_id = top if top is not None else MIN_ID
        ks.entries_added = ks.entries.length
        ks.max_deleted_id = MIN_ID
        if ks.idmp is not None:
            _del_idmp(ks, op)

    def _apply_xdel(self, op: ops.Op, body: ops.XDel) -> None:
        ks = self.keys.get(body.key)
        if ks is None:
            return
        covered = op.observed()
        for sid in body.ids:
            for origin in ks.entries.origins_with(sid):
                if ks.entries.remove_observed(origin, sid, covered.get(origin, 0)):
                    ks.max_deleted_id = max(ks.max_deleted_id, sid)

    def _apply_xtrim(self, op: ops.Op, body: ops.XTrim) -> None:
        ks = self.keys.get(body.key)
        if ks is None:
            return
        covered = op.observed()
        for origin, threshold in body.thresholds:
            ks.entries.trim_observed(origin, threshold, covered.get(origin, 0))

    def _apply_xsetid(self, op: ops.Op, body: ops.XSetId) -> None:
        ks = self._key(body.key)
        ks.last_id = max(ks.last_id, body.last_id)
        if body.entries_added is not None:
            ks.entries_added = body.entries_added
        if body.max_deleted_id is not None:
            ks.max_deleted_id = body.max_deleted_id

    def _apply_group_create(self, op: ops.Op, body: ops.GroupCreate) -> None:
        ks = self._key(body.key)
        covered = op.observed()
        beaten = ks.del_tombstones + ks.group_tombstones.get(body.group, [])
        if any(covered.get(origin, 0) < seq for origin, seq in beaten):
            return  # a destroy or DEL it did not observe wins
        if body.group in ks.groups:
            return  # concurrent creates of one name merge into the group already here
        start = dict(body.start)
        ks.groups[body.group] = Group(
            body.group, body.default, initial_cursors(body.default, start), body.entries_read
        )

    def _apply_group_destroy(self, op: ops.Op, body: ops.GroupDestroy) -> None:
        ks = self._key(body.key)
        ks.groups.pop(body.group, None)
        ks.group_tombstones.setdefault(body.group, []).append((op.origin, op.seq))
        if self._tombstoned is not None:
            self._tombstoned.add(body.key)

    def _apply_ack_effect(self, op: ops.Op, body: ops.AckEffect) -> None:
        group = self.group(body.key, body.group)
        if group is None:
            return
        said = group.region_acks.get(op.origin)
        if said is None:
            said = group.region_acks[op.origin] = {}
        for origin, frontier in body.frontier:
            group.advance(origin, frontier)
            if frontier > said.get(origin, MIN_ID):
                said[origin] = frontier

    def _apply_drop_refs(self, op: ops.Op, body: ops.DropRefs) -> None:
        ks = self.keys.get(body.key)
        if ks is None:
            return
        bounds = dict(body.thresholds)
        ids = set(body.ids)
        for group in ks.groups.values():
            doomed = [
                key
                for key in group.pel
                if (key[0], key[1]) in ids or (key[0], key[1]) <= bounds.get(key[2], (-1, -1))
            ]
            for key in doomed:
                group.drop_pending(key)

    def _apply_idmp(self, op: ops.Op, body: ops.Idmp) -> None:
        ks = self._key(body.key)
        losers = ks.idmp_state().record(
            body.pid, body.iid, body.origin, body.id, (op.origin, op.seq), op.ts_ms, op.observed()
        )
        for sid, origin in losers:
            ks.remove_entry(origin, sid)
        if self._tombstoned is not None:
            self._tombstoned.add(body.key)

    def _apply_idmp_duplicate(self, op: ops.Op, body: ops.IdmpDuplicate) -> None:
        self._key(body.key).idmp_state().duplicates += 1

    def _apply_stream_config(self, op: ops.Op, body: ops.StreamConfig) -> None:
        idmp = self._key(body.key).idmp_state()
        observed = op.observed()
        if body.clear:
            idmp.clear_observed(observed)
        idmp.configure(body.duration_s, body.maxsize, (op.ts_ms, op.origin, op.seq), observed)

    # --- tombstone collection ------------------------------------------------------------------

    def tombstones_held(self) -> int:
        """DEL and XGROUP DESTROY tombstones held (a node's metrics): only the keys that may hold
        some once a collection listed them, every key before."""
        if self._tombstoned is None:
            held: Iterable[KeyState] = self.keys.values()
        else:
            held = (self.keys[k] for k in self._tombstoned if k in self.keys)
        return sum(
            len(ks.del_tombstones) + sum(len(d) for d in ks.group_tombstones.values())
            for ks in held
        )

    def collect_tombstones(self, stable: dict[int, int]) -> int:
        """Drop tombstones every region has applied (`stable` = per-origin seq all have).

        A create issued after its region applied a tombstone covers it, and every op a region
        issued before applying it has already been applied here (the caller learned the
        region's progress from a later op of that region, delivered causally), so once every
        region has applied a tombstone no create can still be beaten by it: it can go.
        """
        if self._tombstoned is None:
            self._tombstoned = {
                k
                for k, ks in self.keys.items()
                if ks.del_tombstones or ks.group_tombstones or ks.idmp is not None
            }
        dropped = 0
        for key in list(self._tombstoned):
            ks = self.keys.get(key)
            if ks is None:
                self._tombstoned.discard(key)
                continue
            before = len(ks.del_tombstones)
            ks.del_tombstones = [d for d in ks.del_tombstones if stable.get(d[0], 0) < d[1]]
            dropped += before - len(ks.del_tombstones)
            for name in list(ks.group_tombstones):
                kept = [d for d in ks.group_tombstones[name] if stable.get(d[0], 0) < d[1]]
                dropped += len(ks.group_tombstones[name]) - len(kept)
                if kept:
                    ks.group_tombstones[name] = kept
                else:
                    del ks.group_tombstones[name]
            if ks.idmp is not None:
                ks.idmp.collect(stable)  # records, not tombstones: not counted
            if not ks.del_tombstones and not ks.group_tombstones and ks.idmp is None:
                self._tombstoned.discard(key)
            if ks.is_empty_husk() and ks.last_id == MIN_ID:
                del self.keys[key]
        return dropped

    def tombstone_count(self) -> int:
        """DEL and XGROUP DESTROY tombstones held (diagnostics, tests)."""
        return sum(
            len(ks.del_tombstones) + sum(len(d) for d in ks.group_tombstones.values())
            for ks in self.keys.values()
        )

    # --- digest --------------------------------------------------------------------------------

    def digest(self) -> str:
        """Hex digest of the replicated state: every existing key's entries and group names."""
        h = hashlib.sha256()
        for key in sorted(self.existing_keys()):
            feed_key(h.update, key, self.keys[key])
        return h.hexdigest()


def feed_key(update: Callable[[bytes], object], key: bytes, ks: KeyState) -> None:
    """What `State.digest` feeds sha256 for one existing key (`streams.crdt.digest` says how):
    `K` key, its entries in merged order, `G` and each group name in byte order."""
    feed(update, b"K", key)
    feed_entries(update, ks.entries)
    for name in sorted(ks.groups):
        feed(update, b"G", name)


# --- local ops -------------------------------------------------------------------------------


def _apply_deliver(ks: KeyState, group: Group, body: ops.Deliver) -> None:
    consumer = group.consumer(body.consumer, body.now_ms)
    consumer.seen_time = body.now_ms
    for ref in body.entries:
        group.advance(ref[0], ref[1])
        if not body.noack:
            group.add_pending(ref, consumer, body.now_ms)
    group.entries_read = body.entries_read


def _apply_touch(ks: KeyState, group: Group, body: ops.TouchConsumer) -> None:
    group.consumer(body.consumer, body.now_ms).seen_time = body.now_ms
    for ref in body.redelivered:
        entry = group.pel.get(pel_key(ref))
        if entry is not None:
            entry.delivery_time = body.now_ms
            entry.delivery_count += 1


def _apply_ack(ks: KeyState, group: Group, body: ops.Ack) -> None:
    for sid in body.ids:
        group.ack(sid)


def _apply_claim(ks: KeyState, group: Group, body: ops.Claim) -> None:
    for ref in body.dropped:
        group.drop_pending(pel_key(ref))
    if not body.entries:
        # Redis looks the consumer up (creating it, refreshing its seen time) only when it
        # claims something.
        return _claim_last_id(group, body)
    consumer = group.consumer(body.consumer, body.now_ms)
    consumer.seen_time = body.now_ms
    for ref in body.entries:
        key = pel_key(ref)
        entry = group.pel.get(key)
        if entry is None:
            group.add_pending(ref, consumer, body.delivery_time_ms)
            entry = group.pel[key]
        else:
            entry = group.take(key, consumer)
        entry.delivery_time = body.delivery_time_ms
        if body.retry_count is not None:
            entry.delivery_count = body.retry_count
        elif body.increment:
            entry.delivery_count += 1
    _claim_last_id(group, body)


def _claim_last_id(group: Group, body: ops.Claim) -> None:
    if body.last_id is not None:
        if body.last_id > group.default_cursor:
            group.default_cursor = body.last_id
        for origin in list(group.cursors):
            group.advance(origin, body.last_id)


def _apply_setid(ks: KeyState, group: Group, body: ops.SetId) -> None:
    group.set_cursors(body.default, initial_cursors(body.default, dict(body.start)))
    group.entries_read = body.entries_read


def _apply_delconsumer(ks: KeyState, group: Group, body: ops.DelConsumer) -> None:
    group.delete_consumer(body.consumer)


def _apply_nack(ks: KeyState, group: Group, body: ops.Nack) -> None:
    for ref in body.entries:
        group.nack(ref, body.mode, body.retry_count)


def _del_idmp(ks: KeyState, op: ops.Op) -> None:
    """DEL forgets the IDMP records and window it observed (observed-remove, as its entries);
    iids-added counts the records left, so it agrees whatever the order of a concurrent record."""
    idmp = ks.idmp
    assert idmp is not None
    observed = op.observed()
    idmp.clear_observed(observed)
    _ts, origin, seq = idmp.stamp
    if idmp.config is not None and observed.get(origin, 0) >= seq:
        idmp.config, idmp.stamp = None, (0, 0, 0)
    idmp.added = idmp.live_records()
    idmp.duplicates = 0


_REPLICATED: dict[type, Callable[[State, ops.Op, Any], None]] = {
    ops.XAdd: State._apply_xadd,
    ops.Del: State._apply_del,
    ops.XDel: State._apply_xdel,
    ops.XTrim: State._apply_xtrim,
    ops.XSetId: State._apply_xsetid,
    ops.GroupCreate: State._apply_group_create,
    ops.GroupDestroy: State._apply_group_destroy,
    ops.AckEffect: State._apply_ack_effect,
    ops.DropRefs: State._apply_drop_refs,
    ops.Idmp: State._apply_idmp,
    ops.IdmpDuplicate: State._apply_idmp_duplicate,
    ops.StreamConfig: State._apply_stream_config,
}


def _check_covers(table: dict[type, Any], types: tuple[type, ...], what: str) -> None:
    if set(table) != set(types):
        raise RuntimeError(f"State's {what} apply table does not cover exactly {types}")


_check_covers(_REPLICATED, ops.REPLICATED_TYPES, "replicated")


def apply_local_to(ks: KeyState, group: Group, body: ops.LocalBody) -> None:
    """Apply a local op to a given group object: how a command that touches the same group
    twice (a key named twice in XREADGROUP) sees its own first effect on a scratch copy."""
    _LOCAL[type(body)](ks, group, body)


_LOCAL: dict[type, Callable[[KeyState, Group, Any], None]] = {
    ops.Deliver: _apply_deliver,
    ops.TouchConsumer: _apply_touch,
    ops.Ack: _apply_ack,
    ops.Claim: _apply_claim,
    ops.SetId: _apply_setid,
    ops.DelConsumer: _apply_delconsumer,
    ops.Nack: _apply_nack,
}

_check_covers(_LOCAL, ops.LOCAL_TYPES, "local")
