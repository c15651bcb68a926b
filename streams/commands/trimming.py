"""MAXLEN / MINID trimming: parse the options (shared by XADD and XTRIM) and plan a trim as
per-origin thresholds, so the XTrim op removes exactly the entries this region saw doomed.

Plans follow Redis 7.0's streamTrim over the entry blocks, which are Redis's listpack nodes
(`streams.crdt.entries`):
- approximate (`~`) removes only whole nodes from the head, stopping at the first node it cannot
  remove (MAXLEN: removing it would leave fewer than the threshold; MINID: its last slot, deleted
  or not, is not below the threshold) or that would pass LIMIT;
- exact removes the head nodes it covers whole and marks the first entries of the next node
  deleted (the node keeps their slots).
A threshold is therefore the last slot of the last node removed whole when a trim ends on a node
boundary (so apply removes that node, deleted slots and all), the last doomed entry when it cuts
a node, and the ID just below MINID for exact MINID (nodes wholly below it go, as in Redis).

With several origins each origin log has its own nodes: `~` walks the nodes of all origins in
order of their first ID and stops at the first one it cannot remove, so it removes whole nodes of
each origin's log, never an entry the exact trim would keep.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from enum import Enum

from streams import errors
from streams.commands.base import eq, parse_int
from streams.crdt.entries import EntryLogs, MergedEntry, node_limits
from streams.crdt.ops import OriginIds
from streams.errors import CommandError
from streams.ids import (
    MAX_ID,
    MIN_ID,
    U64_MAX,
    StreamID,
    XAddIdKind,
    XAddIdSpec,
    parse_id,
    parse_xadd_id,
)


def default_approx_limit() -> int:
    """Redis: LIMIT for `~` without LIMIT is 100 nodes' worth, 10000 if that is 0 or > 1e6."""
    limit = 100 * node_limits()[1]
    return 10_000 if limit <= 0 or limit > 1_000_000 else limit


class Strategy(Enum):
    NONE = 0
    MAXLEN = 1
    MINID = 2


class RefPolicy(Enum):
    """What a delete does to the consumer groups' references (Redis 8.2: XADD, XTRIM, XDELEX,
    XACKDEL): KEEPREF (the default) leaves the PELs as they are, DELREF removes the deleted
    entries from every PEL, ACKED deletes only entries every group has delivered and
    acknowledged (`streams.commands.refs`)."""

    KEEPREF = b"keepref"
    DELREF = b"delref"
    ACKED = b"acked"


def ref_policy(raw: bytes) -> RefPolicy | None:
    """The policy a word names (any case), else None."""
    word = raw.lower()
    for policy in RefPolicy:
        if word == policy.value:
            return policy
    return None


class TrimArgs:
    """What XADD / XTRIM options said, filled in as they are parsed. A plain class, not a
    dataclass: one is made per XADD, and the dataclass module's `__init__` stays Python code
    in the compiled core (1.2 % of a node at pipeline 16)."""

    def __init__(self) -> None:
        self.strategy = Strategy.NONE
        self.approx = False
        self.maxlen = 0
        self.minid: StreamID = MIN_ID
        self.limit = 0
        self.nomkstream = False
        self.xadd_id: XAddIdSpec | None = None
        self.refs = RefPolicy.KEEPREF
        self.idmp_pid: bytes | None = None
        """XADD IDMP / IDMPAUTO's producer ID (None: neither)."""
        self.idmp_iid: bytes | None = None
        """IDMP's idempotent ID; None with a producer ID: IDMPAUTO (the fields make it)."""


def parse_trim_args(args: list[bytes], start: int, *, xadd: bool) -> tuple[TrimArgs, int]:
    """Redis's streamParseAddOrTrimArgsOrReply (8.6: with KEEPREF | DELREF | ACKED, and for XADD
    IDMP / IDMPAUTO). Returns the args and, for XADD, the ID's index.

    XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [IDMPAUTO pid | IDMP pid iid]
         [<MAXLEN | MINID> [= | ~] threshold [LIMIT count]] <* | id> field value [...]
    XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]
    (options in any order; a second policy word is read as XADD's ID, or is XTRIM's syntax
    error, as in Redis).

    For XADD the ID is parsed where the options end, as Redis does, so a bad ID is reported
    before the checks that follow the option loop (LIMIT without a strategy...).
    """
    parsed = TrimArgs()
    limit_given = refs_given = False
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
        elif not refs_given and (policy := ref_policy(opt)) is not None:
            parsed.refs, refs_given = policy, True
        elif xadd and eq(opt, b"idmpauto") and more:
            _idmp_once(parsed, args[i + 1], None)
            i += 1
        elif xadd and eq(opt, b"idmp") and more >= 2:
            _idmp_once(parsed, args[i + 1], args[i + 2])
            i += 2
        elif xadd:
            parsed.xadd_id = parse_xadd_id(opt)
            if parsed.idmp_pid is not None and parsed.xadd_id.kind is not XAddIdKind.AUTO:
                raise CommandError(errors.IDMP_WITH_EXPLICIT_ID)
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
        parsed.limit = default_approx_limit()
    else:
        parsed.limit = 0
    return parsed, i


def _idmp_once(parsed: TrimArgs, pid: bytes, iid: bytes | None) -> None:
    """IDMP pid iid / IDMPAUTO pid, at most once, with Redis's checks in its order."""
    if parsed.idmp_pid is not None:
        raise CommandError(errors.IDMP_TWICE)
    if not pid:
        raise CommandError(errors.IDMPAUTO_EMPTY_PID if iid is None else errors.IDMP_EMPTY_PID)
    if iid is not None and not iid:
        raise CommandError(errors.IDMP_EMPTY_IID)
    parsed.idmp_pid, parsed.idmp_iid = pid, iid


class TrimPlan:
    """What a trim removes: how many live entries (the reply) and the per-origin thresholds
    (the XTrim op). True when it changes anything, which may be only dropping empty nodes."""

    __slots__ = ("count", "thresholds")

    def __init__(self, count: int, thresholds: OriginIds) -> None:
        self.count = count
        self.thresholds = thresholds

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return bool(self.thresholds)


NodeView = tuple[StreamID, int, StreamID, int]
"""(first ID, origin, last slot ID, live entries) of one node."""


def doomed_entries(
    entries: EntryLogs, trim: TrimArgs, extra: MergedEntry | None = None
) -> TrimPlan:
    """Plan a trim. `extra` is an XADD's new entry, not yet applied (Redis appends, then trims)."""
    length = entries.length + (1 if extra is not None else 0)
    if trim.strategy is Strategy.NONE:
        return TrimPlan(0, ())
    if trim.approx:
        return _approx(_node_views(entries, extra), trim, length)
    if trim.strategy is Strategy.MAXLEN:
        return _exact_maxlen(entries, trim, length, extra)
    return _exact_minid(entries, trim, extra)


def _node_views(entries: EntryLogs, extra: MergedEntry | None) -> Iterator[NodeView]:
    """Every origin's nodes, merged by first ID, with the XADD's entry where Redis puts it."""
    per_origin: list[list[NodeView]] = []
    origins = set(entries.origins())
    if extra is not None:
        origins.add(extra[1])
    for origin in sorted(origins):
        views = [(b.first, origin, b.last, b.live) for b in entries.blocks(origin)]
        if extra is not None and extra[1] == origin:
            sid = extra[0]
            if entries.tail_takes(origin, extra[2]):
                first, _o, _last, live = views[-1]
                views[-1] = (first, origin, sid, live + 1)
            else:
                views.append((sid, origin, sid, 1))
        per_origin.append(views)
    return heapq.merge(*per_origin)


def _approx(nodes: Iterator[NodeView], trim: TrimArgs, length: int) -> TrimPlan:
    removed: dict[int, StreamID] = {}
    deleted = 0
    for _first, origin, last, live in nodes:
        if trim.strategy is Strategy.MAXLEN and length <= trim.maxlen:
            break
        if trim.limit and deleted + live > trim.limit:
            break
        if trim.strategy is Strategy.MAXLEN:
            goes = length - live >= trim.maxlen
        else:
            goes = last < trim.minid
        if not goes:
            break
        removed[origin] = last
        deleted += live
        length -= live
    return TrimPlan(deleted, tuple(sorted(removed.items())))


def _exact_maxlen(
    entries: EntryLogs, trim: TrimArgs, length: int, extra: MergedEntry | None
) -> TrimPlan:
    count = max(0, length - trim.maxlen)
    if not count:
        return TrimPlan(0, ())
    top: dict[int, StreamID] = {}
    for sid, origin, _fields in _take(_with_extra(entries, extra), count):
        top[origin] = sid
    for origin, sid in top.items():
        if extra is not None and (sid, origin) == (extra[0], extra[1]):
            continue  # the new entry is the last slot of its node
        end = entries.block_end(origin, sid)
        if end is not None:
            top[origin] = end  # every live entry of that node goes: the node goes whole
    return TrimPlan(count, tuple(sorted(top.items())))


def _exact_minid(entries: EntryLogs, trim: TrimArgs, extra: MergedEntry | None) -> TrimPlan:
    below = _below(trim.minid)
    if below is None:
        return TrimPlan(0, ())
    counts: dict[int, int] = {}
    for _sid, origin, _fields in entries.range(MIN_ID, below):
        counts[origin] = counts.get(origin, 0) + 1
    if extra is not None and extra[0] <= below:
        counts[extra[1]] = counts.get(extra[1], 0) + 1
    touched = {
        origin
        for origin in entries.origins()
        if any(b.last <= below for b in entries.blocks(origin)[:1])
    }
    touched.update(counts)
    return TrimPlan(sum(counts.values()), tuple((o, below) for o in sorted(touched)))


def _below(sid: StreamID) -> StreamID | None:
    """The highest ID strictly below `sid`."""
    ms, seq = sid
    if seq:
        return ms, seq - 1
    if ms:
        return ms - 1, U64_MAX
    return None


def _take(ordered: Iterator[MergedEntry], count: int) -> Iterator[MergedEntry]:
    for _, entry in zip(range(count), ordered, strict=False):
        yield entry


def _with_extra(entries: EntryLogs, extra: MergedEntry | None) -> Iterator[MergedEntry]:
    yield from entries.range(MIN_ID, MAX_ID)
    if extra is not None:
        yield extra


def thresholds(plan: TrimPlan) -> OriginIds:
    """The XTrim op's per-origin thresholds."""
    return plan.thresholds
