"""Plain reads: XRANGE, XREVRANGE, XREAD.

XREAD iterates the merged view like any other read, which is why it may skip an entry that
arrives late from another region with an ID below the caller's last-seen ID (seed table "XREAD
skips"): use XREADGROUP, whose per-origin cursors never skip.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from streams import errors
from streams.commands.base import (
    BlockRequest,
    Command,
    Context,
    Result,
    command,
    entry_reply,
    eq,
    parse_int,
)
from streams.commands.readargs import parse_read_args
from streams.commands.slices import MIN_SLICED, SLICING, sliced_range
from streams.crdt.entries import MergedEntry
from streams.errors import CommandError
from streams.ids import (
    MAX_ID,
    MIN_ID,
    format_id,
    incr,
    parse_id,
    parse_range_end,
    parse_range_start,
)
from streams.reply import NULL_ARRAY, Map, Reply


def entries_reply(entries: Iterable[MergedEntry]) -> list[Reply]:
    return [entry_reply(sid, fields) for sid, _origin, fields in entries]


def _xrange(ctx: Context, args: list[bytes], reverse: bool) -> Result:
    start_raw, end_raw = (args[3], args[2]) if reverse else (args[2], args[3])
    start = parse_range_start(start_raw)
    end = parse_range_end(end_raw)
    count = -1
    j = 4
    while j < len(args):
        if eq(args[j], b"count") and j + 1 < len(args):
            count = max(0, parse_int(args[j + 1]))
            j += 2
        else:
            raise CommandError(errors.SYNTAX)
    ks = ctx.state.get(args[1])
    if ks is None:
        return Result([])
    if count == 0:
        return Result(NULL_ARRAY)
    if SLICING.get() and ks.entries.length >= MIN_SLICED and (count < 0 or count > MIN_SLICED):
        return Result(sliced_range(ks.entries, start, end, reverse, count))
    found = ks.entries.range(start, end, reverse=reverse)
    if count > 0:
        return Result(entries_reply(islice(found, count)))
    return Result(entries_reply(found))


def xrange(ctx: Context, args: list[bytes]) -> Result:
    return _xrange(ctx, args, reverse=False)


def xrevrange(ctx: Context, args: list[bytes]) -> Result:
    return _xrange(ctx, args, reverse=True)


def xread(ctx: Context, args: list[bytes]) -> Result:
    parsed = parse_read_args(args, group=False)
    after: list[tuple[int, int]] = []
    for key, raw in zip(parsed.keys, parsed.ids, strict=True):
        if raw == b"$":
            ks = ctx.state.get(key)
            after.append(ks.last_id if ks is not None else MIN_ID)
        elif raw == b">":
            raise CommandError(errors.XREAD_GT_ONLY_GROUP)
        else:
            after.append(parse_id(raw, 0))
    served: list[tuple[Reply, Reply]] = []
    for key, gt in zip(parsed.keys, after, strict=True):
        ks = ctx.state.get(key)
        if ks is None or not ks.entries.length:
            continue
        top = ks.entries.max_id()
        if top is None or top <= gt:
            continue
        start = incr(gt)
        if start is None:
            continue
        found: Iterable[MergedEntry] = ks.entries.range(start, MAX_ID)
        if parsed.count:
            found = islice(found, parsed.count)
        served.append((key, entries_reply(found)))
    if served:
        return Result(Map(tuple(served), nested=True))
    if parsed.block_ms is None:
        return Result(NULL_ARRAY)
    resolved = list(args[: len(args) - len(parsed.ids)]) + [format_id(a) for a in after]
    return Result(
        NULL_ARRAY, block=BlockRequest(tuple(parsed.keys), parsed.block_ms, tuple(resolved))
    )


COMMANDS: list[Command] = [
    command("xrange", xrange),
    command("xrevrange", xrevrange),
    command("xread", xread),
]
