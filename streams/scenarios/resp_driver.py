"""Drive a scenario against real region nodes over RESP (a `LocalTopology`).

Commands go over a raw socket and replies are parsed with hiredis, so an error reply keeps its
exact text (redis-py would strip the `ERR ` prefix) and nothing is reshaped by client callbacks.
A region whose shards are spread over several nodes answers `MOVED slot host:port` for a key
another node serves: the driver follows it as `redis-cli -c` does (pinning that node's clock
too), so the same tables run on sharded regions.
"""

from __future__ import annotations

import socket
from typing import Protocol

import hiredis

from streams.errors import CommandError


class Topology(Protocol):
    ports: dict[int, int]

    def sync(self, regions: list[int] | None = None, timeout: float = 30) -> None: ...


class RawClient:
    """One RESP2 connection: send a command, read one reply."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 30) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._reader = hiredis.Reader()

    def call(self, *args: bytes) -> object:
        out = [b"*%d\r\n" % len(args)]
        for arg in args:
            out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
        self._sock.sendall(b"".join(out))
        while True:
            reply = self._reader.gets()
            if reply is not False:
                break
            data = self._sock.recv(65536)
            if not data:
                raise ConnectionError("the node closed the connection")
            self._reader.feed(data)
        if isinstance(reply, hiredis.ReplyError):
            return CommandError(str(reply))
        return reply

    def close(self) -> None:
        self._sock.close()


MAX_REDIRECTS = 5


class RespDriver:
    """A scenario `Driver` over a topology whose nodes run with --debug-clock."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self._clients: dict[int, RawClient] = {}

    def _client(self, port: int) -> RawClient:
        if port not in self._clients:
            self._clients[port] = RawClient(port)
        return self._clients[port]

    def execute(self, region: int, args: tuple[bytes, ...], clock_ms: int | None) -> object:
        port = self.topology.ports[region]
        for _ in range(MAX_REDIRECTS):
            client = self._client(port)
            if clock_ms is not None:
                pinned = client.call(b"CRDT.CLOCK", str(clock_ms).encode())
                if isinstance(pinned, CommandError):
                    raise RuntimeError(f"cannot pin the clock of region {region}: {pinned.text}")
            reply = client.call(*args)
            if not (isinstance(reply, CommandError) and reply.code == "MOVED"):
                return reply
            port = int(reply.text.rsplit(":", 1)[1])
        raise RuntimeError(f"region {region}: more than {MAX_REDIRECTS} redirections for {args}")

    def sync(self, regions: tuple[int, ...] | None) -> None:
        self.topology.sync(None if regions is None else list(regions))

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
