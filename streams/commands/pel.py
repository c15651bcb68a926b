"""Commands over a group's pending entries list: XPENDING (inspect), XCLAIM and XAUTOCLAIM (move
ownership). All of it is local to the region (seed 000: another region shows no pending).

Redis 7.0 rules kept here: a claim sets the delivery time (now, or IDLE / TIME clamped to
[0, now]) and counts one more delivery unless JUSTID (RETRYCOUNT overrides; a negative one is
ignored, as Redis keeps -1 for "not given"); FORCE puts a live entry that is not pending into the
PEL (counting its delivery from 1, so it shows 2); a pending entry whose stream entry was deleted
is dropped from the PEL (XAUTOCLAIM lists it in its third reply element). Times come from
`ctx.now_ms`; the Claim op carries every value it needs.
"""

from __future__ import annotations

from streams import errors
from streams.commands.base import Command, Context, Result, command, entry_reply, eq, parse_int
from streams.commands.groupview import (
    entry_fields,
    find_group,
    pel_keys_between,
    refs_with_id,
)
from streams.crdt import ops
from streams.crdt.groups import Group, PelKey, pel_key, pel_ref
from streams.crdt.ops import EntryRef
from streams.crdt.state import KeyState
from streams.errors import CommandError
from streams.ids import MIN_ID, StreamID, format_id, parse_id, parse_range_end, parse_range_start
from streams.reply import NULL_ARRAY, Reply

_XAUTOCLAIM_MAX_COUNT = (2**63 - 1) // 16
"""Redis: LONG_MAX / max(sizeof(streamID), attempts factor 10)."""
_ATTEMPTS_FACTOR = 10
_XAUTOCLAIM_ALLOC_LIMIT = 2**47
"""Redis allocates COUNT stream IDs (16 bytes each) up front and answers "COUNT too high" when
that fails; on x86-64 Linux it fails from 2**47 bytes (the user address space), which is the
limit modelled here. A real server may fail below it when memory is short."""


def _group_or_nogroup(ctx: Context, args: list[bytes]) -> tuple[KeyState, Group]:
    found = find_group(ctx.state, args[1], args[2])
    if found is None:
        raise errors.nogroup(args[1], args[2])
    return found


# --- XPENDING ----------------------------------------------------------------------------------


def xpending(ctx: Context, args: list[bytes]) -> Result:
    argc = len(args)
    if argc != 3 and not 6 <= argc <= 9:
        raise CommandError(errors.SYNTAX)
    if argc == 3:
        ks, group = _group_or_nogroup(ctx, args)
        return Result(_summary(group))
    at = 3
    min_idle = 0
    if eq(args[3], b"idle"):
        min_idle = parse_int(args[4])
        if argc < 8:
            raise CommandError(errors.SYNTAX)
        at = 5
    count = max(0, parse_int(args[at + 2]))
    start = parse_range_start(args[at])
    end = parse_range_end(args[at + 1])
    consumer_name = args[at + 3] if at + 3 < argc else None
    _ks, group = _group_or_nogroup(ctx, args)
    if consumer_name is not None:
        consumer = group.consumers.get(consumer_name)
        if consumer is None:
            return Result([])
        keys = pel_keys_between(consumer.pending, start, end)
    else:
        keys = pel_keys_between(group.pel, start, end)
    rows: list[Reply] = []
    for key in keys:
        if not count:
            break
        entry = group.pel[key]
        idle = ctx.now_ms - entry.delivery_time
        if min_idle and idle < min_idle:
            continue
        count -= 1
        if entry.consumer is None:  # NACKed: no owner, delivery time 0, idle shown as -1
            rows.append([format_id(pel_ref(key)[1]), b"", -1, entry.delivery_count])
            continue
        rows.append(
            [format_id(pel_ref(key)[1]), entry.consumer, max(0, idle), entry.delivery_count]
        )
    return Result(rows)


def _summary(group: Group) -> Reply:
    if not group.pel:
        return [0, None, None, NULL_ARRAY]
    first = pel_ref(group.pel.peekitem(0)[0])[1]
    last = pel_ref(group.pel.peekitem(-1)[0])[1]
    owners: list[Reply] = [
        [name, b"%d" % len(consumer.pending)]
        for name, consumer in sorted(group.consumers.items())
        if consumer.pending
    ]
    return [len(group.pel), format_id(first), format_id(last), owners]


# --- XCLAIM ------------------------------------------------------------------------------------


class _ClaimOptions:
    __slots__ = ("force", "justid", "delivery_time", "retry_count", "last_id")

    def __init__(self) -> None:
        self.force = False
        self.justid = False
        self.delivery_time: int | None = None
        self.retry_count: int | None = None
        self.last_id: StreamID = MIN_ID


def _claim_options(args: list[bytes], j: int, now_ms: int) -> _ClaimOptions:
    opts = _ClaimOptions()
    while j < len(args):
        more = len(args) - 1 - j
        opt = args[j]
        if eq(opt, b"force"):
            opts.force = True
        elif eq(opt, b"justid"):
            opts.justid = True
        elif eq(opt, b"idle") and more:
            j += 1
            opts.delivery_time = now_ms - parse_int(args[j], errors.INVALID_IDLE)
        elif eq(opt, b"time") and more:
            j += 1
            opts.delivery_time = parse_int(args[j], errors.INVALID_TIME)
        elif eq(opt, b"retrycount") and more:
            j += 1
            count = parse_int(args[j], errors.INVALID_RETRYCOUNT)
            # Redis keeps -1 for "not given" and tests `>= 0`: a negative count is ignored.
            opts.retry_count = count if count >= 0 else None
        elif eq(opt, b"lastid") and more:
            j += 1
            opts.last_id = parse_id(args[j], 0)
        else:
            raise errors.xclaim_unrecognized(opt)
        j += 1
    if opts.delivery_time is None or not 0 <= opts.delivery_time <= now_ms:
        # Redis: no IDLE/TIME means now; a bogus one (negative, future) is quietly now too.
        opts.delivery_time = now_ms
    return opts


def xclaim(ctx: Context, args: list[bytes]) -> Result:
    ks, group = _group_or_nogroup(ctx, args)
    min_idle = max(0, parse_int(args[4], errors.INVALID_MIN_IDLE))
    ids: list[StreamID] = []
    j = 5
    while j < len(args):
        try:
            ids.append(parse_id(args[j], 0))
        except CommandError:
            break  # perhaps the first option
        j += 1
    now = ctx.now_ms
    opts = _claim_options(args, j, now)
    assert opts.delivery_time is not None
    # The delivery time each PEL entry has after this command's own earlier steps
    # (None: dropped), so an ID named twice behaves as in Redis.
    touched: dict[PelKey, int | None] = {}
    claimed: list[EntryRef] = []
    dropped: list[EntryRef] = []
    rows: list[Reply] = []
    for sid in ids:
        for ref in refs_with_id(ks, group, sid):
            key = pel_key(ref)
            if key in touched:
                pending_since = touched[key]
            else:
                entry = group.pel.get(key)
                pending_since = None if entry is None else entry.delivery_time
            fields = entry_fields(ks, ref)
            if fields is None:
                if pending_since is not None:
                    dropped.append(ref)
                    touched[key] = None
                continue
            if pending_since is None:
                if not opts.force:
                    continue
            elif min_idle and now - pending_since < min_idle:
                continue
            touched[key] = opts.delivery_time
            claimed.append(ref)
            rows.append(format_id(sid) if opts.justid else entry_reply(sid, fields))
    last_id = opts.last_id if opts.last_id > group.last_delivered() else None
    if not (claimed or dropped or last_id):
        return Result(rows)
    op = ops.Claim(
        args[1],
        args[2],
        args[3],
        now,
        tuple(claimed),
        opts.delivery_time,
        opts.retry_count,
        not opts.justid,
        tuple(dropped),
        last_id,
    )
    return Result(rows, [op])


# --- XAUTOCLAIM --------------------------------------------------------------------------------


def xautoclaim(ctx: Context, args: list[bytes]) -> Result:
    """Redis 7 reply: [next start ID, claimed entries, IDs of deleted entries dropped]."""
    min_idle = max(0, parse_int(args[4], errors.INVALID_MIN_IDLE_XAUTOCLAIM))
    start = parse_range_start(args[5])
    count = 100
    justid = False
    j = 6
    while j < len(args):
        more = len(args) - 1 - j
        if eq(args[j], b"count") and more:
            count = parse_int(args[j + 1], errors.COUNT_NEGATIVE_XAUTOCLAIM)
            if not 1 <= count <= _XAUTOCLAIM_MAX_COUNT:
                raise CommandError(errors.COUNT_NEGATIVE_XAUTOCLAIM)
            j += 1
        elif eq(args[j], b"justid"):
            justid = True
        else:
            raise CommandError(errors.SYNTAX)
        j += 1
    ks, group = _group_or_nogroup(ctx, args)
    if count * 16 >= _XAUTOCLAIM_ALLOC_LIMIT:
        raise CommandError(errors.XAUTOCLAIM_COUNT_TOO_HIGH)
    now = ctx.now_ms
    attempts = count * _ATTEMPTS_FACTOR
    keys = pel_keys_between(group.pel, start)
    claimed: list[EntryRef] = []
    dropped: list[EntryRef] = []
    rows: list[Reply] = []
    while attempts and count:
        attempts -= 1
        key = next(keys, None)
        if key is None:
            break
        ref = pel_ref(key)
        fields = entry_fields(ks, ref)
        if fields is None:
            dropped.append(ref)
            count -= 1
            continue
        if min_idle and now - group.pel[key].delivery_time < min_idle:
            continue
        claimed.append(ref)
        rows.append(format_id(ref[1]) if justid else entry_reply(ref[1], fields))
        count -= 1
    following = next(keys, None)
    cursor = MIN_ID if following is None else pel_ref(following)[1]
    reply: Reply = [format_id(cursor), rows, [format_id(ref[1]) for ref in dropped]]
    if not (claimed or dropped):
        return Result(reply)
    op = ops.Claim(
        args[1],
        args[2],
        args[3],
        now,
        tuple(claimed),
        now,
        None,
        not justid,
        tuple(dropped),
        None,
    )
    return Result(reply, [op])


COMMANDS: list[Command] = [
    command("xpending", xpending),
    command("xclaim", xclaim),
    command("xautoclaim", xautoclaim),
]
