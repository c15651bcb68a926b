"""A stand-in for a sharded region that real cluster clients can talk to: `streams.cluster`'s
answers in front of plain redis-servers.

`ProxyCluster(backends)` listens on one loopback port per backend (a standalone redis-server)
and answers as node i of a `Layout` of those ports: CLUSTER, READONLY / READWRITE / ASKING and
COMMAND GETKEYS from `streams.cluster` and `keyspec`; every other request is first routed
(`redirect_command`, and `redirect_exec` at EXEC) and, when it runs here, forwarded to backend i.
So redis-py's RedisCluster, `redis-cli -c` and `redis-benchmark --cluster` see exactly the
cluster surface the node will give them, and where each key landed tells whether they followed
it. Test scaffolding (threads, blocking sockets), not a model of the node.
"""

from __future__ import annotations

import socket
import threading
import time

from support import RawClient

from streams import errors
from streams.cluster import (
    Layout,
    cluster_command,
    flag_command,
    redirect_command,
    redirect_exec,
)
from streams.commands.catalogue import is_redis_command, spec
from streams.commands.keyspec import getkeys
from streams.errors import CommandError
from streams.reply import Reply
from streams.resp.encode import encode
from streams.resp.parser import RequestParser


def command_name(args: list[bytes]) -> str | None:
    """The catalogue name of a request's command (`container|sub`), None when Redis has none."""
    name = args[0].lower().decode("utf-8", "replace")
    if not is_redis_command(name):
        return None
    if spec(name).subcommands and len(args) > 1:
        sub = f"{name}|{args[1].lower().decode('utf-8', 'replace')}"
        return sub if is_redis_command(sub) else None
    return name


class ProxyCluster:
    """Node i on `ports[i]`, forwarding to the redis-server on `backends[i]`."""

    def __init__(self, backends: list[int], region: str = "r1") -> None:
        self._listeners = [socket.create_server(("127.0.0.1", 0)) for _ in backends]
        self.ports = [s.getsockname()[1] for s in self._listeners]
        self.backends = backends
        endpoints = [("127.0.0.1", port) for port in self.ports]
        self.layouts = [
            Layout.build(region, len(backends), endpoints, myself=i) for i in range(len(backends))
        ]
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        for i, listener in enumerate(self._listeners):
            self._spawn(self._accept, listener, i)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for sock in [*self._listeners, *self._connections]:
                _wake(sock)  # close() alone leaves a thread blocked in accept() or recv()
        for thread in self._threads:
            thread.join(timeout=10)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket, i: int) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self._connections.append(conn)
            self._spawn(self._serve, conn, i)

    def _serve(self, conn: socket.socket, i: int) -> None:
        session = _Session(self.layouts[i], RawClient(self.backends[i]))
        parser = RequestParser()
        try:
            while not self._stopping.is_set():
                data = conn.recv(1 << 16)
                if not data:
                    return
                for args in parser.feed(data):
                    conn.sendall(session.answer(args))
        except OSError:
            return
        finally:
            session.backend.close()
            conn.close()


def _wake(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # never connected, or already closed
    sock.close()


class _Session:
    """One client connection: its protocol, its transaction, its backend connection."""

    def __init__(self, layout: Layout, backend: RawClient) -> None:
        self.layout = layout
        self.backend = backend
        self.proto = 2
        self.queued: list[tuple[str, list[bytes]]] | None = None
        self.flagged = False

    def answer(self, args: list[bytes]) -> bytes:
        name = command_name(args)
        try:
            local = self._local(name, args)
        except CommandError as e:
            local = e
        if local is not None:
            return encode(local, self.proto)
        refused = self._route(name, args)
        if refused is not None:
            return encode(refused, self.proto)
        if name == "hello" and len(args) > 1 and args[1] == b"3":
            self.proto = 3
        return self.backend.call(args)

    def _local(self, name: str | None, args: list[bytes]) -> Reply | None:
        """What `streams.cluster` answers itself; None for what the backend answers."""
        if name is not None and name.startswith("cluster"):
            return cluster_command(args, self.layout, self._keys, int(time.time() * 1000))
        if name in ("readonly", "readwrite", "asking"):
            return flag_command(args)
        if name == "command|getkeys" and len(args) > 2:
            found = command_name(args[2:])
            if found is None:
                return CommandError(errors.GETKEYS_INVALID_COMMAND)
            return list(getkeys(found, args[2:]))
        return None

    def _route(self, name: str | None, args: list[bytes]) -> CommandError | None:
        """MOVED / CROSSSLOT, with MULTI's bookkeeping (the backend runs the transaction)."""
        if name == "multi":
            self.queued, self.flagged = [], False
            return None
        if name == "exec" and self.queued is not None:
            queued, flagged, self.queued = self.queued, self.flagged, None
            refused = redirect_exec(self.layout, queued)
            if refused is None and flagged:
                refused = CommandError(errors.EXECABORT)
            if refused is not None:
                self.backend.call([b"DISCARD"])
            return refused
        if name == "discard":
            self.queued = None
        if name is None or name in ("discard", "exec"):
            return None
        refused = redirect_command(self.layout, name, args)
        if self.queued is not None:
            if refused is not None:
                self.flagged = True
            elif not self.flagged:
                self.queued.append((name, args))
        return refused

    def _keys(self) -> list[bytes]:
        self.backend.send(b"KEYS", b"*")
        keys = self.backend.reply()
        assert isinstance(keys, list)
        return keys
