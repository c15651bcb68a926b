"""The connection commands a Redis client sends besides data commands: PING, ECHO, HELLO, AUTH
(`auth`), SELECT, QUIT, RESET, and TIME (a server command, used by clients the same way).
CLIENT is in `clients`, COMMAND in `introspection`, INFO in `info`, CONFIG in `settings`,
MULTI / EXEC in `transactions`; which of them a request names is decided once, by `router`.

They act on the connection's `Client` record, not on the replicated state, so they live apart
from `streams.commands`. Replies follow redis-server 7.0.15 byte for byte (checked by
tests/unit/test_connection_commands.py against a real redis-server).
"""

from __future__ import annotations

from streams import REDIS_COMPAT_VERSION, errors
from streams.commands.base import parse_int
from streams.errors import CommandError
from streams.node.pipeline import auth, introspection
from streams.node.pipeline.clients import Client, Clients, client, set_name
from streams.node.pipeline.dispatch import Builtin, sync
from streams.reply import OK, Map, Reply, Status


def ping(client: Client, args: list[bytes]) -> Reply:
    if len(args) > 2:
        raise errors.wrong_arity("ping")
    return args[1] if len(args) == 2 else Status("PONG")


def echo(client: Client, args: list[bytes]) -> Reply:
    return args[1]


def hello(client: Client, args: list[bytes], config: auth.AuthConfig) -> Reply:
    """HELLO [protover [AUTH username password] [SETNAME clientname]] (Redis 7.0's helloCommand:
    parse everything, authenticate, require authentication, set the name, switch protocol)."""
    version = 0
    if len(args) >= 2:
        version = parse_int(args[1], errors.HELLO_BAD_PROTO)
        if version not in (2, 3):
            raise CommandError(errors.NOPROTO)
    credentials: tuple[bytes, bytes] | None = None
    name: bytes | None = None
    i = 2
    while i < len(args):
        more = len(args) - 1 - i
        opt = args[i].lower()
        if opt == b"auth" and more >= 2:
            credentials = (args[i + 1], args[i + 2])
            i += 3
        elif opt == b"setname" and more >= 1:
            name = args[i + 1]
            i += 2
        else:
            raise CommandError(
                errors.HELLO_SYNTAX_FMT.format(opt=args[i].decode("utf-8", "replace"))
            )
    if credentials is not None:
        auth.login(client, config, *credentials)
    if not client.authenticated:
        raise CommandError(errors.NOAUTH_HELLO)
    if name is not None:
        set_name(client, name)
    if version:
        client.session.proto = version
    return Map(
        (
            (b"server", b"redis"),
            (b"version", REDIS_COMPAT_VERSION.encode()),
            (b"proto", client.session.proto),
            (b"id", client.id),
            (b"mode", b"standalone"),
            (b"role", b"master"),
            (b"modules", []),
        )
    )


def server_time(now_s: float) -> Reply:
    """TIME: the node's clock as Redis answers it, seconds and microseconds as bulk strings (a
    read of this node's clock only; no op carries it)."""
    micros = int(now_s * 1_000_000)
    return [b"%d" % (micros // 1_000_000), b"%d" % (micros % 1_000_000)]


def select(client: Client, args: list[bytes]) -> Reply:
    if parse_int(args[1]) != 0:
        raise CommandError(errors.DB_OUT_OF_RANGE)
    return OK


def quit_(client: Client, args: list[bytes]) -> Reply:
    client.session.closing = True
    return OK


def reset(client: Client, config: auth.AuthConfig) -> Reply:
    """RESET: the connection as new (protocol 2, no name, no transaction, authenticated only if
    no password is configured)."""
    client.session.proto = 2
    client.name = None
    client.transaction = None
    client.no_evict = False
    auth.start(client, config)
    return Status("RESET")


def builtins(config: auth.AuthConfig, clients: Clients) -> dict[str, Builtin]:
    """The connection commands' handlers, bound as the request pipeline calls them."""
    return {
        "ping": sync(ping),
        "echo": sync(echo),
        "hello": sync(lambda c, a: hello(c, a, config)),
        "auth": sync(lambda c, a: auth.auth(c, a, config)),
        "client": sync(lambda c, a: client(c, a, clients.live())),
        "select": sync(select),
        "quit": sync(quit_),
        "reset": sync(lambda c, a: reset(c, config)),
        "command": sync(lambda c, a: introspection.command(a)),
    }
