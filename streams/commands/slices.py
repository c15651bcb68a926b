"""Large range replies produced in slices, so one XRANGE over a million entries does not hold the
event loop (and every other client of the node) for seconds.

How: when the request pipeline asks for it (`SLICING`, set by `streams.node.pipeline.dispatch`
around a command it runs on its own, never inside EXEC or elsewhere), XRANGE / XREVRANGE over a long
stream answer a `SlicedRange` instead of the entries: the range *frozen* now, and produced
later, `SLICE_ENTRIES` entries at a time with a turn of the event loop between slices, straight
to RESP bytes (`Encoded`: the same bytes in RESP2 and RESP3, as arrays of bulk strings are).

Why the reply stays a consistent snapshot although writes run between slices: `freeze` runs
while the command runs (nothing else does) and keeps, per origin, the blocks the range covers as
their immutable parts: a sealed block's payload bytes, copies of an open block's lists, and the
deleted-slot mask as it is now (an int: XDEL makes a new one). Later writes append to, reopen,
replace or drop the live blocks, never these parts, so the entries produced are exactly the
range at the moment the command ran, as if it had been answered at once. Freezing costs one
small tuple per block (a block holds up to 100 entries by default), decoding and encoding are
what the slices spread out.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from itertools import islice

from streams.crdt.blocks import _decode
from streams.crdt.entries import EntryLogs, MergedEntry, OriginLog
from streams.crdt.ops import Fields
from streams.ids import StreamID
from streams.reply import Reply
from streams.resp.encode import Encoded

SLICING: ContextVar[bool] = ContextVar("slicing", default=False)
"""Whether the caller produces a `SlicedRange` (the request pipeline); elsewhere (EXEC, replay,
the pure executor) ranges are answered at once, as lists."""
MIN_SLICED = 10_000
"""Ranges over streams shorter than this (or with a COUNT up to it) are answered at once."""
SLICE_ENTRIES = 2_000
"""Entries decoded and encoded per turn of the event loop (3-7 ms here)."""

Frozen = tuple[int, bytes | None, tuple[Sequence[StreamID], Sequence[Fields]] | None]
"""One block as frozen: (deleted-slot mask, sealed payload, or an open block's ids and rows)."""


class SlicedRange(list[Reply]):
    """A range reply to be produced in slices (`step`, then `result`). As a list it is empty:
    only the request pipeline, which asked for it (`SLICING`), ever receives one."""

    def __init__(self, entries: Iterator[MergedEntry], limit: int) -> None:
        super().__init__()
        self._entries = entries
        self._left = limit  # -1: no COUNT
        self._chunks: list[bytes] = []
        self._count = 0
        self.done = False

    def step(self, budget: int = SLICE_ENTRIES) -> bool:
        """Produce up to `budget` more entries; True once the reply is complete."""
        if self._left >= 0:
            budget = min(budget, self._left)
        piece: list[bytes] = []  # joined per slice: one join of a million pieces took 200 ms
        produced = 0
        for sid, _origin, fields in islice(self._entries, budget):
            idb = b"%d-%d" % sid
            piece.append(b"*2\r\n$%d\r\n%s\r\n*%d\r\n" % (len(idb), idb, len(fields)))
            piece.append(b"".join([b"$%d\r\n%s\r\n" % (len(f), f) for f in fields]))
            produced += 1
        self._chunks.append(b"".join(piece))
        self._count += produced
        if self._left >= 0:
            self._left -= produced
        if produced < budget or self._left == 0:
            self.done = True
        return self.done

    def result(self) -> Encoded:
        """The whole reply in RESP (once `step` said it is complete)."""
        while not self.done:
            self.step()
        return Encoded(b"".join([b"*%d\r\n" % self._count, *self._chunks]))


def sliced_range(
    entries: EntryLogs, start: StreamID, end: StreamID, reverse: bool, limit: int
) -> SlicedRange:
    """The range [start, end] (descending when `reverse`), frozen now, at most `limit` entries
    (-1: all)."""
    iters = [
        _walk(origin, freeze(log, start, end), start, end, reverse)
        for origin, log in sorted(entries.logs.items())
    ]
    merged = iters[0] if len(iters) == 1 else heapq.merge(*iters, reverse=reverse)
    return SlicedRange(merged, limit)


def freeze(log: OriginLog, start: StreamID, end: StreamID) -> list[Frozen]:
    """The immutable parts of the blocks of `log` that may hold IDs in [start, end]."""
    starts = log.starts
    lo = max(bisect_right(starts, start) - 1, 0)
    hi = bisect_right(starts, end)
    out: list[Frozen] = []
    for block in log.blocks[lo:hi]:
        if not block.live or block.last < start:
            continue
        if block.open is not None:
            ids, _dots, rows, _names = block.open
            out.append((block.dead, None, (tuple(ids), tuple(rows))))
        else:
            out.append((block.dead, block.payload, None))
    return out


def _walk(
    origin: int, frozen: list[Frozen], start: StreamID, end: StreamID, reverse: bool
) -> Iterator[MergedEntry]:
    for dead, payload, opened in reversed(frozen) if reverse else frozen:
        if payload is not None:
            ids, _dots, rows = _decode(payload)
        else:
            assert opened is not None
            ids, rows = opened
        n = len(ids)
        for i in range(n - 1, -1, -1) if reverse else range(n):
            if dead and dead >> i & 1:
                continue
            sid = ids[i]
            if start <= sid <= end:
                yield sid, origin, rows[i]
