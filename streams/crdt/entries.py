"""A stream key's entries: one log per origin region, merged views in ID order.

This is the seeds' "one rax per region": a region appends only to its own log and may remove from
every log. Each log is a SortedDict ID -> (dot seq, fields); the dot seq is what observed-remove
compares with a remover's causal context. Merged views are a k-way merge ordered by (ID, origin), so
entries with equal IDs (liberal / semi-strict duplicates) appear in region-id order everywhere.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from sortedcontainers import SortedDict

from streams.crdt.ops import Fields
from streams.ids import MAX_ID, MIN_ID, StreamID

MergedEntry = tuple[StreamID, int, Fields]
"""(id, origin, fields) as the merged views yield them."""


class EntryLogs:
    """The entries of one key, per origin."""

    __slots__ = ("logs", "length")

    def __init__(self) -> None:
        self.logs: dict[int, SortedDict] = {}
        self.length = 0

    def add(self, origin: int, dot_seq: int, sid: StreamID, fields: Fields) -> None:
        log = self.logs.get(origin)
        if log is None:
            log = self.logs[origin] = SortedDict()
        if sid not in log:
            self.length += 1
        log[sid] = (dot_seq, fields)

    def get(self, origin: int, sid: StreamID) -> Fields | None:
        log = self.logs.get(origin)
        if log is None:
            return None
        item = log.get(sid)
        return None if item is None else item[1]

    def has(self, sid: StreamID) -> bool:
        return any(sid in log for log in self.logs.values())

    def origins_with(self, sid: StreamID) -> list[int]:
        return sorted(o for o, log in self.logs.items() if sid in log)

    def remove_observed(self, origin: int, sid: StreamID, covered: int) -> bool:
        """Remove one entry if the remover observed it (its dot seq <= covered)."""
        log = self.logs.get(origin)
        if log is None:
            return False
        item = log.get(sid)
        if item is None or item[0] > covered:
            return False
        del log[sid]
        self.length -= 1
        if not log:
            del self.logs[origin]
        return True

    def remove_all_observed(self, ctx_of: dict[int, int]) -> list[StreamID]:
        """Observed-remove every entry whose dot the context covers; returns removed IDs."""
        removed: list[StreamID] = []
        for origin in list(self.logs):
            covered = ctx_of.get(origin, 0)
            log = self.logs[origin]
            doomed = [sid for sid, (seq, _f) in log.items() if seq <= covered]
            for sid in doomed:
                del log[sid]
            removed.extend(doomed)
            self.length -= len(doomed)
            if not log:
                del self.logs[origin]
        return removed

    def trim_observed(self, origin: int, threshold: StreamID, covered: int) -> int:
        """Remove observed entries of one origin with ID <= threshold."""
        log = self.logs.get(origin)
        if log is None:
            return 0
        doomed = [
            sid
            for sid in log.irange(maximum=threshold)
            if log[sid][0] <= covered
        ]
        for sid in doomed:
            del log[sid]
        self.length -= len(doomed)
        if not log:
            del self.logs[origin]
        return len(doomed)

    def first(self) -> MergedEntry | None:
        return next(self.range(MIN_ID, MAX_ID), None)

    def last(self) -> MergedEntry | None:
        return next(self.range(MIN_ID, MAX_ID, reverse=True), None)

    def max_id(self) -> StreamID | None:
        tops = [log.peekitem(-1)[0] for log in self.logs.values()]
        return max(tops) if tops else None

    def origin_top(self, origin: int) -> StreamID | None:
        log = self.logs.get(origin)
        return log.peekitem(-1)[0] if log else None

    def range(
        self, start: StreamID, end: StreamID, *, reverse: bool = False
    ) -> Iterator[MergedEntry]:
        """Entries with start <= id <= end in merged order (descending when reverse)."""
        if start > end:
            return iter(())
        iters = [
            self._origin_range(origin, log, start, end, reverse)
            for origin, log in sorted(self.logs.items())
        ]
        if len(iters) == 1:
            return iters[0]
        return heapq.merge(*iters, reverse=reverse)

    def after_cursors(
        self, cursors: dict[int, StreamID], default: StreamID
    ) -> Iterator[MergedEntry]:
        """Entries strictly above each origin's cursor, in merged order: how `>` never skips."""
        iters = [
            self._origin_after(origin, log, cursors.get(origin, default))
            for origin, log in sorted(self.logs.items())
        ]
        if len(iters) == 1:
            return iters[0]
        return heapq.merge(*iters)

    @staticmethod
    def _origin_after(origin: int, log: SortedDict, cursor: StreamID) -> Iterator[MergedEntry]:
        for sid in log.irange(minimum=cursor, inclusive=(False, True)):
            yield (sid, origin, log[sid][1])

    @staticmethod
    def _origin_range(
        origin: int, log: SortedDict, start: StreamID, end: StreamID, reverse: bool
    ) -> Iterator[MergedEntry]:
        for sid in log.irange(start, end, reverse=reverse):
            yield (sid, origin, log[sid][1])
