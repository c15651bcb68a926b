"""What the node keeps per connection (`Client`), and CLIENT.

The RESP server's `Session` carries only what the wire needs (id, protocol version, addresses,
closing); everything a command reads or changes about its connection lives in the node's typed
`Client` record: the authenticated user, the open transaction, the name, and what CLIENT LIST /
INFO report.

CLIENT's replies follow redis-server 7.0.15 byte for byte where the same reply makes sense
(tests/unit/test_connection_commands.py). Deliberate differences: CLIENT SETINFO (Redis 7.2) is
accepted; CLIENT LIST / INFO report no fds or buffer sizes, and are bulk strings in RESP3 too
(Redis: verbatim strings).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

from streams import errors
from streams.commands.base import Command, parse_int, text
from streams.errors import CommandError
from streams.reply import OK, Reply, Status
from streams.resp.server import Session, Until

DEFAULT_USER = b"default"

QUEUED = Status("QUEUED")

Queued = tuple[Command, list[bytes]]
"""A queued command: its table row and its arguments."""


@dataclass
class Transaction:
    queued: list[Queued] = field(default_factory=list)
    dirty: bool = False

    def queue(self, cmd: Command, args: list[bytes], refusal: CommandError | None = None) -> Reply:
        """Queue a command, or (refusal given) answer the refusal and doom the transaction. A
        doomed transaction answers QUEUED but keeps nothing more (EXEC will run nothing), as
        Redis's queueMultiCommand does."""
        if refusal is not None:
            self.dirty = True
            return refusal
        if not self.dirty:
            self.queued.append((cmd, args))
        return QUEUED


@dataclass(eq=False)
class Client:
    """One connection as the node sees it (`Clients.add` makes one)."""

    id: int
    session_ref: weakref.ReferenceType[Session]
    """The connection's session, held weakly: the record goes with the connection."""
    user: bytes = DEFAULT_USER
    """The user the connection is authenticated as (or will be: see `authenticated`)."""
    name: bytes | None = None
    """CLIENT SETNAME / HELLO SETNAME; None: no name."""
    transaction: Transaction | None = None
    """The open MULTI, if any."""
    executing: int | None = None
    """While EXEC runs: how many commands the transaction holds (CLIENT LIST's `multi`)."""
    created: float = field(default_factory=time.monotonic)
    last_seen: float = field(default_factory=time.monotonic)
    last_cmd: str = "NULL"
    lib_name: bytes = b""
    lib_ver: bytes = b""
    no_evict: bool = False
    own_write: Until | None = None
    """The client's newest write, until its batch commits: its reads wait for it
    (`streams.node.pipeline.dispatch`)."""
    blocked_ns: int = 0
    """Time the request in hand spent blocked (XREAD / XREADGROUP BLOCK), which the counting of
    its run time leaves out (`streams.node.pipeline.dispatch`)."""

    @property
    def authenticated(self) -> bool:
        """Kept on the session: its parser applies Redis's unauthenticated limits until then."""
        return self.session.authenticated

    @authenticated.setter
    def authenticated(self, value: bool) -> None:
        self.session.authenticated = value

    @property
    def tls(self) -> bool:
        """Whether the connection came over TLS (cluster replies then name TLS ports)."""
        session = self.session_ref()
        return session is not None and session.tls

    @property
    def session(self) -> Session:
        session = self.session_ref()
        if session is None:  # only a record kept past its connection could see this
            raise RuntimeError(f"connection {self.id} is gone")
        return session

    def transaction_depth(self) -> int:
        """CLIENT LIST's `multi` field: commands queued (or being executed by EXEC), -1
        outside a transaction."""
        if self.transaction is not None:
            return len(self.transaction.queued)
        return -1 if self.executing is None else self.executing


class Clients:
    """The connections a node (or a replay server) knows: a record is made at a connection's
    first request and goes when its session does."""

    def __init__(self) -> None:
        self._of: weakref.WeakKeyDictionary[Session, Client] = weakref.WeakKeyDictionary()

    def find(self, session: Session) -> Client | None:
        """The record of `session`'s connection (every request asks: an attribute read, where
        the weak dictionary's lookup made a weak reference each time)."""
        found = session.attached
        return found if isinstance(found, Client) else None

    def add(self, session: Session) -> Client:
        client = self._of[session] = Client(session.id, weakref.ref(session))
        session.attached = client
        return client

    def live(self) -> list[Client]:
        """The connections not closing."""
        return [c for s, c in list(self._of.items()) if not s.closing]


def _valid_name(name: bytes) -> bool:
    """Redis's validateClientAttr: printable ASCII without spaces (33..126)."""
    return all(33 <= c <= 126 for c in name)


def set_name(client: Client, name: bytes) -> None:
    if not _valid_name(name):
        raise CommandError(errors.BAD_CLIENT_NAME)
    client.name = name or None


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


def client(me: Client, args: list[bytes], clients: Iterable[Client]) -> Reply:
    sub = args[1].lower()
    if sub == b"id":
        return me.id
    if sub == b"getname":
        return me.name
    if sub == b"setname":
        set_name(me, args[2])
        return OK
    if sub == b"setinfo":
        attr = args[2].lower()
        if attr not in (b"lib-name", b"lib-ver"):
            raise CommandError(errors.SETINFO_OPTION_FMT.format(opt=text(args[2])))
        if not _valid_name(args[3]):
            raise CommandError(errors.SETINFO_VALUE_FMT.format(attr=attr.decode()))
        if attr == b"lib-name":
            me.lib_name = args[3]
        else:
            me.lib_ver = args[3]
        return OK
    if sub == b"no-evict":
        mode = args[2].lower()
        if mode not in (b"on", b"off"):
            raise CommandError(errors.SYNTAX)
        me.no_evict = mode == b"on"
        return OK
    if sub == b"info":
        return client_line(me).encode()
    if sub == b"list":
        return _client_list(me, args, clients)
    return [Status(line) for line in CLIENT_HELP]


def _client_list(me: Client, args: list[bytes], clients: Iterable[Client]) -> Reply:
    wanted_ids: set[int] | None = None
    normal = True
    i = 2
    while i < len(args):
        opt = args[i].lower()
        if opt == b"type" and i + 1 < len(args):
            kind = args[i + 1].lower()
            if kind not in (b"normal", b"master", b"replica", b"slave", b"pubsub"):
                raise CommandError(errors.UNKNOWN_CLIENT_TYPE_FMT.format(kind=text(args[i + 1])))
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
                    raise CommandError(errors.INVALID_CLIENT_ID)
                wanted_ids.add(client_id)
            i = len(args)
        else:
            raise CommandError(errors.SYNTAX)
    if not normal:
        return b""
    lines = [
        client_line(c, current=c is me)
        for c in sorted(clients, key=lambda c: c.id)
        if wanted_ids is None or c.id in wanted_ids
    ]
    return "".join(lines).encode()


def client_line(c: Client, current: bool = True) -> str:
    """One CLIENT LIST line, Redis 7.0's fields (memory and buffer fields are 0: not tracked)."""
    now = time.monotonic()
    depth = c.transaction_depth()
    flags = ("x" if depth >= 0 else "") + ("e" if c.no_evict else "") or "N"
    fields = [
        f"id={c.id}",
        f"addr={c.session.addr}",
        f"laddr={c.session.laddr}",
        "fd=-1",
        f"name={(c.name or b'').decode('utf-8', 'replace')}",
        f"age={int(now - c.created)}",
        f"idle={0 if current else int(now - c.last_seen)}",
        f"flags={flags}",
        "db=0",
        "sub=0",
        "psub=0",
        "ssub=0",
        f"multi={depth}",
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
        f"cmd={c.last_cmd}",
        f"user={c.user.decode('utf-8', 'replace')}",
        "redir=-1",
        f"resp={c.session.proto}",
        f"lib-name={c.lib_name.decode('utf-8', 'replace')}",
        f"lib-ver={c.lib_ver.decode('utf-8', 'replace')}",
    ]
    return " ".join(fields) + "\n"
