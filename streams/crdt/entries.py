"""A stream key's entries: one log per origin region, packed in blocks as Redis packs its nodes.

This is the seeds' "one rax per region": a region appends only to its own log and may remove from
every log. Merged views are a k-way merge ordered by (ID, origin), so entries with equal IDs
(liberal / semi-strict duplicates) appear in region-id order everywhere.

Storage. Each origin log is a list of blocks (`streams.crdt.blocks`: one block per Redis listpack
node, closed where Redis closes a node) found by their first ID (bisect over `starts`). XDEL
drops a block when its last live entry goes, a trim drops the blocks it covers whole and marks
entries in the one it cuts (which may then stay with no live entry, as in Redis). So in a single
region the blocks are Redis's nodes one for one, `~` trims exactly what Redis trims and XINFO
STREAM's radix-tree-keys / radix-tree-nodes (a `Rax` per log) agree. The dot seq (the origin's
op seq that added the entry) is what observed-remove compares with a remover's causal context.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

from streams.crdt.blocks import (
    LISTPACK_MAX_SIZE,
    Block,
    BlockError,
    PackedBlock,
    node_limits,
    packed,
    rebuilt,
    set_node_limits,
    unpacked,
)
from streams.crdt.ops import Fields
from streams.crdt.radix import Rax, rax_key
from streams.ids import MAX_ID, MIN_ID, StreamID

__all__ = [
    "BlockError",
    "DottedEntry",
    "EntryLogs",
    "MergedEntry",
    "PackedBlock",
    "node_limits",
    "set_node_limits",
]

MergedEntry = tuple[StreamID, int, Fields]
"""(id, origin, fields) as the merged views yield them."""

DottedEntry = tuple[StreamID, int, Fields]
"""(id, dot seq, fields): one origin's entry with the dot observed-remove compares."""


class OriginLog:
    """One origin's blocks, found by first ID, and the rax Redis would hold for them."""

    __slots__ = ("starts", "blocks", "live", "rax")

    def __init__(self) -> None:
        self.starts: list[StreamID] = []
        self.blocks: list[Block] = []
        self.live = 0
        self.rax = Rax()

    def _open_block(self, block: Block) -> None:
        if self.blocks:
            self.blocks[-1].seal()
        self.starts.append(block.first)
        self.blocks.append(block)
        self.rax.insert(rax_key(block.first))

    def _drop_block(self, k: int) -> None:
        block = self.blocks.pop(k)
        del self.starts[k]
        self.live -= block.live
        self.rax.remove(rax_key(block.first))

    def _replace_block(self, k: int, block: Block) -> None:
        old = self.blocks[k]
        self.live += block.live - old.live
        if old.first != block.first:
            self.rax.remove(rax_key(old.first))
            self.rax.insert(rax_key(block.first))
        self.blocks[k] = block
        self.starts[k] = block.first
        if k != len(self.blocks) - 1:
            block.seal()

    def install(self, blocks: Sequence[PackedBlock]) -> int:
        """Append packed blocks after this log's last one (a snapshot's, in ID order), as they
        are; returns the live entries they hold. The radix tree grows by inserting their first
        IDs in order, as Redis's RDB load does. Raises BlockError (the log unchanged) when a
        block is inconsistent or out of order."""
        made = [unpacked(p) for p in blocks]
        last = self.blocks[-1].last if self.blocks else None
        for block in made:
            if last is not None and block.first <= last:
                raise BlockError(f"block at {block.first} does not follow the one ending {last}")
            last = block.last
        if self.blocks and made:
            self.blocks[-1].seal()
        live = 0
        for block in made:
            self.starts.append(block.first)
            self.blocks.append(block)
            self.rax.insert(rax_key(block.first))
            live += block.live
        self.live += live
        return live

    def tail_takes(self, fields: Fields) -> bool:
        """Would the next entry go into the tail block (Redis: no new node)?"""
        if not self.blocks:
            return False
        tail = self.blocks[-1]
        max_bytes, max_entries = node_limits()
        if max_bytes == 0 or max_bytes > LISTPACK_MAX_SIZE:
            max_bytes = LISTPACK_MAX_SIZE
        if tail.lp_bytes() + sum(map(len, fields)) >= max_bytes:
            return False
        return not (max_entries and tail.slots >= max_entries)

    def locate(self, sid: StreamID) -> tuple[int, int] | None:
        """(block index, slot index) of the slot carrying this ID, deleted or not."""
        k = bisect_right(self.starts, sid) - 1
        if k < 0:
            return None
        block = self.blocks[k]
        if sid > block.last:
            return None
        ids = block.decoded()[0]
        i = bisect_left(ids, sid)
        if i < len(ids) and ids[i] == sid:
            return k, i
        return None

    def add(self, sid: StreamID, dot: int, fields: Fields) -> bool:
        """Append (or, out of order, insert) an entry; False if it replaced a live one."""
        blocks = self.blocks
        if not blocks or sid > blocks[-1].last:
            if self.tail_takes(fields):
                blocks[-1].append(sid, dot, fields)
            else:
                self._open_block(Block(sid, dot, fields))
            self.live += 1
            return True
        return self._insert(sid, dot, fields)

    def _insert(self, sid: StreamID, dot: int, fields: Fields) -> bool:
        k = max(bisect_right(self.starts, sid) - 1, 0)
        block = self.blocks[k]
        ids, dots, rows = block.decoded()
        keep = [i for i in range(block.slots) if not block.is_dead(i) and ids[i] != sid]
        new_ids = [ids[i] for i in keep]
        new_dots = [dots[i] for i in keep]
        new_rows = [rows[i] for i in keep]
        replaced = len(keep) < block.live
        at = bisect_left(new_ids, sid)
        new_ids.insert(at, sid)
        new_dots.insert(at, dot)
        new_rows.insert(at, fields)
        self._replace_block(k, rebuilt(new_ids, new_dots, new_rows))
        return not replaced

    def kill(self, k: int, i: int) -> None:
        self.blocks[k].kill(i)
        self.live -= 1

    def top(self) -> StreamID | None:
        for block in reversed(self.blocks):
            if block.live:
                if not block.is_dead(block.slots - 1):
                    return block.last
                i = block.last_live()
                assert i is not None
                return block.decoded()[0][i]
        return None

    def entries(
        self, start: StreamID, end: StreamID, *, after: bool = False
    ) -> Iterator[DottedEntry]:
        """Live (id, dot, fields) with start <= id <= end (start < id when `after`)."""
        starts, blocks = self.starts, self.blocks
        k = max(bisect_right(starts, start) - 1, 0)
        while k < len(blocks):
            block = blocks[k]
            k += 1
            if block.first > end:
                return
            if not block.live or block.last < start:
                continue
            ids, dots, fields = block.decoded()
            i = 0
            if block.first <= start:
                i = bisect_right(ids, start) if after else bisect_left(ids, start)
            dead = block.dead
            n = len(ids)
            while i < n:
                sid = ids[i]
                if sid > end:
                    return
                if not (dead and dead >> i & 1):
                    yield sid, dots[i], fields[i]
                i += 1

    def entries_reversed(self, start: StreamID, end: StreamID) -> Iterator[DottedEntry]:
        """Live entries with start <= id <= end, highest first."""
        starts, blocks = self.starts, self.blocks
        k = bisect_right(starts, end) - 1
        while k >= 0:
            block = blocks[k]
            k -= 1
            if block.last < start:
                return
            if not block.live:
                continue
            ids, dots, fields = block.decoded()
            i = bisect_right(ids, end) - 1
            dead = block.dead
            while i >= 0:
                sid = ids[i]
                if sid < start:
                    return
                if not (dead and dead >> i & 1):
                    yield sid, dots[i], fields[i]
                i -= 1


class EntryLogs:
    """The entries of one key, per origin."""

    __slots__ = ("logs", "length")

    def __init__(self) -> None:
        self.logs: dict[int, OriginLog] = {}
        self.length = 0

    # --- writing ---------------------------------------------------------------------------------

    def add(self, origin: int, dot_seq: int, sid: StreamID, fields: Fields) -> None:
        log = self.logs.get(origin)
        if log is None:
            log = self.logs[origin] = OriginLog()
        if log.add(sid, dot_seq, fields):
            self.length += 1

    def remove_observed(self, origin: int, sid: StreamID, covered: int) -> bool:
        """XDEL one entry if the remover observed it (its dot seq <= covered). Like Redis, a
        block whose last live entry goes is dropped."""
        log = self.logs.get(origin)
        if log is None:
            return False
        found = log.locate(sid)
        if found is None:
            return False
        k, i = found
        block = log.blocks[k]
        if block.is_dead(i) or block.decoded()[1][i] > covered:
            return False
        log.kill(k, i)
        self.length -= 1
        if not block.live:
            log._drop_block(k)
            if not log.blocks:
                del self.logs[origin]
        return True

    def remove_all_observed(self, ctx_of: dict[int, int]) -> list[StreamID]:
        """Observed-remove every entry whose dot the context covers (DEL); returns removed IDs.
        Blocks left without a live entry go (a DEL in one region leaves no stream at all)."""
        removed: list[StreamID] = []
        for origin in list(self.logs):
            covered = ctx_of.get(origin, 0)
            log = self.logs[origin]
            k = 0
            while k < len(log.blocks):
                block = log.blocks[k]
                ids, dots, _fields = block.decoded()
                for i in list(block.live_slots()):
                    if dots[i] <= covered:
                        log.kill(k, i)
                        removed.append(ids[i])
                if block.live:
                    k += 1
                else:
                    log._drop_block(k)
            if not log.blocks:
                del self.logs[origin]
        self.length -= len(removed)
        return removed

    def trim_observed(self, origin: int, threshold: StreamID, covered: int) -> int:
        """Trim one origin up to `threshold`: a block whose last slot is <= threshold goes whole
        (when every live entry in it was observed); in the block the threshold cuts, observed
        entries <= threshold are marked deleted and the block stays (Redis's streamTrim)."""
        log = self.logs.get(origin)
        if log is None:
            return 0
        removed = 0
        k = 0
        while k < len(log.blocks):
            block = log.blocks[k]
            if block.first > threshold:
                break
            ids, dots, _fields = block.decoded()
            hit = [i for i in block.live_slots() if ids[i] <= threshold and dots[i] <= covered]
            if block.last <= threshold and len(hit) == block.live:
                removed += block.live
                log._drop_block(k)
                continue
            for i in hit:
                log.kill(k, i)
            removed += len(hit)
            k += 1
        self.length -= removed
        if not log.blocks:
            del self.logs[origin]
        return removed

    # --- reading ---------------------------------------------------------------------------------

    def origins(self) -> list[int]:
        """Origins holding at least one block, ascending."""
        return sorted(self.logs)

    def origin_entries(self, origin: int) -> Iterator[DottedEntry]:
        """One origin's live entries as (id, dot seq, fields), in ID order (snapshots)."""
        log = self.logs.get(origin)
        return iter(()) if log is None else log.entries(MIN_ID, MAX_ID)

    def last_at_or_below(
        self, origin: int, bound: StreamID, *, strict: bool = False
    ) -> StreamID | None:
        """The highest live ID of one origin that is <= bound (< bound when `strict`)."""
        log = self.logs.get(origin)
        if log is None:
            return None
        for sid, _dot, _fields in log.entries_reversed(MIN_ID, bound):
            if not (strict and sid == bound):
                return sid
        return None

    def get(self, origin: int, sid: StreamID) -> Fields | None:
        log = self.logs.get(origin)
        if log is None:
            return None
        found = log.locate(sid)
        if found is None:
            return None
        block = log.blocks[found[0]]
        return None if block.is_dead(found[1]) else block.decoded()[2][found[1]]

    def _live_in(self, log: OriginLog, sid: StreamID) -> bool:
        found = log.locate(sid)
        return found is not None and not log.blocks[found[0]].is_dead(found[1])

    def has(self, sid: StreamID) -> bool:
        return any(self._live_in(log, sid) for log in self.logs.values())

    def origins_with(self, sid: StreamID) -> list[int]:
        return sorted(o for o, log in self.logs.items() if self._live_in(log, sid))

    def first(self) -> MergedEntry | None:
        return next(self.range(MIN_ID, MAX_ID), None)

    def last(self) -> MergedEntry | None:
        return next(self.range(MIN_ID, MAX_ID, reverse=True), None)

    def max_id(self) -> StreamID | None:
        tops = [t for t in (log.top() for log in self.logs.values()) if t is not None]
        return max(tops) if tops else None

    def origin_top(self, origin: int) -> StreamID | None:
        log = self.logs.get(origin)
        return None if log is None else log.top()

    def range(
        self, start: StreamID, end: StreamID, *, reverse: bool = False
    ) -> Iterator[MergedEntry]:
        """Entries with start <= id <= end in merged order (descending when reverse)."""
        if start > end:
            return iter(())
        iters = [
            _merged(origin, _span(log, start, end, reverse))
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
            _merged(origin, log.entries(cursors.get(origin, default), MAX_ID, after=True))
            for origin, log in sorted(self.logs.items())
        ]
        if len(iters) == 1:
            return iters[0]
        return heapq.merge(*iters)

    # --- nodes -----------------------------------------------------------------------------------

    def packed_blocks(self, origin: int) -> list[PackedBlock]:
        """One origin's blocks as a snapshot stores them, in ID order (the state unchanged)."""
        log = self.logs.get(origin)
        return [] if log is None else [packed(block) for block in log.blocks]

    def install_blocks(self, origin: int, blocks: Sequence[PackedBlock]) -> int:
        """Append one origin's packed blocks (a snapshot's, possibly in several calls) after its
        last block; returns the live entries added. Raises BlockError, changing nothing, for a
        block that is inconsistent or not after the ones before it."""
        log = self.logs.get(origin)
        fresh = log is None
        if log is None:
            log = OriginLog()
        live = log.install(blocks)
        if fresh and log.blocks:
            self.logs[origin] = log
        self.length += live
        return live

    def blocks(self, origin: int) -> Sequence[Block]:
        """One origin's blocks in ID order (read-only: trimming plans whole-node removal)."""
        log = self.logs.get(origin)
        return () if log is None else log.blocks

    def tail_takes(self, origin: int, fields: Fields) -> bool:
        """Would an entry with these fields, appended to this origin, join its tail block?"""
        log = self.logs.get(origin)
        return log is not None and log.tail_takes(fields)

    def block_end(self, origin: int, sid: StreamID) -> StreamID | None:
        """The last slot ID of the block holding `sid` if no live entry follows it there."""
        log = self.logs.get(origin)
        found = None if log is None else log.locate(sid)
        if log is None or found is None:
            return None
        block = log.blocks[found[0]]
        return block.last if block.last_live() == found[1] else None

    def radix_tree(self) -> tuple[int, int]:
        """XINFO STREAM's (radix-tree-keys, radix-tree-nodes). One origin: Redis's numbers.
        Several: every origin's tree counted, as if they hung under one head node."""
        keys = sum(log.rax.numele for log in self.logs.values())
        nodes = 1 + sum(log.rax.numnodes - 1 for log in self.logs.values())
        return keys, nodes


def _span(log: OriginLog, start: StreamID, end: StreamID, reverse: bool) -> Iterator[DottedEntry]:
    return log.entries_reversed(start, end) if reverse else log.entries(start, end)


def _merged(origin: int, dotted: Iterator[DottedEntry]) -> Iterator[MergedEntry]:
    for sid, _dot, fields in dotted:
        yield sid, origin, fields
