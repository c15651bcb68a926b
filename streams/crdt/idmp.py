"""Idempotent production (XADD IDMP / IDMPAUTO, XCFGSET): a stream's record of which entry each
producer's idempotent ID (IID) made, replicated so that deduplication holds across regions.

Redis keeps, per stream and producer, the last IDMP-MAXSIZE IIDs added within IDMP-DURATION
seconds; a retry naming one of them gets the first entry's ID back and adds nothing. Here every
record is a replicated op (`ops.Idmp`, issued with the XAdd it names), so once the regions have
synced, a retry sent to another region after a failover finds the record there too.

Concurrent records of one (pid, iid): two regions may both accept the same IID before either
has seen the other's record. Every region resolves the pair the same way whatever the order in
which it applies them: the record that names the entry lowest in (ID, origin) order is kept and
the other record's entry is removed from the stream, so every region ends with exactly one
entry. Whether two records are concurrent is decided with dots, never with time: a record whose
issuer had applied the existing one (its op observed the existing record's dot) replaces it
(the issuer found it gone from its window, or its history cleared by XCFGSET, and added anew).

The window. A record counts for a lookup while it is among the producer's newest `maxsize`
records and younger than `duration` seconds by the looking region's clock against the record's
origin time (`alive`). Records that fell out of the window stay until they are causally stable
(`collect`, with the tombstones): dropped earlier, a region could miss a concurrent duplicate of
one and keep both entries where the others keep one. Which records are "newest" is this region's
apply order, so the window's edge may differ for a moment between regions; the entries do not.

The window's settings replicate with the stream (`ops.StreamConfig`: a setting made after
another replaces it, of concurrent ones the later by (time, origin, seq) wins); a stream that
never had them uses this node's CONFIG `stream-idmp-duration` / `stream-idmp-maxsize`
(`defaults`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from mypy_extensions import mypyc_attr

from streams.crdt.ops import Fields
from streams.ids import StreamID

Dot = tuple[int, int]

DEFAULT_DURATION_S = 100
DEFAULT_MAXSIZE = 100
DURATION_RANGE = (1, 86_400)
MAXSIZE_RANGE = (1, 10_000)

_defaults = [DEFAULT_DURATION_S, DEFAULT_MAXSIZE]


def set_defaults(duration_s: int, maxsize: int) -> None:
    """The node's CONFIG stream-idmp-duration / stream-idmp-maxsize (`streams.node.settings`),
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


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class IdmpRecord:
    """One IID's entry (origin, id), the record op's dot and origin time, and its place in its
    producer's order (`pos`)."""

    __slots__ = ("origin", "id", "dot", "ts_ms", "pos")

    def __init__(self, origin: int, sid: StreamID, dot: Dot, ts_ms: int, pos: int) -> None:
        self.origin = origin
        self.id = sid
        self.dot = dot
        self.ts_ms = ts_ms
        self.pos = pos

    def entry(self) -> tuple[StreamID, int]:
        return self.id, self.origin


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class IdmpProducer:
    """One producer's records by IID, and how many it was given (`count`, their positions)."""

    __slots__ = ("records", "count")

    def __init__(self) -> None:
        self.records: dict[bytes, IdmpRecord] = {}
        self.count = 0


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
        for pid, producer in self.producers.items():
            clone = twin.producers[pid] = IdmpProducer()
            clone.count = producer.count
            for iid, r in producer.records.items():
                clone.records[iid] = IdmpRecord(r.origin, r.id, r.dot, r.ts_ms, r.pos)
        return twin

    def window(self) -> tuple[int, int]:
        """(duration in seconds, maxsize) in effect."""
        return self.config if self.config is not None else defaults()

    # --- reading ---------------------------------------------------------------------------

    def alive(self, producer: IdmpProducer, record: IdmpRecord, now_ms: int) -> bool:
        duration_s, maxsize = self.window()
        return record.pos > producer.count - maxsize and now_ms - record.ts_ms < duration_s * 1000

    def lookup(self, pid: bytes, iid: bytes, now_ms: int) -> IdmpRecord | None:
        """The record a retry finds (None: add the entry)."""
        producer = self.producers.get(pid)
        record = None if producer is None else producer.records.get(iid)
        if producer is None or record is None or not self.alive(producer, record, now_ms):
            return None
        return record

    def tracked(self, now_ms: int) -> tuple[int, int]:
        """XINFO STREAM's (pids-tracked, iids-tracked): producers with a record in the window,
        and those records."""
        pids = iids = 0
        for producer in self.producers.values():
            live = sum(1 for r in producer.records.values() if self.alive(producer, r, now_ms))
            pids += 1 if live else 0
            iids += live
        return pids, iids

    def records(self) -> Iterator[tuple[bytes, bytes, IdmpRecord]]:
        """Every record as (pid, iid, record), producers in byte order, records in their order
        (snapshots)."""
        for pid in sorted(self.producers):
            for iid, record in self.producers[pid].records.items():
                yield pid, iid, record

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
    ) -> tuple[StreamID, int] | None:
        """Apply a record op; returns the entry (id, origin) that lost to a concurrent record
        of the same IID (the caller removes it from the stream), else None."""
        self.added += 1
        producer = self.producers.get(pid)
        if producer is None:
            producer = self.producers[pid] = IdmpProducer()
        existing = producer.records.get(iid)
        if existing is not None and observed.get(existing.dot[0], 0) < existing.dot[1]:
            # Concurrent: keep the entry lowest in (ID, origin), wherever it was recorded.
            if existing.entry() <= (sid, origin):
                return sid, origin
            loser = existing.entry()
            existing.origin, existing.id, existing.dot, existing.ts_ms = origin, sid, dot, ts_ms
            return loser
        if existing is not None:
            del producer.records[iid]
        producer.count += 1
        producer.records[iid] = IdmpRecord(origin, sid, dot, ts_ms, producer.count)
        return None

    def clear_observed(self, observed: dict[int, int]) -> None:
        """XCFGSET changed the window: forget the records the issuer had applied (a concurrent
        record survives, as a concurrent XADD survives DEL)."""
        for pid in list(self.producers):
            producer = self.producers[pid]
            producer.records = {
                iid: r
                for iid, r in producer.records.items()
                if observed.get(r.dot[0], 0) < r.dot[1]
            }
            if not producer.records:
                del self.producers[pid]

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
        """Drop the records out of the window that every region has applied; returns how many.
        "Out of the window" by count, and by time against the producer's newest record (the
        state reads no clock): a stable record can no longer meet a concurrent duplicate."""
        dropped = 0
        duration_s, maxsize = self.window()
        for pid in list(self.producers):
            producer = self.producers[pid]
            newest = max((r.ts_ms for r in producer.records.values()), default=0)
            keep: dict[bytes, IdmpRecord] = {}
            for iid, r in producer.records.items():
                gone = r.pos <= producer.count - maxsize or newest - r.ts_ms >= duration_s * 1000
                if gone and stable.get(r.dot[0], 0) >= r.dot[1]:
                    dropped += 1
                else:
                    keep[iid] = r
            producer.records = keep
            if not keep:
                del self.producers[pid]
        return dropped
