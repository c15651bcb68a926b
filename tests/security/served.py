"""A real node on a real socket, in process: a `RegionNode` on an in-memory op log serving RESP
from an event loop in a thread of its own, so a test talks to it with blocking sockets exactly
as a client would (no broker: starts in milliseconds). `exchange` sends raw bytes and collects
what comes back, and whether the server closed the connection, from the node or a redis-server
alike, for byte-for-byte comparisons."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from types import TracebackType

from streams.config import RegionConfig, Topology
from streams.node.node import NodeOptions, RegionNode
from streams.node.pipeline.auth import AuthConfig
from streams.node.runtime.memory import MemoryLog
from topology.ports import free_port

CLOSED = b"<closed>"


class NodeThread:
    """A `RegionNode` serving from an event loop in a thread of its own: `start()`, `stop()`."""

    def __init__(self, node: RegionNode) -> None:
        self.node = node
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.node.start(), self.loop).result(30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.node.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class ServedNode(NodeThread):
    """`with ServedNode(requirepass="pw") as node:` a node on `node.port`."""

    def __init__(self, requirepass: str | None = None, users: list[str] | None = None) -> None:
        self.port = free_port()
        self.topology = Topology(
            regions=(RegionConfig("r1", 1, "127.0.0.1:1", self.port),), mirror_naming="identity"
        )
        options = NodeOptions(self.topology, "r1", auth=AuthConfig.build(requirepass, users))
        super().__init__(RegionNode(options, log=MemoryLog()))

    def __enter__(self) -> ServedNode:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def exchange(port: int, data: bytes, quiet_s: float = 0.3, limit_s: float = 10.0) -> bytes:
    """Send `data` on a new connection; everything received until the server closes (then
    `CLOSED` is appended) or sends nothing for `quiet_s`."""
    with socket.create_connection(("127.0.0.1", port), timeout=limit_s) as sock:
        sock.sendall(data)
        return receive(sock, quiet_s, limit_s)


def receive(sock: socket.socket, quiet_s: float = 0.3, limit_s: float = 10.0) -> bytes:
    out = bytearray()
    deadline = time.monotonic() + limit_s
    sock.settimeout(quiet_s)
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            break
        except ConnectionResetError:
            return bytes(out) + CLOSED
        if not chunk:
            return bytes(out) + CLOSED
        out += chunk
    return bytes(out)


def command(*args: bytes | str) -> bytes:
    """One request as client libraries write it."""
    parts = [a.encode() if isinstance(a, str) else a for a in args]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
