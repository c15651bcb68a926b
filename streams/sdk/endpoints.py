"""Region endpoints, the choice of the one to talk to, and the nodes of a sharded region.

Active-active means every region takes writes and reads, so failover is a client decision: the
SDK keeps one `Endpoint` per region and a "down until" time for each. A transient failure marks
the endpoint down for `down_s`; `preferred()` is the first endpoint not marked down, so a
producer returns to the first endpoint once its down time has passed and a probe succeeds.
Consumers stay where they are until their endpoint fails (`next_after`), because every move
re-delivers the entries read but not yet replicated as acknowledged.

A region whose shards are spread over several node processes speaks the Redis Cluster protocol:
a node answers `-MOVED slot host:port` for a key another node of the region serves. An endpoint
is reached through the node the user named (its seed) and follows MOVED itself: it remembers, per
slot, the node a MOVED named and sends that slot's commands there from then on (a stream is one
slot, so one redirect per stream and region). A MOVED reply means the command did not run, so
following it is always safe. A transient failure on such a node forgets the route, so the next
attempt asks the seed again, which names the slot's owner as it stands then. Why not redis-py's
cluster client: docs/sdk.md, "Sharded regions".

Clients are RESP2 with redis-py's reply callbacks removed: the SDK parses the raw replies itself,
so the shape it sees does not change with redis-py's version, and redis-py's own retries are off
(a silent re-send of XADD after a timeout would be a duplicate the SDK cannot mark).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis.asyncio as aredis
import redis.exceptions
from redis.asyncio.connection import Connection, UnixDomainSocketConnection
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import NoBackoff
from redis.crc import key_slot

from streams.sdk.errors import SdkError, is_transient

log = logging.getLogger("streams.sdk")

Endpoints = str | Sequence[str]
T = TypeVar("T")

MAX_REDIRECTS = 5
"""MOVED replies followed for one request before giving up: a stream's slot has one owner, so a
second redirect in a row only happens while a region's layout changes (a node restarted with
another shard set), and an endless chain is a misconfigured region, named in the error."""


def normalize(endpoints: Endpoints) -> list[str]:
    """`redis://host:port` URLs (or bare `host:port`), at least one, no duplicates."""
    items = [endpoints] if isinstance(endpoints, str) else list(endpoints)
    if not items:
        raise SdkError("no endpoint given: pass a URL such as redis://127.0.0.1:6380")
    out: list[str] = []
    for raw in items:
        if not isinstance(raw, str) or not raw.strip():
            raise SdkError(f"endpoint {raw!r} is not a URL such as redis://127.0.0.1:6380")
        url = raw.strip()
        if "://" not in url:
            url = "redis://" + url
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise SdkError(f"endpoint {raw!r}: only redis://, rediss:// and unix:// URLs are valid")
        if url in out:
            raise SdkError(f"endpoint {raw!r} is listed twice")
        out.append(url)
    return out


def _raw(client: aredis.Redis) -> aredis.Redis:
    client.response_callbacks.clear()
    return client


def make_client(url: str, timeout_s: float) -> aredis.Redis:
    """A raw-reply RESP2 client without redis-py retries (see the module docstring)."""
    client = aredis.Redis.from_url(
        url,
        protocol=2,
        decode_responses=False,
        socket_timeout=timeout_s,
        socket_connect_timeout=min(timeout_s, 2.0),
        retry=RedisRetry(NoBackoff(), 0),
    )
    return _raw(client)


def node_client(seed: aredis.Redis, host: str, port: int) -> aredis.Redis:
    """A client of another node of the seed's region, with everything else as the seed's
    (credentials, TLS, timeouts, no retries): a MOVED names only where to go."""
    pool = seed.connection_pool
    kwargs: dict[str, Any] = {**pool.connection_kwargs, "host": host, "port": port}
    connection_class: type[Any] = pool.connection_class
    if issubclass(connection_class, UnixDomainSocketConnection):  # cluster nodes speak TCP
        connection_class = Connection
        kwargs.pop("path", None)
    node_pool = aredis.ConnectionPool(connection_class=connection_class, **kwargs)
    return _raw(aredis.Redis.from_pool(node_pool))


def slot_of(key: str | bytes) -> int:
    """The Redis Cluster slot of a key (hash tags included): which node of a region serves it."""
    return key_slot(key.encode() if isinstance(key, str) else key)


@dataclass
class Endpoint:
    """One region: reached through the node the user named (`client`, the seed) and, in a
    sharded region, through the nodes MOVED replies named (`routes`, `nodes`)."""

    url: str
    client: aredis.Redis
    down_until: float = 0.0
    region: str | None = None  # the node's region name (CRDT.INFO), learnt on first use
    failures: int = field(default=0)
    routes: dict[int, str] = field(default_factory=dict)
    """slot -> `host:port` of the node a MOVED named for it."""
    nodes: dict[str, aredis.Redis] = field(default_factory=dict)
    """`host:port` -> client, for the nodes other than the seed."""

    def is_up(self, now: float) -> bool:
        return self.down_until <= now

    def client_for(self, key: str | bytes) -> aredis.Redis:
        """The client of the node serving `key` as far as this endpoint knows (else the seed)."""
        address = self.routes.get(slot_of(key))
        return self.client if address is None else self.nodes[address]

    def _follow(self, moved: redis.exceptions.MovedError, via: aredis.Redis) -> None:
        # An empty host (`MOVED 3999 :6381`, Redis Cluster's "unknown endpoint") means the host
        # of the node that answered.
        host = moved.host or str(via.connection_pool.connection_kwargs.get("host", ""))
        address = f"{host}:{moved.port}"
        if address not in self.nodes:
            self.nodes[address] = node_client(self.client, host, moved.port)
        if self.routes.get(moved.slot_id) != address:
            log.info("%s: slot %d is served by %s", self.url, moved.slot_id, address)
        self.routes[moved.slot_id] = address

    async def call(self, key: str | bytes, run: Callable[[aredis.Redis], Awaitable[T]]) -> T:
        """`run(client)` on the node serving `key`, following MOVED replies (module docstring).

        `run` may be called again after a MOVED, so it sends only what has not run yet (a MOVED
        reply means the command it answers did not run). Every other error propagates; a
        transient one also forgets the route of `key`'s slot."""
        for _ in range(MAX_REDIRECTS + 1):
            client = self.client_for(key)
            try:
                return await run(client)
            except redis.exceptions.MovedError as moved:
                self._follow(moved, client)
            except Exception as exc:
                if is_transient(exc):
                    self.routes.pop(slot_of(key), None)
                raise
        raise SdkError(
            f"{self.url}: {key!r} was redirected (MOVED) more than {MAX_REDIRECTS} times in a row;"
            " the region's nodes disagree about who serves its slot"
        )

    async def cmd(self, key: str | bytes, *args: bytes | str | int | float) -> Any:
        """One command about `key` on the node serving it, raw RESP2 reply."""
        return await self.call(key, lambda client: cmd(client, *args))

    async def close(self) -> None:
        for client in [self.client, *self.nodes.values()]:
            await client.aclose()


class EndpointSet:
    """The endpoints of one SDK object, in the order the user gave them."""

    def __init__(self, endpoints: Endpoints, *, timeout_s: float, down_s: float = 1.0) -> None:
        urls = normalize(endpoints)
        self.endpoints = [Endpoint(url, make_client(url, timeout_s)) for url in urls]
        self.down_s = down_s

    def __len__(self) -> int:
        return len(self.endpoints)

    def preferred(self) -> Endpoint:
        """The first endpoint not marked down; when all are down, the one back soonest."""
        now = time.monotonic()
        for ep in self.endpoints:
            if ep.is_up(now):
                return ep
        return min(self.endpoints, key=lambda ep: ep.down_until)

    def next_after(self, current: Endpoint) -> Endpoint:
        """The next endpoint in ring order after `current` that is not marked down."""
        now = time.monotonic()
        start = self.endpoints.index(current)
        ring = self.endpoints[start + 1 :] + self.endpoints[: start + 1]
        for ep in ring:
            if ep.is_up(now):
                return ep
        return min(self.endpoints, key=lambda ep: ep.down_until)

    def mark_down(self, ep: Endpoint, exc: BaseException) -> None:
        ep.failures += 1
        ep.down_until = time.monotonic() + self.down_s
        log.warning("endpoint %s failed (%s); avoiding it for %.1f s", ep.url, exc, self.down_s)

    def mark_up(self, ep: Endpoint) -> None:
        ep.down_until = 0.0

    async def region_of(self, ep: Endpoint, key: str) -> str:
        """The region name the node reports (CRDT.INFO), or the URL for a plain Redis server;
        asked of the node serving `key` (any node answers, and that one is known to be up)."""
        if ep.region is None:
            ep.region = await region_name(ep.client_for(key), ep.url)
        return ep.region

    async def close(self) -> None:
        for ep in self.endpoints:
            await ep.close()


async def region_name(client: aredis.Redis, url: str) -> str:
    """The region name a node reports (CRDT.INFO; any node of a region answers for it), or `url`
    for a plain Redis server."""
    try:
        flat = await cmd(client, "CRDT.INFO")
    except redis.exceptions.ResponseError:
        return url
    info = {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}
    value = info.get(b"region", url.encode())
    return value.decode() if isinstance(value, bytes) else str(value)


async def cmd(client: aredis.Redis, *args: bytes | str | int | float) -> Any:
    """One command, raw RESP2 reply (the clients have no reply callbacks)."""
    return await client.execute_command(*args)  # type: ignore[no-untyped-call]
