"""Free loopback ports for the embedded processes."""

from __future__ import annotations

import functools
import os
import random
import socket
import time

_handed: set[int] = set()
_LOWEST = 10000
RANGE_VARIABLE = "STREAMS_PORT_RANGE"
"""`LOW-HIGH` (inclusive): the ports `free_port` may hand out here and in every process started
from here. Processes that pick ports side by side (the test suite's parallel workers) get
ranges apart, so two of them never hand out one port between its check and its listener."""


@functools.cache
def _ephemeral_low() -> int:
    """The lowest port the kernel hands to outgoing connections (`ip_local_port_range`)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fp:
            return int(fp.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port nothing listens on, below the kernel's ephemeral range.

    A port the kernel picked (bind to 0) is in the ephemeral range, so once its process stops,
    any outgoing connection may take it as its local port, and a node or broker restarted on it
    fails with EADDRINUSE (seen in CI's durable-restart test). Below that range only listeners
    we start take ports; a port is handed out once per process.
    """
    given = _given_range()
    if given is not None:
        return _pick(*given)
    low = _ephemeral_low()
    if low - _LOWEST < 1000:  # an unusual range: fall back to the kernel's choice
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            return port
    return _pick(_LOWEST, low - 1)


@functools.cache
def _given_range() -> tuple[int, int] | None:
    text = os.environ.get(RANGE_VARIABLE, "").strip()
    if not text:
        return None
    try:
        low, high = (int(part) for part in text.split("-"))
    except ValueError:
        message = f"{RANGE_VARIABLE}={text!r}: expected LOW-HIGH, e.g. 10000-15999"
        raise ValueError(message) from None
    if not 1024 <= low < high <= 65535:
        raise ValueError(f"{RANGE_VARIABLE}={text!r}: expected 1024 <= LOW < HIGH <= 65535")
    return low, high


def worker_range(index: int, count: int) -> str:
    """The `STREAMS_PORT_RANGE` value of worker `index` of `count` side by side: an equal slice
    of the ports below the kernel's ephemeral range."""
    low = _LOWEST
    width = (_ephemeral_low() - low) // max(1, count)
    start = low + index * width
    return f"{start}-{start + width - 1}"


def _pick(low: int, high: int) -> int:
    pick = random.Random()
    for _ in range(1000):
        port = pick.randint(low, high)
        if port in _handed:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise OSError(f"no free loopback port in {low}..{high}")


def reuse_port(port: int, host: str = "127.0.0.1") -> bool:
    """Take `port` again for a listener that had it before (a durable broker started again):
    True, and never handed out by `free_port` from now on, if nothing listens on it now. A port
    this process handed out before counts as free: it went to that listener's last start."""
    with socket.socket() as sock:
        # As the JVM's listener does: connections of the last run in TIME_WAIT do not stop it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    _handed.add(port)
    return True


def wait_for_port(port: int, timeout: float = 10.0, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s") from None
            time.sleep(0.02)
