"""Connection-level commands a Redis client sends besides data commands: PING, ECHO, HELLO, AUTH,
CLIENT, SELECT, QUIT, RESET, COMMAND, INFO, CONFIG (MULTI/EXEC live in `transactions`).

They act on the connection's `Session` and on node-wide settings, not on the replicated state, so
they live apart from `streams.commands`. `BUILTINS` describes them as Redis's command table does
(arity, subcommands, key positions), so the node checks names and arities of every command in one
place (`find`), COMMAND can describe them, and MULTI can refuse a malformed one at queue time.

Replies follow redis-server 7.0.15 byte for byte where the same reply makes sense (checked by
tests/unit/test_connection_commands.py against a real redis-server). Deliberate differences:
CLIENT SETINFO (Redis 7.2) is accepted; CLIENT LIST / INFO report no addresses, fds or buffer
sizes; COMMAND gives no key specifications and arrays where RESP3 would use sets; INFO and CLIENT
LIST / INFO are bulk strings in RESP3 too (Redis: verbatim strings); `databases` is 1 (only
SELECT 0 works); CONFIG GET requirepass is always empty; CONFIG SET accepts the `HARMLESS`
parameters (stored, without effect) and any parameter set to its current value, and refuses to
change the others.
"""

from __future__ import annotations

import os
import platform
import struct
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from streams import REDIS_COMPAT_VERSION, __version__, errors
from streams.commands.base import Command, parse_int
from streams.commands.glob import Pattern
from streams.commands.table import TABLE
from streams.commands.unsupported import META, is_redis_command
from streams.crdt.entries import set_node_limits
from streams.errors import CommandError
from streams.node import auth
from streams.reply import OK, Map, Reply, Status
from streams.resp.server import Session

# --- the builtin command table -------------------------------------------------------------------


def _cmd(
    name: str,
    arity: int,
    flags: str = "",
    subs: list[Command] | None = None,
    keys: tuple[int, int, int] = (0, 0, 0),
) -> Command:
    return Command(
        name,
        arity,
        frozenset(flags.split()),
        None,
        None if subs is None else {s.name.split("|")[1]: s for s in subs},
        *keys,
    )


BUILTINS: dict[str, Command] = {
    c.name: c
    for c in [
        _cmd("ping", -1),
        _cmd("echo", 2),
        _cmd("hello", -1, "no_auth"),
        _cmd("auth", -2, "no_auth"),
        _cmd("quit", -1, "no_auth"),
        _cmd("reset", 1, "no_auth"),
        _cmd("select", 2),
        _cmd("multi", 1),
        _cmd("exec", 1),
        _cmd("discard", 1),
        _cmd("watch", -2, keys=(1, -1, 1)),
        _cmd("unwatch", 1),
        _cmd("info", -1),
        _cmd(
            "config",
            -2,
            subs=[
                _cmd("config|get", -3),
                _cmd("config|set", -4),
                _cmd("config|resetstat", 2),
                _cmd("config|rewrite", 2),
                _cmd("config|help", 2),
            ],
        ),
        _cmd(
            "client",
            -2,
            subs=[
                _cmd("client|id", 2),
                _cmd("client|getname", 2),
                _cmd("client|setname", 3),
                _cmd("client|setinfo", 4),
                _cmd("client|info", 2),
                _cmd("client|list", -2),
                _cmd("client|no-evict", 3),
                _cmd("client|help", 2),
            ],
        ),
        _cmd(
            "command",
            -1,
            subs=[
                _cmd("command|count", 2),
                _cmd("command|info", -2),
                _cmd("command|docs", -2),
                _cmd("command|list", -2),
                _cmd("command|getkeys", -4),
                _cmd("command|help", 2),
            ],
        ),
        _cmd("crdt.flush", 1, "admin no_multi"),
        _cmd("crdt.info", 1, "admin"),
        _cmd("crdt.clock", -1, "admin"),
        _cmd("crdt.fault", 3, "admin no_multi"),
        _cmd("crdt.snapshot", 1, "admin no_multi"),
    ]
}

NO_AUTH = frozenset(n.encode() for n, c in BUILTINS.items() if "no_auth" in c.flags)
"""Commands an unauthenticated connection may send (Redis's `no-auth` flag)."""


def find(args: list[bytes]) -> Command | str:
    """The command (or subcommand) `args` names, as Redis's lookupCommand finds it.

    Returns our table entry (builtin or `streams.commands.table.TABLE`), or the lower-case name
    (`a|b` for a subcommand) of a Redis 7 command we do not implement. Raises Redis's unknown
    command / unknown subcommand error for anything else. Arity is not checked here: Redis checks
    it after authentication (`Command.arity_ok`).
    """
    name = args[0].lower().decode("utf-8", "replace")
    cmd = BUILTINS.get(name) or TABLE.get(name)
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


def every_command() -> list[Command]:
    """Every top-level command this node serves, in a stable order."""
    return list(TABLE.values()) + [c for n, c in BUILTINS.items() if n not in TABLE]


# --- per-connection bookkeeping ------------------------------------------------------------------

CLIENT_KEY = "client"


@dataclass
class ClientInfo:
    """What CLIENT LIST / INFO report about a connection (kept in `session.extra`)."""

    created: float = field(default_factory=time.monotonic)
    last_seen: float = field(default_factory=time.monotonic)
    last_cmd: str = "NULL"
    lib_name: bytes = b""
    lib_ver: bytes = b""
    no_evict: bool = False


def client_info(session: Session) -> ClientInfo:
    info = session.extra.get(CLIENT_KEY)
    if not isinstance(info, ClientInfo):
        info = session.extra[CLIENT_KEY] = ClientInfo()
    return info


def _valid_name(name: bytes) -> bool:
    """Redis's validateClientAttr: printable ASCII without spaces (33..126)."""
    return all(33 <= c <= 126 for c in name)


def set_name(session: Session, name: bytes) -> None:
    if not _valid_name(name):
        raise CommandError(errors.BAD_CLIENT_NAME)
    session.name = name or None


# --- PING, ECHO, HELLO, SELECT, QUIT, RESET ------------------------------------------------------


def ping(session: Session, args: list[bytes]) -> Reply:
    if len(args) > 2:
        raise errors.wrong_arity("ping")
    return args[1] if len(args) == 2 else Status("PONG")


def echo(session: Session, args: list[bytes]) -> Reply:
    return args[1]


def hello(session: Session, args: list[bytes], config: auth.AuthConfig) -> Reply:
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
        auth.login(session, config, *credentials)
    if not session.authenticated:
        raise CommandError(errors.NOAUTH_HELLO)
    if name is not None:
        set_name(session, name)
    if version:
        session.proto = version
    return Map(
        (
            (b"server", b"redis"),
            (b"version", REDIS_COMPAT_VERSION.encode()),
            (b"proto", session.proto),
            (b"id", session.id),
            (b"mode", b"standalone"),
            (b"role", b"master"),
            (b"modules", []),
        )
    )


def select(session: Session, args: list[bytes]) -> Reply:
    if parse_int(args[1]) != 0:
        raise CommandError(errors.DB_OUT_OF_RANGE)
    return OK


def quit_(session: Session, args: list[bytes]) -> Reply:
    session.closing = True
    return OK


def reset(session: Session, config: auth.AuthConfig) -> Reply:
    """RESET: the connection as new (protocol 2, no name, no transaction, authenticated only if
    no password is configured)."""
    session.proto = 2
    session.name = None
    info = client_info(session)
    info.no_evict = False
    auth.start(session, config)
    return Status("RESET")


# --- CLIENT ---------------------------------------------------------------------------------------

CLIENT_HELP = [
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Set client library name or version (as Redis 7.2 does).",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "HELP",
    "    Prints this help.",
]


Depth = Callable[[Session], int]
"""A connection's transaction depth for CLIENT LIST's `multi` field (-1: not in MULTI)."""


def client(
    session: Session, args: list[bytes], clients: Iterable[Session], depth: Depth = lambda s: -1
) -> Reply:
    sub = args[1].lower()
    if sub == b"id":
        return session.id
    if sub == b"getname":
        return session.name
    if sub == b"setname":
        set_name(session, args[2])
        return OK
    if sub == b"setinfo":
        attr = args[2].lower()
        if attr not in (b"lib-name", b"lib-ver"):
            raise CommandError(f"ERR Unrecognized option '{args[2].decode('utf-8', 'replace')}'")
        if not _valid_name(args[3]):
            raise CommandError(
                f"ERR {attr.decode()} cannot contain spaces, newlines or special characters."
            )
        info = client_info(session)
        if attr == b"lib-name":
            info.lib_name = args[3]
        else:
            info.lib_ver = args[3]
        return OK
    if sub == b"no-evict":
        mode = args[2].lower()
        if mode not in (b"on", b"off"):
            raise CommandError(errors.SYNTAX)
        client_info(session).no_evict = mode == b"on"
        return OK
    if sub == b"info":
        return client_line(session, depth(session)).encode()
    if sub == b"list":
        return _client_list(session, args, clients, depth)
    return [Status(line) for line in CLIENT_HELP]


def _client_list(
    session: Session, args: list[bytes], clients: Iterable[Session], depth: Depth
) -> Reply:
    wanted_ids: set[int] | None = None
    normal = True
    i = 2
    while i < len(args):
        opt = args[i].lower()
        if opt == b"type" and i + 1 < len(args):
            kind = args[i + 1].lower()
            if kind not in (b"normal", b"master", b"replica", b"slave", b"pubsub"):
                raise CommandError(
                    f"ERR Unknown client type '{args[i + 1].decode('utf-8', 'replace')}'"
                )
            normal = kind == b"normal"
            i += 2
        elif opt == b"id" and i + 1 < len(args):
            wanted_ids = set()
            for raw in args[i + 1 :]:
                try:
                    client_id = parse_int(raw)
                except CommandError:
                    client_id = 0
                if client_id <= 0:
                    raise CommandError("ERR Invalid client ID")
                wanted_ids.add(client_id)
            i = len(args)
        else:
            raise CommandError(errors.SYNTAX)
    if not normal:
        return b""
    lines = [
        client_line(s, depth(s), current=s is session)
        for s in sorted(clients, key=lambda s: s.id)
        if wanted_ids is None or s.id in wanted_ids
    ]
    return "".join(lines).encode()


def client_line(session: Session, transaction_depth: int = -1, current: bool = True) -> str:
    """One CLIENT LIST line, Redis 7.0's fields (memory and buffer fields are 0: not tracked)."""
    info = client_info(session)
    now = time.monotonic()
    addr = session.extra.get("addr", "")
    laddr = session.extra.get("laddr", "")
    flags = ("x" if transaction_depth >= 0 else "") + ("e" if info.no_evict else "") or "N"
    fields = [
        f"id={session.id}",
        f"addr={addr}",
        f"laddr={laddr}",
        "fd=-1",
        f"name={(session.name or b'').decode('utf-8', 'replace')}",
        f"age={int(now - info.created)}",
        f"idle={0 if current else int(now - info.last_seen)}",
        f"flags={flags}",
        "db=0",
        "sub=0",
        "psub=0",
        "ssub=0",
        f"multi={transaction_depth}",
        "qbuf=0",
        "qbuf-free=0",
        "argv-mem=0",
        "multi-mem=0",
        "rbs=0",
        "rbp=0",
        "obl=0",
        "oll=0",
        "omem=0",
        "tot-mem=0",
        "events=r",
        f"cmd={info.last_cmd}",
        f"user={auth.user_of(session).decode('utf-8', 'replace')}",
        "redir=-1",
        f"resp={session.proto}",
        f"lib-name={info.lib_name.decode('utf-8', 'replace')}",
        f"lib-ver={info.lib_ver.decode('utf-8', 'replace')}",
    ]
    return " ".join(fields) + "\n"


# --- COMMAND --------------------------------------------------------------------------------------

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

OWN_DOCS: dict[str, tuple[str, str]] = {
    "crdt.digest": ("Hex digest of the region's replicated state", "O(N)"),
    "crdt.vector": ("Applied op sequence per origin region", "O(regions)"),
    "crdt.info": ("Region, ID mode, replication lag per origin and op-log positions", "O(1)"),
    "crdt.flush": ("Log held-back XACK effects and local ops now", "O(groups)"),
    "crdt.clock": ("Pin or release the node's clock (with --debug-clock only)", "O(1)"),
    "crdt.fault": ("Fail the next N op-log appends (with --debug-faults only)", "O(1)"),
    "crdt.snapshot": ("Write a snapshot of the region's state to <region>.snapshot now", "O(N)"),
    "client|setinfo": ("Set client library name or version (Redis 7.2)", "O(1)"),
}


def _lookup_name(name: bytes) -> Command | None:
    """A command or `container|sub` by name (COMMAND INFO / DOCS arguments)."""
    top, _, sub = name.lower().decode("utf-8", "replace").partition("|")
    cmd = BUILTINS.get(top) or TABLE.get(top)
    if cmd is None or not sub:
        return cmd
    return None if cmd.subcommands is None else cmd.subcommands.get(sub)


def _own_flags(cmd: Command) -> tuple[list[str], list[str]]:
    flags = sorted(f for f in cmd.flags if f in ("write", "readonly", "admin", "blocking"))
    acl = ["@" + ("write" if "write" in flags else "read" if "readonly" in flags else "slow")]
    if "admin" in flags:
        acl += ["@admin", "@dangerous"]
    return flags, acl


def command_entry(cmd: Command) -> Reply:
    """One COMMAND INFO entry in Redis 7's ten-field shape (key specs are not given)."""
    meta = META.get(cmd.name)
    if meta is not None:
        flags, acl, tips = meta.flags.split(), meta.acl.split(), meta.tips.split()
    else:
        (flags, acl), tips = _own_flags(cmd), []
    subs = [] if cmd.subcommands is None else [command_entry(s) for s in cmd.subcommands.values()]
    return [
        cmd.name.encode(),
        cmd.arity,
        [Status(f) for f in flags],
        cmd.first_key,
        cmd.last_key,
        cmd.key_step,
        [Status(a) for a in acl],
        [t.encode() for t in tips],
        [],
        subs,
    ]


def command_docs(cmd: Command) -> Reply:
    meta = META.get(cmd.name)
    if meta is not None:
        summary, since, group, complexity = meta.summary, meta.since, meta.group, meta.complexity
    else:
        summary, complexity = OWN_DOCS.get(cmd.name, ("", "O(1)"))
        since, group = __version__, "server"
    pairs: list[tuple[Reply, Reply]] = [
        (b"summary", summary.encode()),
        (b"since", since.encode()),
        (b"group", group.encode()),
        (b"complexity", complexity.encode()),
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


def command(session: Session, args: list[bytes]) -> Reply:
    cmds = every_command()
    if len(args) == 1:
        return [command_entry(c) for c in cmds]
    sub = args[1].lower()
    if sub == b"count":
        return len(cmds)
    if sub == b"info":
        if len(args) == 2:
            return [command_entry(c) for c in cmds]
        return [
            None if (c := _lookup_name(name)) is None else command_entry(c) for name in args[2:]
        ]
    if sub == b"docs":
        chosen = cmds if len(args) == 2 else [c for n in args[2:] if (c := _lookup_name(n))]
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
            meta = META.get(name)
            acl = meta.acl.split() if meta is not None else _own_flags(cmd)[1]
            if wanted in acl:
                found.append(name.encode())
        return found
    raise CommandError(errors.SYNTAX)


def _getkeys(full: list[bytes]) -> Reply:
    try:
        cmd = find(full)
    except CommandError:
        raise CommandError("ERR Invalid command specified") from None
    if isinstance(cmd, str):
        raise CommandError("ERR Invalid command specified")
    if not cmd.arity_ok(len(full)):
        raise CommandError("ERR Invalid number of arguments specified for command")
    keys: list[Reply] = []
    if cmd.name in ("xread", "xreadgroup"):
        lowered = [a.lower() for a in full]
        if b"streams" in lowered:
            start = lowered.index(b"streams") + 1
            keys = list(full[start : start + (len(full) - start) // 2])
    elif cmd.first_key > 0:
        last = cmd.last_key if cmd.last_key >= 0 else len(full) + cmd.last_key
        keys = list(full[cmd.first_key : last + 1 : max(cmd.key_step, 1)])
    if not keys:
        raise CommandError("ERR The command has no key arguments")
    return keys


# --- INFO -----------------------------------------------------------------------------------------

SECTION_TITLES = {
    "server": "Server",
    "clients": "Clients",
    "memory": "Memory",
    "persistence": "Persistence",
    "stats": "Stats",
    "replication": "Replication",
    "cpu": "CPU",
    "modules": "Modules",
    "errorstats": "Errorstats",
    "cluster": "Cluster",
    "keyspace": "Keyspace",
}


def info(args: list[bytes], sections: dict[str, dict[str, object]]) -> Reply:
    """INFO [section ...]: Redis's text (`# Title` then `key:value` lines, CRLF; sections
    separated by an empty line). `all`, `everything` and `default` give every section."""
    wanted = {a.lower().decode("utf-8", "replace") for a in args[1:]}
    every = not wanted or wanted & {"all", "everything", "default"}
    parts: list[str] = []
    for name, values in sections.items():
        if not every and name not in wanted:
            continue
        title = SECTION_TITLES.get(name, name.capitalize())
        parts.append(f"# {title}\r\n" + "".join(f"{k}:{v}\r\n" for k, v in values.items()))
    return "\r\n".join(parts).encode()


def human_bytes(n: int) -> str:
    """Redis's bytesToHuman: B, K, M, G with two decimals."""
    if n < 1024:
        return f"{n}B"
    for unit, size in (("K", 1024), ("M", 1024**2), ("G", 1024**3), ("T", 1024**4)):
        if n < size * 1024 or unit == "T":
            return f"{n / size:.2f}{unit}"
    return f"{n}B"  # pragma: no cover


def rss_bytes() -> int:
    """The process's resident set size (Linux /proc, else the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):  # pragma: no cover
        return 0
    return int(peak) * (1 if platform.system() == "Darwin" else 1024)


def server_section(port: int, started: float, run_id: str) -> dict[str, object]:
    uname = platform.uname()
    uptime = int(time.time() - started)
    return {
        "redis_version": REDIS_COMPAT_VERSION,
        "redis_git_sha1": "00000000",
        "redis_git_dirty": 0,
        "redis_mode": "standalone",
        "os": f"{uname.system} {uname.release} {uname.machine}",
        "arch_bits": struct.calcsize("P") * 8,
        "multiplexing_api": "asyncio",
        "process_id": os.getpid(),
        "process_supervised": "no",
        "run_id": run_id,
        "tcp_port": port,
        "server_time_usec": int(time.time() * 1_000_000),
        "uptime_in_seconds": uptime,
        "uptime_in_days": uptime // 86400,
        "hz": 10,
        "configured_hz": 10,
        "executable": sys.executable,
        "config_file": "",
        "streams_version": __version__,
    }


# --- CONFIG ---------------------------------------------------------------------------------------

CONFIG_HELP = [
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
]

_INT_MAX = 2**63 - 1
_ENUMS = {
    "appendfsync": ("everysec", "always", "no"),
    "maxmemory-policy": (
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "noeviction",
    ),
    "loglevel": ("debug", "verbose", "notice", "warning"),
    "lazyfree-lazy-user-flush": ("yes", "no"),
}
_INTS = {
    "timeout": (0, _INT_MAX),
    "tcp-keepalive": (0, 2**31 - 1),
    "hz": (0, 2**31 - 1),
    "slowlog-log-slower-than": (-1, _INT_MAX),
    "slowlog-max-len": (0, _INT_MAX),
    "latency-monitor-threshold": (0, _INT_MAX),
}
_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1024,
    "m": 1000**2,
    "mb": 1024**2,
    "g": 1000**3,
    "gb": 1024**3,
}
_STREAM_NODE = {"stream-node-max-bytes": True, "stream-node-max-entries": False}
"""Parameters that shape stream nodes (entry blocks): name -> is a memory value. They take
effect for nodes filled from now on, as in Redis (`streams.crdt.entries.set_node_limits`)."""
HARMLESS = frozenset(_ENUMS) | frozenset(_INTS) | {"save"}
"""Parameters CONFIG SET accepts and remembers (CONFIG GET shows the new value) although they
change nothing here: persistence is the Kafka op log, nothing is evicted, idle clients are not
timed out, and there is no slow log."""


def default_settings(port: int, bind: str) -> dict[str, str]:
    """What CONFIG GET shows. `requirepass` is always empty: every authenticated user may run
    CONFIG here (there are no ACL rules), so the password is never shown (Redis shows it)."""
    return {
        "bind": bind,
        "port": str(port),
        "requirepass": "",
        "databases": "1",
        "save": "",
        "appendonly": "no",
        "appendfsync": "everysec",
        "maxmemory": "0",
        "maxmemory-policy": "noeviction",
        "stream-node-max-entries": "100",
        "stream-node-max-bytes": "4096",
        "timeout": "0",
        "tcp-keepalive": "300",
        "maxclients": "10000",
        "loglevel": "notice",
        "hz": "10",
        "slowlog-log-slower-than": "10000",
        "slowlog-max-len": "128",
        "latency-monitor-threshold": "0",
        "notify-keyspace-events": "",
        "lazyfree-lazy-user-flush": "no",
        "protected-mode": "no",
        "cluster-enabled": "no",
        "replica-read-only": "yes",
        "proto-max-bulk-len": "536870912",
        "client-output-buffer-limit": (
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        ),
        "busy-reply-threshold": "5000",
        "lua-time-limit": "5000",
        "io-threads": "1",
        "daemonize": "no",
        "dir": os.getcwd(),
        "dbfilename": "dump.rdb",
        "logfile": "",
    }


class Settings:
    """The node's CONFIG parameters (values as strings, Redis's spelling)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def get(self, patterns: list[bytes]) -> Reply:
        """The parameters matching any pattern (case-insensitive), in the table's order, each
        once; an exact name is echoed as typed, as Redis does."""
        shown: dict[str, bytes] = {}
        for raw in patterns:
            text = raw.decode("utf-8", "replace")
            if not any(c in text for c in "*?["):
                if text.lower() in self.values:
                    shown.setdefault(text.lower(), raw)
                continue
            pattern = Pattern(raw.lower())
            for name in self.values:
                if pattern.match(name.encode()):
                    shown.setdefault(name, name.encode())
        return Map(
            tuple(
                (shown[name], value.encode())
                for name, value in self.values.items()
                if name in shown
            )
        )

    def set(self, args: list[bytes]) -> Reply:
        if len(args) % 2:
            raise CommandError(errors.SYNTAX)
        changes: dict[str, str] = {}
        for raw_name, raw_value in zip(args[::2], args[1::2], strict=True):
            name = raw_name.decode("utf-8", "replace").lower()
            if name not in self.values:
                raise CommandError(
                    errors.CONFIG_SET_UNKNOWN_FMT.format(name=raw_name.decode("utf-8", "replace"))
                )
            if name in changes:
                raise _set_failed(name, "duplicate parameter")
            changes[name] = self._validate(name, raw_value.decode("utf-8", "replace"))
        self.values.update(changes)
        if any(name in _STREAM_NODE for name in changes):
            set_node_limits(
                max_bytes=int(self.values["stream-node-max-bytes"]),
                max_entries=int(self.values["stream-node-max-entries"]),
            )
        return OK

    def _validate(self, name: str, value: str) -> str:
        if name in _ENUMS:
            if value.lower() not in _ENUMS[name]:
                if _ENUMS[name] == ("yes", "no"):
                    raise _set_failed(name, "argument must be 'yes' or 'no'")
                raise _set_failed(
                    name, "argument(s) must be one of the following: " + ", ".join(_ENUMS[name])
                )
            return value.lower()
        if name in _INTS:
            try:
                number = parse_int(value.encode())
            except CommandError:
                raise _set_failed(name, "argument couldn't be parsed into an integer") from None
            low, high = _INTS[name]
            if not low <= number <= high:
                raise _set_failed(name, f"argument must be between {low} and {high} inclusive")
            if name == "hz":
                number = min(max(number, 1), 500)
            return str(number)
        if name in _STREAM_NODE:
            return _stream_node_value(name, value, memory=_STREAM_NODE[name])
        if name == "save":
            parts = value.split()
            if len(parts) % 2 or not all(p.isdigit() for p in parts):
                raise _set_failed(name, "Invalid save parameters")
            return " ".join(parts)
        if value == self.values[name]:
            return value
        raise _set_failed(name, "not changeable in this database")


def _stream_node_value(name: str, value: str, *, memory: bool) -> str:
    """Redis's checks for stream-node-max-bytes (a memory value: 4kb, 1mb...) and
    stream-node-max-entries (an integer), both 0..LONG_MAX."""
    number: int | None = None
    if memory:
        text = value.lower()
        digits = text.rstrip("kmgb")
        unit = text[len(digits) :]
        if digits.isdigit() and digits.isascii() and unit in _MEMORY_UNITS:
            number = int(digits) * _MEMORY_UNITS[unit]
        if number is None:
            raise _set_failed(name, "argument must be a memory value")
    else:
        try:
            number = parse_int(value.encode())
        except CommandError:
            raise _set_failed(name, "argument couldn't be parsed into an integer") from None
    if not 0 <= number <= _INT_MAX:
        raise _set_failed(name, f"argument must be between 0 and {_INT_MAX} inclusive")
    return str(number)


def _set_failed(name: str, why: str) -> CommandError:
    return CommandError(errors.CONFIG_SET_FAILED_FMT.format(name=name, why=why))


def config(session: Session, args: list[bytes], settings: Settings) -> Reply:
    """CONFIG GET / SET / RESETSTAT (the caller resets its statistics) / REWRITE / HELP."""
    sub = args[1].lower()
    if sub == b"get":
        return settings.get(args[2:])
    if sub == b"set":
        return settings.set(args[2:])
    if sub == b"resetstat":
        return OK
    if sub == b"rewrite":
        raise CommandError(errors.NO_CONFIG_FILE)
    return [Status(line) for line in CONFIG_HELP]


# --- statistics -----------------------------------------------------------------------------------


@dataclass
class Stats:
    """INFO stats counters (CONFIG RESETSTAT zeroes them)."""

    connections: int = 0
    commands: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def count(self, reply: Reply) -> None:
        self.commands += 1
        if isinstance(reply, CommandError):
            self.errors[reply.code] = self.errors.get(reply.code, 0) + 1

    def reset(self) -> None:
        self.connections = 0
        self.commands = 0
        self.errors.clear()
