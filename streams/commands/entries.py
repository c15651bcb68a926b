"""Entry-writing commands: XADD, XDEL, XTRIM, XSETID, XLEN."""

from __future__ import annotations

from streams import errors
from streams.commands.base import Command, Context, Result, command, eq, parse_int
from streams.commands.trimming import doomed_entries, parse_trim_args, thresholds
from streams.crdt import ops
from streams.crdt.entries import EntryLogs
from streams.crdt.ops import Body
from streams.errors import CommandError
from streams.ids import (
    IdMode,
    XAddIdKind,
    format_id,
    next_xadd_id,
    parse_id,
)
from streams.reply import OK


def xadd(ctx: Context, args: list[bytes]) -> Result:
    trim, idpos = parse_trim_args(args, 2, xadd=True)
    spec = trim.xadd_id
    nfields = len(args) - idpos - 1
    if spec is None or nfields < 2 or nfields % 2:
        raise errors.wrong_arity("xadd")
    # Redis refuses 0-0 before looking the key up. A millisecond-only ID is `ms-0` in liberal
    # mode (Redis's own reading), so `0` is 0-0 there; strict modes give it a region sequence.
    explicit_seq = spec.kind is XAddIdKind.FULL or (
        spec.kind is XAddIdKind.MS_ONLY and ctx.mode is IdMode.LIBERAL
    )
    if explicit_seq and spec.ms == 0 and spec.seq == 0:
        raise CommandError(errors.XADD_ID_ZERO)
    key = args[1]
    ks = ctx.state.raw(key)
    if trim.nomkstream and (ks is None or not ks.exists):
        return Result(None)
    top = None if ks is None else ks.top
    if top == (2**64 - 1, 2**64 - 1):
        raise CommandError(errors.STREAM_EXHAUSTED)
    sid = next_xadd_id(spec, ctx.mode, ctx.region, ctx.now_ms, top)
    fields = tuple(args[idpos + 1 :])
    out: list[Body] = [ops.XAdd(key, sid, fields)]
    logs = ks.entries if ks is not None else EntryLogs()
    doomed = doomed_entries(logs, trim, (sid, ctx.region, fields))
    if doomed:
        out.append(ops.XTrim(key, thresholds(doomed)))
    return Result(format_id(sid), out)


def xtrim(ctx: Context, args: list[bytes]) -> Result:
    trim, _ = parse_trim_args(args, 2, xadd=False)
    ks = ctx.state.get(args[1])
    if ks is None:
        return Result(0)
    doomed = doomed_entries(ks.entries, trim)
    if not doomed:
        return Result(0)
    return Result(len(doomed), [ops.XTrim(args[1], thresholds(doomed))])


def xdel(ctx: Context, args: list[bytes]) -> Result:
    ks = ctx.state.get(args[1])
    if ks is None:
        return Result(0)  # Redis looks the key up before it parses the IDs
    ids = [parse_id(raw, 0) for raw in args[2:]]
    seen: set[tuple[int, int]] = set()
    count = 0
    for sid in ids:
        if sid in seen:
            continue
        seen.add(sid)
        count += len(ks.entries.origins_with(sid))
    if not count:
        return Result(0)
    present = tuple(sid for sid in dict.fromkeys(ids) if ks.entries.has(sid))
    return Result(count, [ops.XDel(args[1], present)])


def xsetid(ctx: Context, args: list[bytes]) -> Result:
    sid = parse_id(args[2], 0)
    entries_added: int | None = None
    max_deleted = None
    i = 3
    while i < len(args):
        more = len(args) - 1 - i
        if eq(args[i], b"entriesadded") and more:
            entries_added = parse_int(args[i + 1])
            if entries_added < 0:
                raise CommandError(errors.ENTRIES_ADDED_NEGATIVE)
        elif eq(args[i], b"maxdeletedid") and more:
            max_deleted = parse_id(args[i + 1], 0)
            if sid < max_deleted:
                raise CommandError(errors.XSETID_MAXDEL)
        else:
            raise CommandError(errors.SYNTAX)
        i += 2
    ks = ctx.state.get(args[1])
    if ks is None:
        raise CommandError(errors.NO_SUCH_KEY)
    if ks.entries.length:
        top = ks.entries.max_id()
        if top is not None and sid < top:
            raise CommandError(errors.XSETID_TOO_SMALL)
        if entries_added is not None and ks.entries.length > entries_added:
            raise CommandError(errors.XSETID_ENTRIES_ADDED)
    if sid < ks.last_id:
        raise CommandError(errors.XSETID_BELOW_LAST)
    if max_deleted == (0, 0):
        max_deleted = None
    return Result(OK, [ops.XSetId(args[1], sid, entries_added, max_deleted)])


def xlen(ctx: Context, args: list[bytes]) -> Result:
    ks = ctx.state.get(args[1])
    return Result(0 if ks is None else ks.entries.length)


COMMANDS: list[Command] = [
    command("xadd", xadd),
    command("xtrim", xtrim),
    command("xdel", xdel),
    command("xsetid", xsetid),
    command("xlen", xlen),
]
