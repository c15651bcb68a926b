"""The consumer-group family: XGROUP (here, with XACK) and the table rows of XREADGROUP
(`readgroup`) and XPENDING / XCLAIM / XAUTOCLAIM (`pel`).

What replicates (docs/architecture.md, "Replicated state"): XGROUP CREATE and DESTROY are
replicated ops (existence, delete wins); SETID, CREATECONSUMER, DELCONSUMER and XACK are local ops
of this region. XACK's cross-region effect (the consecutive-XACK frontier) is not made here: the
region coalesces it from the acks it applied (`Region.flush_acks`).

Argument checks follow Redis 7.0's xgroupCommand order: options, then the key, then the group,
then the ID, so the same bad input fails with the same error as on a real server.
"""

from __future__ import annotations

from streams import errors
from streams.commands import nack, pel, readgroup, refs
from streams.commands.base import Command, Context, Result, command, container, eq, parse_int
from streams.commands.groupview import dollar_cursors, find_group, help_reply, pel_keys_between
from streams.commands.trimming import RefPolicy
from streams.crdt import ops
from streams.crdt.groups import Group, PelKey
from streams.crdt.ops import Body
from streams.crdt.state import KeyState
from streams.errors import CommandError
from streams.ids import StreamID, parse_id
from streams.reply import OK

_HELP = (
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
)


def _options(args: list[bytes], *, create: bool) -> tuple[bool, int | None]:
    """CREATE's MKSTREAM and CREATE / SETID's ENTRIESREAD (None = unknown, Redis's -1)."""
    mkstream = False
    entries_read = -1
    i = 5
    while i < len(args):
        if create and eq(args[i], b"mkstream"):
            mkstream = True
            i += 1
        elif eq(args[i], b"entriesread") and i + 1 < len(args):
            entries_read = parse_int(args[i + 1])
            if entries_read < -1:
                raise CommandError(errors.ENTRIES_READ_INVALID)
            i += 2
        else:
            raise errors.subcommand_syntax(args[0], args[1])
    return mkstream, None if entries_read == -1 else entries_read


def _target(
    ctx: Context, args: list[bytes], *, mkstream: bool = False, need_group: bool = True
) -> tuple[KeyState | None, Group | None]:
    """The key (required unless CREATE ... MKSTREAM) and the group (required unless CREATE or
    DESTROY), with Redis's errors."""
    ks = ctx.state.get(args[2])
    if ks is None and not mkstream:
        raise CommandError(errors.XGROUP_KEY_MISSING)
    group = None if ks is None else ks.groups.get(args[3])
    if group is None and need_group:
        raise errors.xgroup_nogroup(args[2], args[3])
    return ks, group


def xgroup_create(ctx: Context, args: list[bytes]) -> Result:
    mkstream, entries_read = _options(args, create=True)
    ks, group = _target(ctx, args, mkstream=mkstream, need_group=False)
    if len(args) > 8:
        raise errors.subcommand_syntax(args[0], args[1])
    if args[4] == b"$":
        default, start = dollar_cursors(ctx.state.raw(args[2]), ctx.region)
    else:
        default, start = parse_id(args[4], 0), ()
    if group is not None:
        raise CommandError(errors.BUSYGROUP)
    return Result(OK, [ops.GroupCreate(args[2], args[3], default, start, entries_read)])


def xgroup_setid(ctx: Context, args: list[bytes]) -> Result:
    _mk, entries_read = _options(args, create=False)
    _target(ctx, args)
    if len(args) not in (5, 7):
        raise errors.subcommand_syntax(args[0], args[1])
    if args[4] == b"$":
        default, start = dollar_cursors(ctx.state.raw(args[2]), ctx.region)
    else:
        default, start = parse_id(args[4], 0, strict=False), ()
    return Result(OK, [ops.SetId(args[2], args[3], default, start, entries_read)])


def xgroup_destroy(ctx: Context, args: list[bytes]) -> Result:
    _ks, group = _target(ctx, args, need_group=False)
    if group is None:
        return Result(0)
    return Result(1, [ops.GroupDestroy(args[2], args[3])])


def xgroup_createconsumer(ctx: Context, args: list[bytes]) -> Result:
    _ks, group = _target(ctx, args)
    assert group is not None
    if args[4] in group.consumers:
        return Result(0)
    return Result(1, [ops.TouchConsumer(args[2], args[3], args[4], ctx.now_ms)])


def xgroup_delconsumer(ctx: Context, args: list[bytes]) -> Result:
    _ks, group = _target(ctx, args)
    assert group is not None
    consumer = group.consumers.get(args[4])
    if consumer is None:
        return Result(0)
    return Result(len(consumer.pending), [ops.DelConsumer(args[2], args[3], args[4])])


def xgroup_help(ctx: Context, args: list[bytes]) -> Result:
    return Result(help_reply(args[0], _HELP))


def xack(ctx: Context, args: list[bytes]) -> Result:
    """Like Redis: 0 for a missing key or group (before the IDs are even parsed); IDs parsed all
    first so the command is all or nothing; an ID acknowledges every pending entry carrying it."""
    found = find_group(ctx.state, args[1], args[2])
    if found is None:
        return Result(0)
    _ks, group = found
    ids = [parse_id(raw, 0) for raw in args[3:]]
    acked: set[tuple[int, int, int]] = set()
    hit: list[StreamID] = []
    for sid in ids:
        keys = [k for k in pel_keys_between(group.pel, sid, sid) if k not in acked]
        if keys:
            acked.update(keys)
            hit.append(sid)
    if not acked:
        return Result(0)
    return Result(len(acked), [ops.Ack(args[1], args[2], tuple(hit))])


# XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]
def xackdel(ctx: Context, args: list[bytes]) -> Result:
    """XACK then XDELEX per ID: -1 not pending in the group (or no key / group), 1 acknowledged
    and deleted, 2 acknowledged and kept (ACKED: another group, here or in another region, still
    refers to it). KEEPREF and DELREF report 1 even for an entry already gone: its reference was
    what remained, and it is acknowledged."""
    parsed = refs.parse_ids_args(args, 3)
    found = find_group(ctx.state, args[1], args[2])
    if found is None:
        return Result([-1] * len(parsed.ids))
    ks, group = found
    replies: list[int] = []
    hit: list[StreamID] = []
    acked: set[tuple[bytes, PelKey]] = set()
    for sid in parsed.ids:
        keys = [k for k in pel_keys_between(group.pel, sid, sid) if (args[2], k) not in acked]
        if not keys:
            replies.append(-1)
            continue
        acked.update((args[2], k) for k in keys)
        hit.append(sid)
        replies.append(0)
    doomed: list[StreamID] = []
    frozen = frozenset(acked)
    for at, sid in enumerate(parsed.ids):
        if replies[at] == -1 or sid in doomed:
            continue
        if parsed.policy is RefPolicy.ACKED and not refs.id_deletable(ctx, ks, sid, frozen):
            replies[at] = 2
            continue
        replies[at] = 1
        if ks.entries.has(sid):
            doomed.append(sid)
    out: list[Body] = [*refs.delete_ops(args[1], doomed, parsed.policy)]
    if hit:
        out.append(ops.Ack(args[1], args[2], tuple(hit)))
    return Result(list(replies), out)


COMMANDS: list[Command] = [
    container(
        "xgroup",
        [
            command("xgroup|create", xgroup_create),
            command("xgroup|setid", xgroup_setid),
            command("xgroup|destroy", xgroup_destroy),
            command("xgroup|createconsumer", xgroup_createconsumer),
            command("xgroup|delconsumer", xgroup_delconsumer),
            command("xgroup|help", xgroup_help),
        ],
    ),
    command("xack", xack),
    command("xackdel", xackdel),
    *nack.COMMANDS,
    *readgroup.COMMANDS,
    *pel.COMMANDS,
]
