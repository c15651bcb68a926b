"""Consumer groups: replicated existence (delete wins) plus the region-local part.

A group exists in a region while at least one create of it has been applied that no applied
destroy (or DEL of the key) beats. Delete wins: a destroy kills every create it observed and every
create concurrent with it, so a create survives only when its causal context covers every destroy
tombstone of its name and every DEL tombstone of its key.

Everything else is local to the region that made it: per-origin delivery cursors, the PEL,
consumers, entries-read. Only the consecutive-XACK effect crosses regions, and it only raises
cursors.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedDict, SortedSet

from streams.crdt.ops import EntryRef
from streams.ids import StreamID

PelKey = tuple[int, int, int]
"""(ms, seq, origin): PEL order is ID order, duplicates by region id."""


def pel_key(ref: EntryRef) -> PelKey:
    origin, (ms, seq) = ref
    return (ms, seq, origin)


def pel_ref(key: PelKey) -> EntryRef:
    return (key[2], (key[0], key[1]))


# Compiled (scripts/build_native.py), a class whose __init__ takes arguments can be copied or
# pickled (the Spark pipeline pickles a key's state) only when declared `serializable`; and with
# mypyc 2.x such a class built from interpreted code (the snapshot reader) runs its __init__ only
# if it also allows interpreted subclasses (its tp_init is otherwise empty). Both, then.


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class PendingEntry:
    __slots__ = ("consumer", "delivery_time", "delivery_count")

    def __init__(self, consumer: bytes, delivery_time: int, delivery_count: int) -> None:
        self.consumer = consumer
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Consumer:
    __slots__ = ("name", "seen_time", "pending")

    def __init__(self, name: bytes, seen_time: int) -> None:
        self.name = name
        self.seen_time = seen_time
        self.pending: SortedSet = SortedSet()


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Group:
    """One group as a region sees it."""

    __slots__ = (
        "name",
        "default_cursor",
        "cursors",
        "pel",
        "consumers",
        "entries_read",
        "ack_sent",
    )

    def __init__(
        self,
        name: bytes,
        default_cursor: StreamID,
        cursors: dict[int, StreamID],
        entries_read: int | None,
    ) -> None:
        self.name = name
        self.default_cursor = default_cursor
        self.cursors = cursors
        self.pel: SortedDict = SortedDict()
        self.consumers: dict[bytes, Consumer] = {}
        self.entries_read = entries_read
        # What this region last replicated as its consecutive-XACK frontier (per origin).
        self.ack_sent: dict[int, StreamID] = dict(cursors)

    def cursor(self, origin: int) -> StreamID:
        return self.cursors.get(origin, self.default_cursor)

    def copy(self) -> Group:
        """An independent copy of the local part, for a command that must see its own first
        effect before its ops are applied (the same key named twice in one XREADGROUP)."""
        twin = Group(self.name, self.default_cursor, dict(self.cursors), self.entries_read)
        twin.ack_sent = dict(self.ack_sent)
        for key, entry in self.pel.items():
            twin.pel[key] = PendingEntry(entry.consumer, entry.delivery_time, entry.delivery_count)
        for name, consumer in self.consumers.items():
            clone = twin.consumers[name] = Consumer(name, consumer.seen_time)
            clone.pending.update(consumer.pending)
        return twin

    def last_delivered(self) -> StreamID:
        if not self.cursors:
            return self.default_cursor
        return max(self.default_cursor, max(self.cursors.values()))

    def set_cursors(self, default: StreamID, start: dict[int, StreamID]) -> None:
        self.default_cursor = default
        self.cursors = dict(start)

    def advance(self, origin: int, sid: StreamID) -> None:
        if sid > self.cursor(origin):
            self.cursors[origin] = sid

    def consumer(self, name: bytes, now_ms: int) -> Consumer:
        found = self.consumers.get(name)
        if found is None:
            found = self.consumers[name] = Consumer(name, now_ms)
        return found

    def add_pending(self, ref: EntryRef, consumer: Consumer, now_ms: int) -> None:
        key = pel_key(ref)
        old = self.pel.get(key)
        if old is not None:
            self.consumers[old.consumer].pending.discard(key)
            old.consumer = consumer.name
            old.delivery_time = now_ms
            old.delivery_count = 1
        else:
            self.pel[key] = PendingEntry(consumer.name, now_ms, 1)
        consumer.pending.add(key)

    def ack(self, sid: StreamID) -> int:
        """Acknowledge every pending entry carrying this ID (duplicates: all origins)."""
        lo = (sid[0], sid[1], 0)
        hi = (sid[0], sid[1], 1 << 30)
        keys = list(self.pel.irange(lo, hi))
        for key in keys:
            entry = self.pel.pop(key)
            owner = self.consumers.get(entry.consumer)
            if owner is not None:
                owner.pending.discard(key)
        return len(keys)

    def drop_pending(self, key: PelKey) -> None:
        entry = self.pel.pop(key, None)
        if entry is not None:
            owner = self.consumers.get(entry.consumer)
            if owner is not None:
                owner.pending.discard(key)

    def delete_consumer(self, name: bytes) -> int:
        consumer = self.consumers.pop(name, None)
        if consumer is None:
            return 0
        for key in consumer.pending:
            self.pel.pop(key, None)
        return len(consumer.pending)

    def min_pending_per_origin(self) -> dict[int, StreamID]:
        found: dict[int, StreamID] = {}
        for ms, seq, origin in self.pel.keys():
            if origin not in found:
                found[origin] = (ms, seq)
        return found


def initial_cursors(default: StreamID, start: dict[int, StreamID]) -> dict[int, StreamID]:
    return {o: sid for o, sid in start.items() if sid != default}
