"""What Redis's Tcl test suite gives its stream tests, for their ports to pytest: `r` (a client
whose replies are decoded as Tcl sees them: strings, integers, lists, "" for nil), `assert_error`
(the error line matched as a Tcl glob, `ERR` included), deferring clients (`$rd`), `dict get` of
XINFO's flat replies."""

from __future__ import annotations

import fnmatch
import time
from typing import Any

import hiredis
import pytest
from support import RawClient

Value = Any
"""A reply as Tcl sees it: str, int, list of those, or "" for a nil."""


def tcl(value: object) -> Value:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, list):
        return [tcl(v) for v in value]
    return value


class Client:
    """`r`: one connection; calling it sends a command and returns its decoded reply (an error
    reply raises `Error`)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.raw = RawClient(port, timeout_s=30)

    def __call__(self, *args: bytes | str | int) -> Value:
        reply = self._call(args)
        if isinstance(reply, hiredis.ReplyError):
            raise Error(str(reply))
        return tcl(reply)

    def _call(self, args: tuple[bytes | str | int, ...]) -> object:
        self.raw.send(*[a if isinstance(a, bytes) else str(a) for a in args])
        return self.raw.reply()

    def error(self, *args: bytes | str | int) -> str:
        """The error line the command answers (fails if it answers anything else)."""
        reply = self._call(args)
        assert isinstance(reply, hiredis.ReplyError), f"{args[:3]} answered {reply!r}"
        return str(reply)

    def deferring(self) -> Deferred:
        return Deferred(self.port)

    def close(self) -> None:
        self.raw.close()


class Deferred:
    """`redis_deferring_client`: send now, read later."""

    def __init__(self, port: int) -> None:
        self.raw = RawClient(port, timeout_s=30)

    def send(self, *args: bytes | str | int) -> None:
        self.raw.send(*[a if isinstance(a, bytes) else str(a) for a in args])

    def read(self) -> Value:
        reply = self.raw.reply()
        if isinstance(reply, hiredis.ReplyError):
            raise Error(str(reply))
        return tcl(reply)

    def read_error(self) -> str:
        reply = self.raw.reply()
        assert isinstance(reply, hiredis.ReplyError), f"answered {reply!r}"
        return str(reply)

    def ready(self, wait: float) -> bool:
        return self.raw.ready(wait)

    def close(self) -> None:
        self.raw.close()


class Error(Exception):
    """An error reply where a value was expected."""


def assert_error(pattern: str, r: Client, *args: bytes | str | int) -> None:
    """Tcl's `assert_error pattern {r ...}`: the error line matches the glob."""
    line = r.error(*args)
    assert fnmatch.fnmatchcase(line, pattern), f"{line!r} does not match {pattern!r}"


def dict_get(flat: Value, field: str) -> Value:
    """`dict get` of a flat [k, v, k, v ...] reply."""
    pairs = dict(zip(flat[::2], flat[1::2], strict=True))
    return pairs[field]


def after(ms: int) -> None:
    time.sleep(ms / 1000)


def wait_for_blocked_clients_count(r: Client, count: int, timeout_s: float = 5.0) -> None:
    """Until INFO clients says `count` clients are blocked."""
    deadline = time.monotonic() + timeout_s
    while True:
        info = r("INFO", "clients")
        for line in str(info).splitlines():
            if line.startswith("blocked_clients:") and int(line.split(":")[1]) == count:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"blocked clients never reached {count}: {info}")
        time.sleep(0.01)


EMPTIED = (
    "a stream emptied by XDEL / XTRIM does not exist here (the seeds' rule: a key exists iff it "
    "has an entry or a group; README, Differences from open-source Redis 7)"
)


def excused(reason: str) -> pytest.MarkDecorator:
    """A Redis case this database answers otherwise by a documented rule: it must keep failing
    (strict), so the list of excused cases in docs/redis8.md stays true."""
    return pytest.mark.xfail(strict=True, reason=reason)
