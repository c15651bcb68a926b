"""The node's one command table, and name resolution: which command a request names.

`TABLE` holds every command the node serves: the stream commands (`streams.commands.table`,
each with its handler) and the commands the node runs itself (`BUILTINS`: connection, server,
transaction, cluster and CRDT admin commands, which act on the connection or on the node rather
than on the replicated state; the node binds their handlers with `bind`, which checks it binds
exactly these). Every row's arity, flags and key positions come from the catalogue
(`streams.commands.catalogue`).

`resolve` finds a request's command once, as Redis's lookupCommand does; the node then checks
authentication, arity and MULTI against the row and runs it without looking the name up again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from streams.commands import table as stream_commands
from streams.commands.base import Command, command, container
from streams.commands.table import Found


def _container(name: str, subs: str) -> Command:
    return container(name, [command(f"{name}|{sub}") for sub in subs.split()])


BUILTINS: dict[str, Command] = {
    c.name: c
    for c in [
        *(command(name) for name in "ping echo hello auth quit reset select".split()),
        *(command(name) for name in "multi exec discard watch unwatch info time".split()),
        _container("config", "get set resetstat rewrite help"),
        _container("slowlog", "get len reset help"),
        _container("latency", "doctor graph help histogram history latest reset"),
        _container("client", "id getname setname setinfo info list no-evict help"),
        _container("command", "count info docs list getkeys help"),
        _container(
            "cluster",
            "info myid nodes slots shards keyslot countkeysinslot getkeysinslot replicas slaves "
            "count-failure-reports help",
        ),
        *(command(name) for name in "readonly readwrite asking".split()),
        *(
            command(f"crdt.{name}")
            for name in "digest vector shards flush info clock fault snapshot".split()
        ),
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


PLAIN: dict[bytes, Command] = {
    spelled: cmd
    for name, cmd in TABLE.items()
    if cmd.subcommands is None
    for spelled in (name.encode(), name.upper().encode())
}
"""The commands without subcommands by their name as clients send it, all lower or all upper
case: `resolve` finds them without lowering and decoding the name (every request resolves)."""


def resolve(args: list[bytes]) -> Found:
    """The command (or subcommand) `args` names in the node's table, as Redis's lookupCommand
    finds it (`streams.commands.table.resolve`): a row, or the name of a Redis command we do not
    implement. Raises Redis's unknown command / subcommand error."""
    cmd = PLAIN.get(args[0])
    return cmd if cmd is not None else stream_commands.resolve(args, TABLE)


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
