"""The node's one command table, and name resolution: which command a request names.

`TABLE` holds every command the node serves: the stream commands (`streams.commands.table`,
each with its handler) and the commands the node runs itself (`BUILTINS`: connection, server,
transaction and CRDT admin commands, which act on the connection or on the node rather than on
the replicated state; the node binds their handlers with `bind`, which checks it binds exactly
these). Every row's arity, flags and key positions come from the catalogue
(`streams.commands.catalogue`).

`resolve` finds a request's command once, as Redis's lookupCommand does; the node then checks
authentication, arity and MULTI against the row and runs it without looking the name up again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from streams import errors
from streams.commands import table as stream_commands
from streams.commands.base import Command, command, container
from streams.commands.catalogue import is_redis_command


def _container(name: str, subs: str) -> Command:
    return container(name, [command(f"{name}|{sub}") for sub in subs.split()])


BUILTINS: dict[str, Command] = {
    c.name: c
    for c in [
        *(command(name) for name in "ping echo hello auth quit reset select".split()),
        *(command(name) for name in "multi exec discard watch unwatch info".split()),
        _container("config", "get set resetstat rewrite help"),
        _container("client", "id getname setname setinfo info list no-evict help"),
        _container("command", "count info docs list getkeys help"),
        *(command(f"crdt.{name}") for name in "flush info clock fault snapshot".split()),
    ]
}
"""The commands the node runs itself, in the order COMMAND lists them."""


def _table() -> dict[str, Command]:
    overlap = set(BUILTINS) & set(stream_commands.TABLE)
    if overlap:
        raise RuntimeError(f"commands both built in and in the stream table: {sorted(overlap)}")
    stream_commands.check(BUILTINS)
    return {**stream_commands.TABLE, **BUILTINS}


TABLE: dict[str, Command] = _table()

Found = Command | str
"""A row of `TABLE`, or the name (`a|b` for a subcommand) of a Redis 7 command we do not
implement (answered with `catalogue.unsupported`)."""


def resolve(args: list[bytes]) -> Found:
    """The command (or subcommand) `args` names, as Redis's lookupCommand finds it.

    Raises Redis's unknown command / unknown subcommand error for a name in no Redis 7 command.
    Arity is not checked here: Redis checks it after authentication (`Command.arity_ok`).
    """
    name = args[0].lower().decode("utf-8", "replace")
    cmd = TABLE.get(name)
    if cmd is None:
        if is_redis_command(name):
            return name
        raise errors.unknown_command(args[0], args[1:])
    if cmd.subcommands is None or len(args) < 2:
        return cmd  # a container without its subcommand fails its arity check
    sub_name = args[1].lower().decode("utf-8", "replace")
    sub = cmd.subcommands.get(sub_name)
    if sub is not None:
        return sub
    if is_redis_command(f"{name}|{sub_name}"):
        return f"{name}|{sub_name}"
    raise errors.unknown_subcommand(cmd.name, args[1])


def by_name(name: bytes) -> Command | None:
    """A command or `container|sub` by name (COMMAND INFO / DOCS arguments)."""
    top, _, sub = name.lower().decode("utf-8", "replace").partition("|")
    cmd = TABLE.get(top)
    if cmd is None or not sub:
        return cmd
    return None if cmd.subcommands is None else cmd.subcommands.get(sub)


def builtin_name(cmd: Command) -> str | None:
    """The `BUILTINS` entry a row belongs to (a subcommand: its container), else None."""
    top = cmd.name.partition("|")[0]
    return top if top in BUILTINS else None


H = TypeVar("H")


def bind(handlers: Mapping[str, H]) -> dict[str, H]:
    """The handlers of the built-in commands, checked to be exactly one for each of them."""
    missing = set(BUILTINS) - set(handlers)
    unknown = set(handlers) - set(BUILTINS)
    if missing or unknown:
        raise RuntimeError(
            f"built-in handlers disagree with router.BUILTINS: missing {sorted(missing)}, "
            f"unknown {sorted(unknown)}"
        )
    return dict(handlers)
