"""Idempotent production (XADD IDMP / IDMPAUTO, XCFGSET): a stream's record of which entry each
producer's idempotent ID (IID) made, replicated so that deduplication holds across regions.

Redis keeps, per stream and producer, the last IDMP-MAXSIZE IIDs added within IDMP-DURATION
seconds; a retry naming one of them gets the first entry's ID back and adds nothing. Here every
record is a replicated op (`ops.Idmp`, issued with the XAdd it names), so once the regions have
synced, a retry sent to another region after a failover finds the record there too.

Concurrent records of one (pid, iid): two regions may both accept the same IID before either
has seen the other's record. A record loses when a record of the same IID concurrent with it
names a lower entry in (ID, origin) order, and a lost record's entry is removed from the stream.
Decided pair by pair as records meet, this removes the same entries in every region whatever
the order they apply them in, and leaves at least the lowest entry. Concurrency is decided
with dots, never with time: a record whose issuer had applied an earlier one of the IID (and
found it out of its window, or cleared by XCFGSET) stands beside it, as Redis adds a new entry
for an IID that left its window.

The window. A retry finds the IID's latest live record if it is among the producer's newest
`maxsize` live records (ordered by their ops' (time, origin, seq), the same in every region) and
younger than `duration` seconds by the looking region's clock against the record's origin time
(`alive`). Records that fell out of the window, were cleared or lost stay until they are
causally stable (`collect`, with the tombstones): dropped earlier, a region could miss a
concurrent duplicate of one and keep an entry the others remove.

The window's settings replicate with the stream (`ops.StreamConfig`: a setting made after
another replaces it, of concurrent ones the later by (time, origin, seq) wins); a stream that
never had them uses this node's CONFIG `stream-idmp-duration` / `stream-idmp-maxsize`
(`defaults`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedList

from streams.crdt.ops import Fields
from streams.ids import StreamID

Dot = tuple[int, int]

DEFAULT_DURATION_S = 100
DEFAULT_MAXSIZE = 100
DURATION_RANGE = (1, 86_400)
MAXSIZE_RANGE = (1, 10_000)

_defaults = [DEFAULT_DURATION_S, DEFAULT_MAXSIZE]


def set_defaults(duration_s: int, maxsize: int) -> None:
    """The node's CONFIG stream-idmp-duration / stream-idmp-maxsize
    (`streams.node.pipeline.settings`),
    for streams whose window was never set."""
    _defaults[0], _defaults[1] = duration_s, maxsize


def defaults() -> tuple[int, int]:
    return _defaults[0], _defaults[1]


def auto_iid(fields: Fields) -> bytes:
    """IDMPAUTO's IID: a digest of the field-value pairs, whatever their order (Redis's
    "regardless of field order"), the same in every region and build (no `hash()`)."""
    pairs = sorted(zip(fields[::2], fields[1::2], strict=True))
    h = hashlib.sha256(b"idmpauto")
    for field, value in pairs:
        h.update(b"%d:" % len(field))
        h.update(field)
        h.update(b"%d:" % len(value))
        h.update(value)
    return h.digest()[:16]


Key = tuple[int, int, int]
"""A record's place in its producer's order: (origin time, origin, seq) of its op, the same in
every region (apply order is not)."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class IdmpRecord:
    """One record op: the entry (origin, id) it names, its dot and origin time; `cleared`: a
    clear (XCFGSET, DEL) forgot it; `lost`: a concurrent record of the same IID names a lower
    entry, so its entry was removed."""

    __slots__ = ("origin", "id", "dot", "ts_ms", "cleared", "lost")

    def __init__(
        self,
        origin: int,
        sid: StreamID,
        dot: Dot,
        ts_ms: int,
        cleared: bool = False,
        lost: bool = False,
    ) -> None:
        self.origin = origin
        self.id = sid
        self.dot = dot
        self.ts_ms = ts_ms
        self.cleared = cleared
        self.lost = lost

    def entry(self) -> tuple[StreamID, int]:
        return self.id, self.origin

    def key(self) -> Key:
        return self.ts_ms, self.dot[0], self.dot[1]

    def live(self) -> bool:
        return not (self.cleared or self.lost)

    def copy(self) -> IdmpRecord:
        return IdmpRecord(self.origin, self.id, self.dot, self.ts_ms, self.cleared, self.lost)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class IdmpProducer:
    """One producer's records per IID (in apply order), and the order of its live ones."""

    __slots__ = ("records", "order")

    def __init__(self) -> None:
        self.records: dict[bytes, list[IdmpRecord]] = {}
        self.order: SortedList = SortedList()

    def add(self, iid: bytes, record: IdmpRecord) -> None:
        self.records.setdefault(iid, []).append(record)
        if record.live():
            self.order.add(record.key())

    def retire(self, record: IdmpRecord) -> None:
        """Take a record out of the order (it was live)."""
        self.order.discard(record.key())


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class IdmpState:
    """A stream's IDMP state: producers, the window (None: the node's defaults) with the
    (time, origin, seq) of the op that set it, and XINFO's lifetime counters."""

    __slots__ = ("producers", "config", "stamp", "added", "duplicates")

    def __init__(self) -> None:
        self.producers: dict[bytes, IdmpProducer] = {}
        self.config: tuple[int, int] | None = None
        self.stamp: tuple[int, int, int] = (0, 0, 0)
        self.added = 0
        self.duplicates = 0

    def copy(self) -> IdmpState:
        twin = IdmpState()
        twin.config, twin.stamp = self.config, self.stamp
        twin.added, twin.duplicates = self.added, self.duplicates
        for pid, iid, record in self.records():
            twin._producer(pid).add(iid, record.copy())
        return twin

    def window(self) -> tuple[int, int]:
        """(duration in seconds, maxsize) in effect."""
        return self.config if self.config is not None else defaults()

    def _producer(self, pid: bytes) -> IdmpProducer:
        producer = self.producers.get(pid)
        if producer is None:
            producer = self.producers[pid] = IdmpProducer()
        return producer

    # --- reading ---------------------------------------------------------------------------

    def alive(self, producer: IdmpProducer, record: IdmpRecord, now_ms: int) -> bool:
        """In the window: live, among the producer's `maxsize` latest live records (by their
        ops' (time, origin, seq)), and younger than `duration`."""
        duration_s, maxsize = self.window()
        if not record.live():
            return False
        later = len(producer.order) - producer.order.bisect_right(record.key())
        return later < maxsize and now_ms - record.ts_ms < duration_s * 1000

    def lookup(self, pid: bytes, iid: bytes, now_ms: int) -> IdmpRecord | None:
        """The record a retry finds (None: add the entry): the IID's latest live record."""
        producer = self.producers.get(pid)
        found = None if producer is None else producer.records.get(iid)
        live = [r for r in found or () if r.live()]
        if producer is None or not live or not self.alive(producer, live[-1], now_ms):
            return None
        return live[-1]

    def tracked(self, now_ms: int) -> tuple[int, int]:
        """XINFO STREAM's (pids-tracked, iids-tracked): producers with a record in the window,
        and those records."""
        pids = iids = 0
        for producer in self.producers.values():
            live = sum(
                1
                for records in producer.records.values()
                for r in records
                if self.alive(producer, r, now_ms)
            )
            pids += 1 if live else 0
            iids += live
        return pids, iids

    def records(self) -> Iterator[tuple[bytes, bytes, IdmpRecord]]:
        """Every record as (pid, iid, record): producers in byte order, each producer's IIDs in
        the order they came, an IID's records in the order they were applied (snapshots)."""
        for pid in sorted(self.producers):
            for iid, records in self.producers[pid].records.items():
                for record in records:
                    yield pid, iid, record

    def live_records(self) -> int:
        return sum(1 for _p, _i, r in self.records() if r.live())

    # --- applying --------------------------------------------------------------------------

    def record(
        self,
        pid: bytes,
        iid: bytes,
        origin: int,
        sid: StreamID,
        dot: Dot,
        ts_ms: int,
        observed: dict[int, int],
    ) -> list[tuple[StreamID, int]]:
        """Apply a record op; returns the entries (id, origin) that lost, which the caller
        removes from the stream. A record loses when a record of the same IID concurrent with
        it names a lower entry: decided pair by pair as they meet, so every region removes the
        same entries whatever the order (a record its issuer had applied is not concurrent:
        it was forgotten, and the new one stands beside it)."""
        self.added += 1
        producer = self._producer(pid)
        new = IdmpRecord(origin, sid, dot, ts_ms)
        losers: list[tuple[StreamID, int]] = []
        for old in producer.records.get(iid, ()):
            if observed.get(old.dot[0], 0) >= old.dot[1]:
                continue  # the new one's issuer had applied it
            if old.entry() < new.entry():
                new.lost = True
            elif not old.lost:
                if old.live():
                    producer.retire(old)
                old.lost = True
                losers.append(old.entry())
        if new.lost:
            losers.append(new.entry())
        producer.add(iid, new)
        return losers

    def clear_observed(self, observed: dict[int, int]) -> None:
        """XCFGSET changed the window (or DEL): forget the records the issuer had applied (a
        concurrent record survives, as a concurrent XADD survives DEL). Forgotten records stay
        until collected: dropped at once, one that meets a concurrent duplicate later would
        leave both entries here where a region that resolved the pair first keeps one."""
        for producer in self.producers.values():
            for records in producer.records.values():
                for record in records:
                    if record.live() and observed.get(record.dot[0], 0) >= record.dot[1]:
                        producer.retire(record)
                        record.cleared = True

    def configure(
        self, duration_s: int, maxsize: int, stamp: tuple[int, int, int], observed: dict[int, int]
    ) -> None:
        """Set the window: a setting whose issuer had applied the current one replaces it; of
        two concurrent ones the later by (time, origin, seq) wins, whatever the order they
        come in (a clock running behind never undoes a setting made after another)."""
        _ts, origin, seq = self.stamp
        if self.config is None or observed.get(origin, 0) >= seq or stamp > self.stamp:
            self.config, self.stamp = (duration_s, maxsize), stamp

    def collect(self, stable: dict[int, int]) -> int:
        """Drop the records out of the window (forgotten, lost, pushed out by count, or older
        than the duration against the producer's newest record: the state reads no clock)
        that every region has applied; returns how many. A stable record can no longer meet a
        concurrent duplicate."""
        dropped = 0
        for pid in list(self.producers):
            producer = self.producers[pid]
            newest = max((r.ts_ms for _i, rs in producer.records.items() for r in rs), default=0)
            for iid in list(producer.records):
                keep: list[IdmpRecord] = []
                for r in producer.records[iid]:
                    if stable.get(r.dot[0], 0) >= r.dot[1] and not self.alive(producer, r, newest):
                        if r.live():
                            producer.retire(r)
                        dropped += 1
                    else:
                        keep.append(r)
                if keep:
                    producer.records[iid] = keep
                else:
                    del producer.records[iid]
            if not producer.records:
                del self.producers[pid]
        return dropped
