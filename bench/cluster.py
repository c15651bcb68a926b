"""A throw-away Redis Cluster of redis-servers: the anchor the sharded streams region is compared
with (`python -m bench`), as the single redis-server is the anchor of one process.

Each master is a Debian redis-server with `cluster-enabled yes` and the persistence given (the
benchmark uses `appendfsync always`, as for the single server). Master i gets the slots
redis-cli --cluster create would give it (`streams.slots.shard_ranges`: 0-8191 and 8192-16383
for two; `CLUSTER ADDSLOTSRANGE`), the first meets the others (`CLUSTER MEET`), and the
cluster is ready once every master says `cluster_state:ok` and knows every other.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import redis

from bench.throughput import redis_server
from streams.slots import shard_ranges
from topology.ports import free_port

MAX_CLUSTER_PORT = 55535
"""redis-server refuses cluster mode on a higher port: its bus port (port + 10000) must exist."""
BUS_OFFSET = 10000
READY_TIMEOUT_S = 30.0


def cluster_port() -> int:
    """A free port that redis-server accepts in cluster mode, whose bus port is free too."""
    for _ in range(1000):
        port = free_port()
        if port <= MAX_CLUSTER_PORT and _is_free(port + BUS_OFFSET):
            return port
    raise RuntimeError(f"no free port pair below {MAX_CLUSTER_PORT} found")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@contextlib.contextmanager
def redis_cluster(masters: int = 2, durable: bool = True) -> Iterator[list[int]]:
    """The masters' ports of a ready cluster; every redis-server is killed on exit."""
    with contextlib.ExitStack() as stack:
        ports = [
            stack.enter_context(redis_server(durable, cluster=True, port=cluster_port()))
            for _ in range(masters)
        ]
        clients = [stack.enter_context(redis.Redis(port=port)) for port in ports]
        for epoch, (client, slots) in enumerate(
            zip(clients, shard_ranges(masters), strict=True), start=1
        ):
            client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", slots.start, slots.stop - 1)
        for port in ports[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(_ready(client, masters) for client in clients):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {masters}-master Redis Cluster did not form")
            time.sleep(0.05)
        yield ports


def _ready(client: redis.Redis, masters: int) -> bool:
    info = client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in text and f"cluster_known_nodes:{masters}" in text
