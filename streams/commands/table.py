"""The one explicit command table, and dispatch: name lookup, arity, subcommands, errors.

Each family module exports `COMMANDS`; this module merges them. Dispatch never lets an exception
other than `CommandError` escape as a reply: a bug in a handler is re-raised for the caller (the
node) to log and answer with a generic error, so client input cannot crash the node silently.
"""

from __future__ import annotations

from streams import errors
from streams.commands import admin, entries, groups, info, keys, reads
from streams.commands.base import Command, Context, Result
from streams.errors import CommandError


def _build() -> dict[str, Command]:
    table: dict[str, Command] = {}
    for family in (entries, reads, groups, info, keys, admin):
        for cmd in family.COMMANDS:
            if cmd.name in table:
                raise RuntimeError(f"command {cmd.name} registered twice")
            table[cmd.name] = cmd
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


def dispatch(ctx: Context, args: list[bytes]) -> Result:
    """Run one command against the region's state: reply plus the ops it wants logged."""
    if not args:
        return Result(CommandError("ERR empty command"))
    try:
        cmd = lookup(args)
        assert cmd.handler is not None
        return cmd.handler(ctx, args)
    except CommandError as error:
        return Result(error)
