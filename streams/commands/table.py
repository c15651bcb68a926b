"""The command table of the stream commands, and dispatch: name lookup, arity, subcommands.

Each family module exports `COMMANDS`, rows built from the catalogue
(`streams.commands.catalogue`: arity, flags, key positions come from redis-server's own
metadata, never typed here); this module merges them and checks at import that the table and
the catalogue agree: every row is catalogued, a container's rows are its catalogued
subcommands, and every row but a container's has a handler.

`resolve` finds the command a request names (in this table, or in the node's, which adds its own
commands: `streams.node.pipeline.router`); `run` executes a command already found; `dispatch` finds
and runs in one go (simulated regions, tests). Neither
lets an exception other than `CommandError` escape as a reply: a bug in a handler is re-raised
for the caller (the node) to log and answer with a generic error, so client input cannot crash
the node silently.
"""

from __future__ import annotations

from streams import errors
from streams.commands import catalogue, entries, groups, idempotency, info, keys, reads
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
    for family in (entries, reads, groups, info, keys, idempotency):
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


Found = Command | str
"""A row of a table, or the name (`a|b` for a subcommand) of a Redis 7 command we do not
implement (answered with `catalogue.unsupported`)."""


def resolve(args: list[bytes], table: dict[str, Command] = TABLE) -> Found:
    """The command (or subcommand) `args` names in `table`, as Redis's lookupCommand finds it.

    Raises Redis's unknown command / unknown subcommand error for a name in no Redis 7 command.
    Arity is not checked here: Redis checks it after authentication (`Command.arity_ok`).
    """
    name = args[0].lower().decode("utf-8", "replace")
    cmd = table.get(name)
    if cmd is None:
        if catalogue.is_redis_command(name):
            return name
        raise errors.unknown_command(args[0], args[1:])
    if cmd.subcommands is None or len(args) < 2:
        return cmd  # a container without its subcommand fails its arity check
    sub_name = args[1].lower().decode("utf-8", "replace")
    sub = cmd.subcommands.get(sub_name)
    if sub is not None:
        return sub
    if catalogue.is_redis_command(f"{name}|{sub_name}"):
        return f"{name}|{sub_name}"
    raise errors.unknown_subcommand(cmd.name, args[1])


def run(cmd: Command, ctx: Context, args: list[bytes]) -> Result:
    """Run a command found (and arity-checked) already: reply plus the ops it wants logged."""
    assert cmd.handler is not None, cmd.name
    try:
        return cmd.handler(ctx, args)
    except CommandError as error:
        return Result(error)


def dispatch(ctx: Context, args: list[bytes]) -> Result:
    """Find and run one stream command against the region's state, as the node does (Redis's
    name and arity checks, a Redis command we do not implement refused as unsupported): reply
    plus the ops it wants logged."""
    if not args:
        return Result(CommandError("ERR empty command"))
    try:
        found = resolve(args)
    except CommandError as error:
        return Result(error)
    if isinstance(found, str):
        return Result(catalogue.unsupported(found))
    if not found.arity_ok(len(args)):
        return Result(errors.wrong_arity(found.name))
    return run(found, ctx, args)
