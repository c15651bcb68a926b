"""SLOWLOG: the commands that ran longer than `slowlog-log-slower-than`, as Redis 7.0 keeps them.

`streams.node.pipeline.stats.Stats.record` pushes an entry when a command's run time reaches the
threshold; SLOWLOG GET / LEN / RESET / HELP read it. Entries are Redis's: id, unix time, run time
in usec, the arguments (at most 32, the last one then saying how many more there were; each at
most 128 bytes, then how many more bytes), the client's address and name; passwords (AUTH, HELLO
AUTH, CONFIG SET requirepass) are logged as `(redacted)`, as Redis does. Why keep Redis's shape:
`redis-cli`, redis_exporter (`redis_slowlog_length`, `redis_slowlog_last_id`,
`redis_last_slow_execution_duration_seconds`) and people read it.
"""

from __future__ import annotations

import time
from collections import deque
from typing import NamedTuple

from streams import errors
from streams.commands.base import parse_int
from streams.errors import CommandError
from streams.node.pipeline.clients import Client
from streams.reply import OK, Reply, Status

MAX_ARGC = 32
MAX_STRING = 128
REDACTED = b"(redacted)"

SLOWLOG_HELP = [
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
]


class Entry(NamedTuple):
    id: int
    time: int
    usec: int
    args: list[bytes]
    addr: bytes
    name: bytes


def logged_args(args: list[bytes]) -> list[bytes]:
    """The arguments as Redis's slowlogCreateEntry keeps them (redacted, then cut)."""
    args = redact(args)
    shown = args[:MAX_ARGC]
    if len(args) > MAX_ARGC:
        shown[-1] = b"... (%d more arguments)" % (len(args) - MAX_ARGC + 1)
    return [a if len(a) <= MAX_STRING else _cut(a) for a in shown]


def _cut(arg: bytes) -> bytes:
    return arg[:MAX_STRING] + b"... (%d more bytes)" % (len(arg) - MAX_STRING)


def redact(args: list[bytes]) -> list[bytes]:
    """Passwords out (Redis's redactClientCommandArgument): every AUTH argument, HELLO's AUTH
    user and password, CONFIG SET's value of requirepass / masterauth."""
    name = args[0].lower()
    if name == b"auth":
        return [args[0], *(REDACTED for _ in args[1:])]
    out = list(args)
    if name == b"hello":
        for i in range(2, len(args) - 2):
            if args[i].lower() == b"auth":
                out[i + 1] = out[i + 2] = REDACTED
                break
    elif name == b"config" and len(args) > 2 and args[1].lower() == b"set":
        for i in range(2, len(args) - 1, 2):
            if args[i].lower() in (b"requirepass", b"masterauth"):
                out[i + 1] = REDACTED
    return out


class SlowLog:
    def __init__(self, max_len: int = 128) -> None:
        self.entries: deque[Entry] = deque()
        """Newest first."""
        self.max_len = max_len
        self.next_id = 0

    def resize(self, max_len: int) -> None:
        """slowlog-max-len changed: drop the oldest entries beyond it."""
        self.max_len = max_len
        while len(self.entries) > max_len:
            self.entries.pop()

    def push(self, client: Client, args: list[bytes], usec: int) -> None:
        session = client.session_ref()
        addr = session.addr.encode() if session is not None else b""
        entry = Entry(
            self.next_id, int(time.time()), usec, logged_args(args), addr, client.name or b""
        )
        self.next_id += 1
        self.entries.appendleft(entry)
        while len(self.entries) > self.max_len:
            self.entries.pop()


def slowlog(args: list[bytes], log: SlowLog) -> Reply:
    """SLOWLOG GET [count] / LEN / RESET / HELP (arities are checked by the pipeline)."""
    sub = args[1].lower()
    if sub == b"get":
        if len(args) > 3:
            raise errors.subcommand_syntax(args[0], args[1])
        count = 10
        if len(args) == 3:
            try:
                count = parse_int(args[2])
            except CommandError:
                count = -2
            if count < -1:
                raise CommandError(errors.SLOWLOG_COUNT)
        chosen = list(log.entries) if count == -1 else list(log.entries)[:count]
        return [[e.id, e.time, e.usec, list[Reply](e.args), e.addr, e.name] for e in chosen]
    if sub == b"len":
        return len(log.entries)
    if sub == b"reset":
        log.entries.clear()
        return OK
    return [Status(line) for line in SLOWLOG_HELP]
