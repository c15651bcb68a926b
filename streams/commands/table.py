"""The command table of the stream commands, and dispatch: name lookup, arity, subcommands.

Each family module exports `COMMANDS`, rows built from the catalogue
(`streams.commands.catalogue`: arity, flags, key positions come from redis-server's own
metadata, never typed here); this module merges them and checks at import that the table and
the catalogue agree: every row is catalogued, a container's rows are its catalogued
subcommands, and every row but a container's has a handler.

`run` executes a command already found (the node resolves a request's name once, in
`streams.node.router`); `dispatch` finds and runs in one go (simulated regions, tests). Neither
lets an exception other than `CommandError` escape as a reply: a bug in a handler is re-raised
for the caller (the node) to log and answer with a generic error, so client input cannot crash
the node silently.
"""

from __future__ import annotations

from streams import errors
from streams.commands import admin, catalogue, entries, groups, info, keys, reads
from streams.commands.base import Command, Context, Result
from streams.errors import CommandError


def check(table: dict[str, Command]) -> None:
    """Raise RuntimeError when a row disagrees with the catalogue."""
    for name, cmd in table.items():
        if name != cmd.name or "|" in name:
            raise RuntimeError(f"command table: row {name!r} holds {cmd.name!r}")
        rows = [cmd, *(cmd.subcommands or {}).values()]
        for row in rows:
            if catalogue.spec(row.name) is not row.spec:
                raise RuntimeError(f"command table: {row.name} does not use its catalogue entry")
        if cmd.subcommands is None:
            continue
        if cmd.handler is not None:
            raise RuntimeError(f"command table: container {name} has a handler of its own")
        for sub_name, sub in cmd.subcommands.items():
            if sub.name != f"{name}|{sub_name}" or sub.subcommands is not None:
                raise RuntimeError(f"command table: {name} files {sub.name} as {sub_name!r}")
            redis = catalogue.REDIS.get(name)
            if sub.name in catalogue.REDIS and (redis is None or sub.name not in redis.subcommands):
                raise RuntimeError(f"command table: Redis has no {sub.name}")


def _build() -> dict[str, Command]:
    table: dict[str, Command] = {}
    for family in (entries, reads, groups, info, keys, admin):
        for cmd in family.COMMANDS:
            if cmd.name in table:
                raise RuntimeError(f"command {cmd.name} registered twice")
            table[cmd.name] = cmd
    check(table)
    for cmd in table.values():
        for row in (cmd, *(cmd.subcommands or {}).values()):
            if row.handler is None and row.subcommands is None:
                raise RuntimeError(f"command table: {row.name} has no handler")
    return table


TABLE: dict[str, Command] = _build()


def lookup(args: list[bytes]) -> Command:
    """The command (or subcommand) to run, after Redis's name and arity checks."""
    name = args[0].lower().decode("utf-8", "replace")
    cmd = TABLE.get(name)
    if cmd is None:
        raise errors.unknown_command(args[0], args[1:])
    if cmd.subcommands is not None:
        if len(args) < 2:
            raise errors.wrong_arity(cmd.name)
        sub = cmd.subcommands.get(args[1].lower().decode("utf-8", "replace"))
        if sub is None:
            raise errors.unknown_subcommand(cmd.name, args[1])
        cmd = sub
    if not cmd.arity_ok(len(args)):
        raise errors.wrong_arity(cmd.name)
    return cmd


def run(cmd: Command, ctx: Context, args: list[bytes]) -> Result:
    """Run a command found (and arity-checked) already: reply plus the ops it wants logged."""
    assert cmd.handler is not None, cmd.name
    try:
        return cmd.handler(ctx, args)
    except CommandError as error:
        return Result(error)


def dispatch(ctx: Context, args: list[bytes]) -> Result:
    """Find and run one command against the region's state: reply plus the ops it wants
    logged."""
    if not args:
        return Result(CommandError("ERR empty command"))
    try:
        cmd = lookup(args)
    except CommandError as error:
        return Result(error)
    return run(cmd, ctx, args)
