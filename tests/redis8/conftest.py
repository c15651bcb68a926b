"""A region node for the ports of Redis's newest stream tests: one liberal region (Redis's ID rules,
which the tests' explicit IDs need) on an in-memory op log,
serving RESP on a free loopback port from an event loop in a thread of its own, so that
redis-py clients (and blocked ones, each on its connection) talk to it as to redis-server.

One node per test module, as Redis's `start_server` blocks: the tests clean up as Redis's do
(`DEL mystream` first)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
import redis

from redis8.tcl import Client
from streams.config.topology import RegionConfig, Topology
from streams.node.node import NodeOptions, RegionNode
from streams.node.runtime.memory import MemoryLog


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class NodeThread:
    """A node started on its own loop in a daemon thread; `stop()` ends both."""

    def __init__(self) -> None:
        self.port = _free_port()
        topology = Topology(
            regions=(RegionConfig("r1", 1, "127.0.0.1:1", self.port, id_mode="liberal"),),
            mirror_naming="identity",
        )
        self.node = RegionNode(NodeOptions(topology, "r1", port=self.port), log=MemoryLog())
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        if not started.wait(30):
            raise RuntimeError("the node did not start")

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.node.start())
        started.set()
        self.loop.run_forever()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.node.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=30)


@pytest.fixture(scope="module")
def node() -> Iterator[NodeThread]:
    running = NodeThread()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def r(node: NodeThread) -> Iterator[Client]:
    """Tcl's `r`."""
    client = Client(node.port)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def py(node: NodeThread) -> Iterator[redis.Redis]:
    """A redis-py client of the node."""
    client = node.client()
    try:
        yield client
    finally:
        client.close()
