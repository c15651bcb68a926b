"""Connection-level commands a Redis client sends besides data commands (PING, HELLO, CLIENT,
SELECT, QUIT, COMMAND, INFO): enough for redis-py and redis-cli to connect and work.

They act on the connection's `Session`, not on the replicated state, so they live apart from
`streams.commands`.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable

from streams import REDIS_COMPAT_VERSION, errors
from streams.commands.base import parse_int
from streams.commands.reply import OK, Map, Reply, Status
from streams.commands.table import TABLE
from streams.errors import CommandError
from streams.resp.server import Session

InfoSource = Callable[[], dict[str, dict[str, object]]]


def _arity(
    name: str, args: list[bytes], exact: int | None = None, least: int | None = None
) -> None:
    if (exact is not None and len(args) != exact) or (least is not None and len(args) < least):
        raise errors.wrong_arity(name)


def ping(session: Session, args: list[bytes]) -> Reply:
    _arity("ping", args, least=1)
    if len(args) > 2:
        raise errors.wrong_arity("ping")
    return args[1] if len(args) == 2 else Status("PONG")


def echo(session: Session, args: list[bytes]) -> Reply:
    _arity("echo", args, exact=2)
    return args[1]


def hello(session: Session, args: list[bytes], server_info: dict[str, object]) -> Reply:
    if len(args) >= 2:
        try:
            version = parse_int(args[1])
        except CommandError:
            raise CommandError("ERR Protocol version is not an integer or out of range") from None
        if version not in (2, 3):
            raise CommandError("NOPROTO unsupported protocol version")
        i = 2
        while i < len(args):
            opt = args[i].lower()
            if opt == b"setname" and i + 1 < len(args):
                session.name = args[i + 1]
                i += 2
            elif opt == b"auth" and i + 2 < len(args):
                i += 3
            else:
                raise CommandError(errors.SYNTAX)
        session.proto = version
    pairs: list[tuple[Reply, Reply]] = [
        (b"server", b"redis"),
        (b"version", REDIS_COMPAT_VERSION.encode()),
        (b"proto", session.proto),
        (b"id", session.id),
        (b"mode", b"standalone"),
        (b"role", b"master"),
        (b"modules", []),
    ]
    return Map(tuple(pairs))


def client(session: Session, args: list[bytes]) -> Reply:
    _arity("client", args, least=2)
    sub = args[1].lower()
    if sub == b"setname" and len(args) == 3:
        session.name = args[2] or None
        return OK
    if sub == b"getname" and len(args) == 2:
        return session.name
    if sub == b"id" and len(args) == 2:
        return session.id
    if sub == b"setinfo" and len(args) == 4:
        return OK
    raise errors.unknown_subcommand("client", args[1])


def select(session: Session, args: list[bytes]) -> Reply:
    _arity("select", args, exact=2)
    db = parse_int(args[1])
    if db != 0:
        raise CommandError("ERR DB index is out of range")
    return OK


def quit_(session: Session, args: list[bytes]) -> Reply:
    session.closing = True
    return OK


def command_info(session: Session, args: list[bytes]) -> Reply:
    if len(args) >= 2 and args[1].lower() == b"count":
        return len(TABLE)
    return []


def info(session: Session, args: list[bytes], source: InfoSource) -> Reply:
    sections = source()
    wanted = {a.lower().decode() for a in args[1:]} - {"all", "everything", "default"}
    lines: list[str] = []
    for name, values in sections.items():
        if wanted and name.lower() not in wanted:
            continue
        lines.append(f"# {name.capitalize()}")
        lines.extend(f"{k}:{v}" for k, v in values.items())
        lines.append("")
    return "\r\n".join(lines).encode()


def server_section() -> dict[str, object]:
    return {
        "redis_version": REDIS_COMPAT_VERSION,
        "redis_mode": "standalone",
        "os": platform.system(),
        "arch_bits": 64,
        "process_id": os.getpid(),
        "cluster_enabled": 0,
    }
