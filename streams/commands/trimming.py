"""MAXLEN / MINID trimming: parse the options (shared by XADD and XTRIM) and turn a trim into
per-origin thresholds, so the XTrim op removes exactly the entries this region saw doomed.

Approximate trimming (`~`) follows Redis's rule of removing only whole radix-tree nodes, with the
nodes modelled as consecutive runs of `NODE_ENTRIES` entries from the head of the stream. Real Redis
nodes also close at 4096 bytes and keep deleted slots, so `~` may trim a little differently from
open-source Redis on large or fragmented streams; both only promise "at least the threshold".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from streams import errors
from streams.commands.base import eq, parse_int
from streams.crdt.entries import EntryLogs, MergedEntry
from streams.crdt.ops import OriginIds
from streams.errors import CommandError
from streams.ids import MAX_ID, MIN_ID, StreamID, XAddIdSpec, parse_id, parse_xadd_id

NODE_ENTRIES = 100
DEFAULT_APPROX_LIMIT = 100 * NODE_ENTRIES


class Strategy(Enum):
    NONE = 0
    MAXLEN = 1
    MINID = 2


@dataclass
class TrimArgs:
    strategy: Strategy = Strategy.NONE
    approx: bool = False
    maxlen: int = 0
    minid: StreamID = MIN_ID
    limit: int = 0
    nomkstream: bool = False
    xadd_id: XAddIdSpec | None = None


def parse_trim_args(args: list[bytes], start: int, *, xadd: bool) -> tuple[TrimArgs, int]:
    """Redis's streamParseAddOrTrimArgsOrReply. Returns the args and, for XADD, the ID's index.

    For XADD the ID is parsed where the options end, as Redis does, so a bad ID is reported
    before the checks that follow the option loop (LIMIT without a strategy...).
    """
    parsed = TrimArgs()
    limit_given = False
    i = start
    while i < len(args):
        more = len(args) - 1 - i
        opt = args[i]
        if xadd and opt == b"*":
            parsed.xadd_id = parse_xadd_id(opt)
            break
        if eq(opt, b"maxlen") and more:
            if parsed.strategy is not Strategy.NONE:
                raise CommandError(errors.MAXLEN_MINID_TOGETHER)
            parsed.approx = False
            nxt = args[i + 1]
            if more >= 2 and nxt in (b"~", b"="):
                parsed.approx = nxt == b"~"
                i += 1
            parsed.maxlen = parse_int(args[i + 1])
            if parsed.maxlen < 0:
                raise CommandError(errors.MAXLEN_NEGATIVE)
            i += 1
            parsed.strategy = Strategy.MAXLEN
        elif eq(opt, b"minid") and more:
            if parsed.strategy is not Strategy.NONE:
                raise CommandError(errors.MAXLEN_MINID_TOGETHER)
            parsed.approx = False
            nxt = args[i + 1]
            if more >= 2 and nxt in (b"~", b"="):
                parsed.approx = nxt == b"~"
                i += 1
            parsed.minid = parse_id(args[i + 1], 0)
            i += 1
            parsed.strategy = Strategy.MINID
        elif eq(opt, b"limit") and more:
            parsed.limit = parse_int(args[i + 1])
            if parsed.limit < 0:
                raise CommandError(errors.LIMIT_NEGATIVE)
            limit_given = True
            i += 1
        elif xadd and eq(opt, b"nomkstream"):
            parsed.nomkstream = True
        elif xadd:
            parsed.xadd_id = parse_xadd_id(opt)
            break
        else:
            raise CommandError(errors.SYNTAX)
        i += 1
    if parsed.limit and parsed.strategy is Strategy.NONE:
        raise CommandError(errors.LIMIT_WITHOUT_STRATEGY)
    if not xadd and parsed.strategy is Strategy.NONE:
        raise CommandError(errors.XTRIM_NO_STRATEGY)
    if limit_given:
        if not parsed.approx:
            raise CommandError(errors.LIMIT_WITHOUT_APPROX)
    elif parsed.approx:
        parsed.limit = DEFAULT_APPROX_LIMIT
    else:
        parsed.limit = 0
    return parsed, i


def doomed_entries(
    entries: EntryLogs, trim: TrimArgs, extra: MergedEntry | None = None
) -> list[MergedEntry]:
    """The entries a trim removes, oldest first. `extra` is an XADD's new entry, not yet applied."""
    length = entries.length + (1 if extra is not None else 0)
    if trim.strategy is Strategy.NONE or length == 0:
        return []
    ordered = _with_extra(entries, extra)
    if not trim.approx:
        if trim.strategy is Strategy.MAXLEN:
            count = max(0, length - trim.maxlen)
            return [e for _, e in zip(range(count), ordered, strict=False)]
        return [e for e in _takewhile_below(ordered, trim.minid)]
    doomed: list[MergedEntry] = []
    node: list[MergedEntry] = []
    for entry in ordered:
        node.append(entry)
        if len(node) == NODE_ENTRIES:
            if not _node_goes(trim, length - len(doomed), node):
                return doomed
            if trim.limit and len(doomed) + len(node) > trim.limit:
                return doomed
            doomed.extend(node)
            node = []
    if node and _node_goes(trim, length - len(doomed), node):
        if not (trim.limit and len(doomed) + len(node) > trim.limit):
            doomed.extend(node)
    return doomed


def _node_goes(trim: TrimArgs, remaining: int, node: list[MergedEntry]) -> bool:
    if trim.strategy is Strategy.MAXLEN:
        return remaining - len(node) >= trim.maxlen
    return node[-1][0] < trim.minid


def _takewhile_below(ordered: Iterator[MergedEntry], minid: StreamID) -> Iterator[MergedEntry]:
    for entry in ordered:
        if entry[0] >= minid:
            return
        yield entry


def _with_extra(entries: EntryLogs, extra: MergedEntry | None) -> Iterator[MergedEntry]:
    yield from entries.range(MIN_ID, MAX_ID)
    if extra is not None:
        yield extra


def thresholds(doomed: list[MergedEntry]) -> OriginIds:
    """Per-origin highest doomed ID: each origin's doomed entries are a prefix of its log."""
    top: dict[int, StreamID] = {}
    for sid, origin, _fields in doomed:
        if sid > top.get(origin, MIN_ID) or origin not in top:
            top[origin] = sid
    return tuple(sorted(top.items()))
