"""XNACK: hand pending entries back to the group without acknowledging them (Redis 8.8).

A NACKed entry leaves its consumer's PEL but stays in the group's, unowned, with delivery time
0: XPENDING shows it with an empty consumer and idle -1, any claim (XCLAIM, XAUTOCLAIM,
XREADGROUP ... CLAIM) may take it whatever its min-idle-time, and XREADGROUP ... CLAIM takes
NACKed entries first, in the order they were NACKed. Like every PEL change it is a local op of
this region (`ops.Nack`, applied by `Group.nack`); nothing of it replicates, as nothing of XCLAIM
does: another region's group has its own PEL.
"""

from __future__ import annotations

from streams import errors
from streams.commands.base import Command, Context, Result, command, eq
from streams.commands.groupview import find_group, refs_with_id
from streams.crdt import ops
from streams.crdt.groups import NackMode, pel_key
from streams.crdt.ops import EntryRef
from streams.errors import CommandError
from streams.ids import StreamID, parse_id
from streams.numbers import string2ll

_MODES = {b"silent": NackMode.SILENT, b"fail": NackMode.FAIL, b"fatal": NackMode.FATAL}


class NackArgs:
    """What XNACK's arguments said, parsed once."""

    __slots__ = ("mode", "ids", "retry_count", "force")

    def __init__(self, mode: NackMode) -> None:
        self.mode = mode
        self.ids: list[StreamID] | None = None
        self.retry_count: int | None = None
        self.force = False


def parse_nack_args(args: list[bytes]) -> NackArgs:
    """The mode is the word after the group; IDS, RETRYCOUNT and FORCE follow in any order, each
    once (a second mode word, or anything else, is an unrecognized option)."""
    mode = _MODES.get(args[3].lower())
    if mode is None:
        raise CommandError(errors.XNACK_MODE)
    parsed = NackArgs(mode)
    i = 4
    while i < len(args):
        opt = args[i]
        more = len(args) - 1 - i
        if parsed.ids is None and eq(opt, b"ids") and more:
            numids = string2ll(args[i + 1])
            if numids is None or numids < 1:
                raise CommandError(errors.XNACK_NUMIDS_NOT_POSITIVE)
            first = i + 2
            if numids > len(args) - first:
                raise CommandError(errors.XNACK_NUMIDS_MISMATCH)
            parsed.ids = [parse_id(raw, 0) for raw in args[first : first + numids]]
            i = first + numids
            continue
        if eq(opt, b"retrycount") and more:
            count = string2ll(args[i + 1])
            if count is None:
                raise CommandError(errors.NOT_INTEGER)
            if count < 0:
                raise CommandError(errors.XNACK_RETRYCOUNT_NEGATIVE)
            parsed.retry_count = count
            i += 2
            continue
        if eq(opt, b"force"):
            parsed.force = True
            i += 1
            continue
        raise errors.xnack_unrecognized(opt)
    if parsed.ids is None:
        raise CommandError(errors.XNACK_NO_IDS)
    return parsed


# XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...] [RETRYCOUNT count] [FORCE]
def xnack(ctx: Context, args: list[bytes]) -> Result:
    """The number of entries NACKed: each ID that names a pending entry (each time it is named:
    a repeated ID counts again), and with FORCE each existing entry not pending, which joins the
    PEL unowned. IDs naming neither are skipped."""
    parsed = parse_nack_args(args)
    assert parsed.ids is not None
    found = find_group(ctx.state, args[1], args[2])
    if found is None:
        raise errors.nogroup(args[1], args[2])
    ks, group = found
    pending = set(group.pel)
    chosen: list[EntryRef] = []
    for sid in parsed.ids:
        for ref in refs_with_id(ks, group, sid):
            key = pel_key(ref)
            if key not in pending:
                if not parsed.force or ks.entries.get(ref[0], ref[1]) is None:
                    continue
                pending.add(key)  # FORCE made it pending: named again, it is NACKed again
            chosen.append(ref)
    if not chosen:
        return Result(0)
    op = ops.Nack(args[1], args[2], tuple(chosen), int(parsed.mode), parsed.retry_count)
    return Result(len(chosen), [op])


COMMANDS: list[Command] = [
    command("xnack", xnack),
]
