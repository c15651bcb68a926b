"""The limits a RESP server puts on its clients, as Redis puts them: `maxclients`, `timeout`,
`client-output-buffer-limit`, `proto-max-bulk-len`, and the unauthenticated request limits.

One `Limits` object is shared by every connection of a server and read at the moment a limit
applies, so CONFIG SET changes it for the connections already open too (as in Redis).
`Connections` is the server's set of open connections: it counts them for `maxclients` and runs
the once-a-second sweep (Redis's clientsCron) that closes idle clients (`timeout`) and clients
over the soft output limit for longer than its seconds.

Why each matters here: without them one client could hold the node's memory (a 512 MB value read
before AUTH, replies never read) or its file descriptors, and other clients of the region pay.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass, field
from typing import Protocol

from streams.resp.parser import MAX_BULK

log = logging.getLogger(__name__)

SWEEP_S = 1.0
"""How often idle and soft-limited clients are looked for (Redis's clientsCron runs at `hz`, each
client looked at about once a second)."""
ACCEPT_LOG_EVERY_S = 10.0
"""At most one log line per this many seconds for accept() failing for lack of file descriptors:
asyncio logs each failure with a traceback, ~100 per loop tick (~3,500 a second here)."""
MAX_CLIENTS_TEXT = b"-ERR max number of clients reached\r\n"


@dataclass(frozen=True, slots=True)
class OutputLimit:
    """One class of `client-output-buffer-limit`: bytes (0: none) and seconds."""

    hard: int = 0
    soft: int = 0
    soft_seconds: int = 0


@dataclass(slots=True)
class Limits:
    """The server-wide limits (the node's `Settings` writes them on CONFIG SET)."""

    auth_required: bool = False
    """New connections start unauthenticated: the unauthenticated request limits apply."""
    max_bulk: int = MAX_BULK
    max_arg: int = MAX_BULK
    """The longest argument kept: a longer one (up to `max_bulk`) is read and dropped and its
    request refused (`streams.resp.request.Dropped`); the node sets its op log's record limit,
    since no longer value could be logged."""
    maxclients: int = 10000
    timeout_s: int = 0
    """Close a client idle (no request, none in flight) for longer; 0: never."""
    output: OutputLimit = field(default_factory=OutputLimit)
    """The `normal` class: every client here (a blocked reader is a normal client, as in
    Redis; there is no Pub/Sub and no replica connection)."""
    rejected: int = 0
    """Connections refused for maxclients (INFO stats' rejected_connections)."""


class Limited(Protocol):
    """What the sweep needs of a connection (`streams.resp.server.RespProtocol`)."""

    def idle_for(self, now: float) -> float | None:
        """Seconds since its last activity; None when a command is in flight (blocked)."""
        ...

    def check_output(self, now: float) -> None:
        """Drop the connection when over its output limit (`OutputLimit`)."""
        ...

    def close_idle(self) -> None: ...


class Connections:
    """The open connections of one server, and the sweep over them."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.open: set[Limited] = set()
        self._timer: asyncio.TimerHandle | None = None

    def admit(self, conn: Limited) -> bool:
        """Count a new connection in, or refuse it (maxclients reached)."""
        if len(self.open) >= self.limits.maxclients:
            self.limits.rejected += 1
            return False
        self.open.add(conn)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(SWEEP_S, self._sweep)
        return True

    def gone(self, conn: Limited) -> None:
        self.open.discard(conn)

    def _sweep(self) -> None:
        self._timer = None
        now = time.monotonic()
        timeout = self.limits.timeout_s
        for conn in list(self.open):
            if timeout:
                idle = conn.idle_for(now)
                if idle is not None and idle > timeout:
                    conn.close_idle()
                    continue
            conn.check_output(now)
        if self.open:
            self._timer = asyncio.get_running_loop().call_later(SWEEP_S, self._sweep)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log accept() running out of file descriptors once per `ACCEPT_LOG_EVERY_S` (with how
    many were left out) instead of asyncio's traceback per failure; everything else goes to the
    handler that was there before. Installed once per loop."""
    previous = loop.get_exception_handler()
    if getattr(previous, "quiet_accept", False):
        return
    state = {"last": -ACCEPT_LOG_EVERY_S, "left_out": 0}

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        if context.get("message") != "socket.accept() out of system resource":
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - state["last"] < ACCEPT_LOG_EVERY_S:
            state["left_out"] += 1
            return
        log.warning(
            "cannot accept new connections: %s (%d more such failures since the last report); "
            "lower maxclients or raise the file-descriptor limit (ulimit -n)",
            context.get("exception"),
            state["left_out"],
        )
        state["last"] = now
        state["left_out"] = 0

    handler.quiet_accept = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


RESERVED_FDS = 32
"""File descriptors kept for everything but clients (Redis's CONFIG_MIN_RESERVED_FDS): here the
Kafka connections, snapshot files and the listening socket."""


def fit_maxclients(wanted: int) -> int:
    """How many clients the process can hold, at most `wanted`: the soft file-descriptor limit is
    raised (up to the hard one) to fit `wanted` plus `RESERVED_FDS`, as Redis's
    adjustOpenFilesLimit does, so connections are refused with Redis's error before accept()
    runs out of descriptors."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # not POSIX: take the setting as it is
        return wanted
    need = wanted + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - RESERVED_FDS))
