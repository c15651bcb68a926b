"""Entry-writing commands: XADD, XDEL, XDELEX, XTRIM, XSETID, XLEN.

XADD's IDMP / IDMPAUTO look up and record through `streams.commands.idempotency`; the KEEPREF /
DELREF / ACKED deletes of XADD, XTRIM and XDELEX are `streams.commands.refs`'s.
"""

from __future__ import annotations

from streams import errors
from streams.commands import idempotency, refs
from streams.commands.base import Command, Context, Result, command, eq, parse_int
from streams.commands.trimming import (
    RefPolicy,
    Strategy,
    TrimArgs,
    doomed_entries,
    parse_trim_args,
    thresholds,
)
from streams.crdt import ops
from streams.crdt.entries import EntryLogs
from streams.crdt.ops import Body
from streams.crdt.state import KeyState
from streams.errors import CommandError
from streams.ids import (
    IdMode,
    XAddIdKind,
    format_id,
    next_xadd_id,
    parse_id,
)
from streams.reply import OK


# XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [IDMPAUTO pid | IDMP pid iid]
#      [<MAXLEN | MINID> [= | ~] threshold [LIMIT count]] <* | id> field value [field value ...]
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
    fields = tuple(args[idpos + 1 :])
    out: list[Body] = []
    if trim.idmp_pid is not None:
        found = idempotency.lookup(ctx, ks, key, trim.idmp_pid, trim.idmp_iid, fields)
        if isinstance(found, Result):
            return found  # a retry: the first entry's ID, nothing added
        out.extend(found)
    top = None if ks is None else ks.top
    if top == (2**64 - 1, 2**64 - 1):
        raise CommandError(errors.STREAM_EXHAUSTED)
    sid = next_xadd_id(spec, ctx.mode, ctx.region, ctx.now_ms, top)
    out.insert(0, ops.XAdd(key, sid, fields))
    if trim.idmp_pid is not None:
        out.append(idempotency.record(ctx, key, trim.idmp_pid, trim.idmp_iid, fields, sid))
    out.extend(_trim_ops(ctx, key, ks, trim, (sid, ctx.region, fields))[1])
    return Result(format_id(sid), out)


# XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]
def xtrim(ctx: Context, args: list[bytes]) -> Result:
    trim, _ = parse_trim_args(args, 2, xadd=False)
    ks = ctx.state.get(args[1])
    if ks is None:
        return Result(0)
    count, out = _trim_ops(ctx, args[1], ks, trim)
    return Result(count, out)


def _trim_ops(
    ctx: Context,
    key: bytes,
    ks: KeyState | None,
    trim: TrimArgs,
    extra: tuple[tuple[int, int], int, tuple[bytes, ...]] | None = None,
) -> tuple[int, list[Body]]:
    """A trim's reply count and ops under its reference policy (`streams.commands.refs`)."""
    if trim.strategy is Strategy.NONE:
        return 0, []
    if trim.refs is RefPolicy.ACKED:
        chosen = refs.acked_trim(ctx, ks, trim, extra)
        return len(chosen), refs.delete_ops(key, chosen, RefPolicy.KEEPREF)
    logs = ks.entries if ks is not None else EntryLogs()
    doomed = doomed_entries(logs, trim, extra)
    if not doomed:
        return 0, []
    out: list[Body] = [ops.XTrim(key, thresholds(doomed))]
    if trim.refs is RefPolicy.DELREF:
        out.extend(refs.drop_refs_after_trim(key, thresholds(doomed)))
    return len(doomed), out


# XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
def xdelex(ctx: Context, args: list[bytes]) -> Result:
    """Per ID: -1 no such entry, 1 deleted, 2 kept (ACKED: a group still refers to it)."""
    parsed = refs.parse_ids_args(args, 2)
    ks = ctx.state.get(args[1])
    replies: list[int] = []
    doomed: list[tuple[int, int]] = []
    gone: set[tuple[int, int]] = set()
    for sid in parsed.ids:
        if ks is None or sid in gone or not ks.entries.has(sid):
            replies.append(-1)
        elif parsed.policy is RefPolicy.ACKED and not refs.id_deletable(ctx, ks, sid):
            replies.append(2)
        else:
            replies.append(1)
            doomed.append(sid)
            gone.add(sid)
    return Result(list(replies), refs.delete_ops(args[1], doomed, parsed.policy))


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
    command("xdelex", xdelex),
    command("xsetid", xsetid),
    command("xlen", xlen),
]
