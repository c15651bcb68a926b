"""Keyspace commands over stream keys: DEL, UNLINK, EXISTS, TYPE (and, from `keyspace`, DBSIZE,
KEYS, SCAN, RENAME, RENAMENX, FLUSHDB, FLUSHALL, registered with this family).

DEL is observed-remove for entries and delete-wins for groups: the op removes what this region
has seen and kills every group of the key, concurrent creates included. A key this region has
seen but which is now empty (Redis would keep it as an empty stream) is deleted too: its last ID is
forgotten, as Redis forgets it, even though the reply counts only keys that exist here.
"""

from __future__ import annotations

from streams.commands import keyspace
from streams.commands.base import Command, Context, Result, command
from streams.crdt import ops
from streams.crdt.ops import Body
from streams.reply import Status


def delete(ctx: Context, args: list[bytes]) -> Result:
    removed = 0
    out: list[Body] = []
    for key in dict.fromkeys(args[1:]):
        raw = ctx.state.raw(key)
        if raw is None:
            continue
        if raw.exists:
            removed += 1
        out.append(ops.Del(key))
    return Result(removed, out)


def exists(ctx: Context, args: list[bytes]) -> Result:
    return Result(sum(1 for key in args[1:] if ctx.state.get(key) is not None))


def type_(ctx: Context, args: list[bytes]) -> Result:
    return Result(Status("stream" if ctx.state.get(args[1]) is not None else "none"))


COMMANDS: list[Command] = [
    command("del", delete),
    command("unlink", delete),
    command("exists", exists),
    command("type", type_),
    *keyspace.COMMANDS,
]
