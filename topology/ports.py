"""Free loopback ports for the embedded processes."""

from __future__ import annotations

import functools
import random
import socket
import time

_handed: set[int] = set()
_LOWEST = 10000


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
    low = _ephemeral_low()
    if low - _LOWEST < 1000:  # an unusual range: fall back to the kernel's choice
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            return port
    pick = random.Random()
    for _ in range(1000):
        port = pick.randrange(_LOWEST, low)
        if port in _handed:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise OSError(f"no free loopback port in {_LOWEST}..{low - 1}")


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
