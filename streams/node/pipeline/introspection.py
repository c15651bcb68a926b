"""COMMAND: the node's command table described as Redis 7 describes its own.

Every entry comes from the catalogue (`streams.commands.catalogue`): Redis's own metadata for
Redis's commands, ours for the CRDT.* commands and CLIENT SETINFO. Replies follow redis-server
7.0.15 byte for byte where the same reply makes sense (tests/unit/test_connection_commands.py).
Deliberate differences: no key specifications, and arrays where RESP3 would use sets.
"""

from __future__ import annotations

from streams import errors
from streams.commands.base import Command
from streams.commands.glob import Pattern
from streams.commands.keyspec import getkeys
from streams.errors import CommandError
from streams.node.pipeline import router
from streams.reply import Map, Reply, Status

COMMAND_HELP = [
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "HELP",
    "    Prints this help.",
]


def command_entry(cmd: Command) -> Reply:
    """One COMMAND INFO entry in Redis 7's ten-field shape (key specs are not given)."""
    spec = cmd.spec
    first, last, step = spec.keys
    subs = [] if cmd.subcommands is None else [command_entry(s) for s in cmd.subcommands.values()]
    return [
        spec.name.encode(),
        spec.arity,
        [Status(f) for f in spec.flags],
        first,
        last,
        step,
        [Status(a) for a in spec.acl],
        [t.encode() for t in spec.tips],
        [],
        subs,
    ]


def command_docs(cmd: Command) -> Reply:
    spec = cmd.spec
    pairs: list[tuple[Reply, Reply]] = [
        (b"summary", spec.summary.encode()),
        (b"since", spec.since.encode()),
        (b"group", spec.group.encode()),
        (b"complexity", spec.complexity.encode()),
    ]
    if cmd.subcommands:
        pairs.append(
            (
                b"subcommands",
                Map(tuple((s.name.encode(), command_docs(s)) for s in cmd.subcommands.values())),
            )
        )
    return Map(tuple(pairs))


def _all_names(cmds: list[Command]) -> list[tuple[Command, str]]:
    out: list[tuple[Command, str]] = []
    for cmd in cmds:
        out.append((cmd, cmd.name))
        for sub in (cmd.subcommands or {}).values():
            out.append((sub, sub.name))
    return out


def command(args: list[bytes]) -> Reply:
    cmds = list(router.TABLE.values())
    if len(args) == 1:
        return [command_entry(c) for c in cmds]
    sub = args[1].lower()
    if sub == b"count":
        return len(cmds)
    if sub == b"info":
        if len(args) == 2:
            return [command_entry(c) for c in cmds]
        return [
            None if (c := router.by_name(name)) is None else command_entry(c) for name in args[2:]
        ]
    if sub == b"docs":
        chosen = cmds if len(args) == 2 else [c for n in args[2:] if (c := router.by_name(n))]
        return Map(tuple((c.name.encode(), command_docs(c)) for c in chosen))
    if sub == b"list":
        return _command_list(args, cmds)
    if sub == b"getkeys":
        return _getkeys(args[2:])
    return [Status(line) for line in COMMAND_HELP]


def _command_list(args: list[bytes], cmds: list[Command]) -> Reply:
    names = _all_names(cmds)
    if len(args) == 2:
        return [n.encode() for _, n in names]
    if len(args) != 5 or args[2].lower() != b"filterby":
        raise CommandError(errors.SYNTAX)
    kind, value = args[3].lower(), args[4]
    if kind == b"module":
        return []
    if kind == b"pattern":
        pattern = Pattern(value.lower())
        return [n.encode() for _, n in names if pattern.match(n.encode())]
    if kind == b"aclcat":
        wanted = "@" + value.lower().decode("utf-8", "replace")
        found: list[Reply] = []
        for cmd, name in names:
            if wanted in cmd.spec.acl:
                found.append(name.encode())
        return found
    raise CommandError(errors.SYNTAX)


def _getkeys(full: list[bytes]) -> Reply:
    """COMMAND GETKEYS: the keys as Redis's key specs find them (`keyspec.getkeys`), which is what
    redis-py's RedisCluster routes XREAD / XREADGROUP by."""
    try:
        cmd = router.resolve(full)
    except CommandError:
        raise CommandError(errors.GETKEYS_INVALID_COMMAND) from None
    name = cmd if isinstance(cmd, str) else cmd.name
    return list[Reply](getkeys(name, full))
