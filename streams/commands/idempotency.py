"""Idempotent production: XADD's IDMP / IDMPAUTO (looked up and recorded here for `entries.xadd`),
XCFGSET (the stream's IDMP window) and XIDMPRECORD (Redis's internal record of an existing
entry's IID, which replication and AOF rewriting use).

The state and its rules across regions are `streams.crdt.idmp`'s: a record replicates with the
entry it names, so a retry sent to any region finds it once the regions have synced, and two
concurrent records of one IID leave one entry in every region. The first IDMP XADD of a stream
whose window was never set records this node's defaults with it, so the window in effect
replicates with the stream (Redis fixes it when it creates the stream).
"""

from __future__ import annotations

from streams import errors
from streams.commands.base import Command, Context, Result, command, eq
from streams.crdt import idmp as crdt_idmp
from streams.crdt import ops
from streams.crdt.ops import Body, Fields
from streams.crdt.state import KeyState
from streams.errors import CommandError
from streams.ids import StreamID, format_id, parse_id
from streams.numbers import string2ll
from streams.reply import OK


def lookup(
    ctx: Context, ks: KeyState | None, key: bytes, pid: bytes, iid: bytes | None, fields: Fields
) -> Result | list[Body]:
    """An IDMP XADD before it adds: the retry's reply (the first entry's ID, counted as a
    duplicate) when the IID is in the window, else the ops to issue before the entry's (the
    window, when the stream never had one)."""
    state = None if ks is None else ks.idmp
    found = None if state is None else state.lookup(pid, _iid(iid, fields), ctx.now_ms)
    if found is not None:
        return Result(format_id(found.id), [ops.IdmpDuplicate(key)])
    if state is None or state.config is None:
        duration_s, maxsize = crdt_idmp.defaults()
        return [ops.StreamConfig(key, duration_s, maxsize, False)]
    return []


def record(
    ctx: Context, key: bytes, pid: bytes, iid: bytes | None, fields: Fields, sid: StreamID
) -> ops.Idmp:
    """The record of the entry an IDMP XADD adds."""
    return ops.Idmp(key, pid, _iid(iid, fields), ctx.region, sid)


def _iid(iid: bytes | None, fields: Fields) -> bytes:
    return iid if iid is not None else crdt_idmp.auto_iid(fields)


# XCFGSET key [IDMP-DURATION duration] [IDMP-MAXSIZE maxsize]
def xcfgset(ctx: Context, args: list[bytes]) -> Result:
    """At least one setting; each option takes a value (syntax error without), integers checked
    as they come, ranges after; a value that changes the window clears the IID history (the
    records this region has applied), the same values leave it."""
    if len(args) == 2:
        raise CommandError(errors.XCFGSET_NO_PARAMETER)
    duration: int | None = None
    maxsize: int | None = None
    i = 2
    while i < len(args):
        opt = args[i]
        if i + 1 >= len(args) or not (eq(opt, b"idmp-duration") or eq(opt, b"idmp-maxsize")):
            raise CommandError(errors.SYNTAX)
        value = string2ll(args[i + 1])
        if value is None:
            raise CommandError(errors.NOT_INTEGER)
        if eq(opt, b"idmp-duration"):
            low, high = crdt_idmp.DURATION_RANGE
            if not low <= value <= high:
                raise CommandError(errors.IDMP_DURATION_RANGE)
            duration = value
        else:
            low, high = crdt_idmp.MAXSIZE_RANGE
            if not low <= value <= high:
                raise CommandError(errors.IDMP_MAXSIZE_RANGE)
            maxsize = value
        i += 2
    ks = ctx.state.get(args[1])
    if ks is None:
        raise CommandError(errors.NO_SUCH_KEY)
    now = ks.idmp.window() if ks.idmp is not None else crdt_idmp.defaults()
    new = (duration if duration is not None else now[0], maxsize if maxsize is not None else now[1])
    return Result(OK, [ops.StreamConfig(args[1], new[0], new[1], new != now)])


# XIDMPRECORD key pid iid stream-id
def xidmprecord(ctx: Context, args: list[bytes]) -> Result:
    """Record that producer `pid`'s IID `iid` made the existing entry `stream-id` (Redis's
    internal command; here also the way a tool carries IDMP history into a region)."""
    sid = parse_id(args[4], 0)
    ks = ctx.state.get(args[1])
    if ks is None:
        raise CommandError(errors.NO_SUCH_KEY)
    if not args[2]:
        raise CommandError(errors.IDMP_EMPTY_PID)
    if not args[3]:
        raise CommandError(errors.IDMP_EMPTY_IID)
    origins = ks.entries.origins_with(sid)
    if not origins:
        raise CommandError(errors.XIDMPRECORD_NO_ENTRY)
    out: list[Body] = []
    if ks.idmp is None or ks.idmp.config is None:
        duration_s, maxsize = crdt_idmp.defaults()
        out.append(ops.StreamConfig(args[1], duration_s, maxsize, False))
    out.append(ops.Idmp(args[1], args[2], args[3], origins[0], sid))
    return Result(OK, out)


COMMANDS: list[Command] = [
    command("xcfgset", xcfgset),
    command("xidmprecord", xidmprecord),
]
