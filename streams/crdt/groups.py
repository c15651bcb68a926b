"""Consumer groups: replicated existence (delete wins) plus the region-local part.

A group exists in a region while at least one create of it has been applied that no applied
destroy (or DEL of the key) beats. Delete wins: a destroy kills every create it observed and every
create concurrent with it, so a create survives only when its causal context covers every destroy
tombstone of its name and every DEL tombstone of its key.

Everything else is local to the region that made it: per-origin delivery cursors, the PEL,
consumers, entries-read. Only the consecutive-XACK effect crosses regions: it raises cursors, and
each group remembers, per region, the highest frontier that region has announced
(`region_acks`): what ACKED deletes consult for the PELs of the other regions
(docs/architecture.md, "Redis 8 across regions").

A NACKed pending entry (XNACK) has no consumer (`consumer` is None), delivery time 0 and a
place in the group's NACK order (`nack_order`, from the group's `nack_seq`): claims take NACKed
entries first, in that order.
"""

from __future__ import annotations

from enum import IntEnum

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedDict, SortedSet

from streams.crdt.ops import EntryRef
from streams.ids import MIN_ID, StreamID

LLONG_MAX = 2**63 - 1
"""XNACK FATAL's delivery count (Redis's LLONG_MAX)."""


class NackMode(IntEnum):
    """XNACK's mode: what happens to the delivery count of an entry handed back."""

    SILENT = 0
    """One delivery less (not below 0): the consumer never really had it."""
    FAIL = 1
    """Unchanged: a delivery that failed."""
    FATAL = 2
    """LLONG_MAX: never to be retried by a consumer counting deliveries."""


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
    """`consumer` None: NACKed (unowned), delivery time 0, `nack_order` its place among the
    group's NACKed entries (0 when owned)."""

    __slots__ = ("consumer", "delivery_time", "delivery_count", "nack_order")

    def __init__(
        self, consumer: bytes | None, delivery_time: int, delivery_count: int, nack_order: int = 0
    ) -> None:
        self.consumer = consumer
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count
        self.nack_order = nack_order


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
        "region_acks",
        "nack_seq",
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
        # The cursors the group was created with: the frontier every region starts from.
        self.ack_sent: dict[int, StreamID] = dict(cursors)
        # Per region, the highest consecutive-XACK frontier it announced (per origin): the
        # replicated ops say it, so every region holds the same (this one's included).
        self.region_acks: dict[int, dict[int, StreamID]] = {}
        self.nack_seq = 0

    def cursor(self, origin: int) -> StreamID:
        return self.cursors.get(origin, self.default_cursor)

    def copy(self) -> Group:
        """An independent copy of the local part, for a command that must see its own first
        effect before its ops are applied (the same key named twice in one XREADGROUP)."""
        twin = Group(self.name, self.default_cursor, dict(self.cursors), self.entries_read)
        twin.ack_sent = dict(self.ack_sent)
        twin.region_acks = {r: dict(f) for r, f in self.region_acks.items()}
        twin.nack_seq = self.nack_seq
        for key, entry in self.pel.items():
            twin.pel[key] = PendingEntry(
                entry.consumer, entry.delivery_time, entry.delivery_count, entry.nack_order
            )
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
            self._disown(key, old)
            old.consumer = consumer.name
            old.delivery_time = now_ms
            old.delivery_count = 1
        else:
            self.pel[key] = PendingEntry(consumer.name, now_ms, 1)
        consumer.pending.add(key)

    def _disown(self, key: PelKey, entry: PendingEntry) -> None:
        """Take a pending entry from its owner's list (a NACKed one has none)."""
        if entry.consumer is not None:
            owner = self.consumers.get(entry.consumer)
            if owner is not None:
                owner.pending.discard(key)
        entry.nack_order = 0

    def take(self, key: PelKey, consumer: Consumer) -> PendingEntry:
        """Give a pending entry to `consumer` (a claim)."""
        entry: PendingEntry = self.pel[key]
        if entry.consumer != consumer.name or entry.nack_order:
            self._disown(key, entry)
            entry.consumer = consumer.name
            consumer.pending.add(key)
        return entry

    def nack(self, ref: EntryRef, mode: int, retry_count: int | None) -> None:
        """Hand a pending entry back unowned (added when not pending: FORCE), at the end of the
        NACK order."""
        key = pel_key(ref)
        entry = self.pel.get(key)
        if entry is None:
            entry = self.pel[key] = PendingEntry(None, 0, 0)
        else:
            self._disown(key, entry)
        entry.consumer = None
        entry.delivery_time = 0
        self.nack_seq += 1
        entry.nack_order = self.nack_seq
        if retry_count is not None:
            entry.delivery_count = retry_count
        elif mode == NackMode.SILENT:
            entry.delivery_count = max(0, entry.delivery_count - 1)
        elif mode == NackMode.FATAL:
            entry.delivery_count = LLONG_MAX

    def nacked(self) -> int:
        """XINFO STREAM FULL's nacked-count."""
        return sum(1 for entry in self.pel.values() if entry.consumer is None)

    def acked_here(self, ref: EntryRef) -> bool:
        """Redis's ACKED test in this region: the group delivered the entry (its cursor for the
        entry's origin is past it) and it is not pending."""
        return ref[1] <= self.cursor(ref[0]) and pel_key(ref) not in self.pel

    def announced(self, region: int, origin: int) -> StreamID:
        """The highest frontier `region` announced for `origin`, at least the creation cursor
        (below it nothing was ever delivered by `>`)."""
        start = self.ack_sent.get(origin, self.default_cursor)
        said = self.region_acks.get(region, {}).get(origin, MIN_ID)
        return max(start, said)

    def ack(self, sid: StreamID) -> int:
        """Acknowledge every pending entry carrying this ID (duplicates: all origins)."""
        lo = (sid[0], sid[1], 0)
        hi = (sid[0], sid[1], 1 << 30)
        keys = list(self.pel.irange(lo, hi))
        for key in keys:
            self._disown(key, self.pel.pop(key))
        return len(keys)

    def drop_pending(self, key: PelKey) -> None:
        entry = self.pel.pop(key, None)
        if entry is not None:
            self._disown(key, entry)

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
