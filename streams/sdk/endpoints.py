"""Region endpoints and the choice of the one to talk to.

Active-active means every region takes writes and reads, so failover is a client decision: the
SDK keeps one asyncio redis-py client per endpoint and a "down until" time for each. A transient
failure marks the endpoint down for `down_s`; `preferred()` is the first endpoint not marked down,
so a producer returns to the first endpoint once its down time has passed and a probe succeeds.
Consumers stay where they are until their endpoint fails (`next_after`), because every move
re-delivers the entries read but not yet replicated as acknowledged.

Clients are RESP2 with redis-py's reply callbacks removed: the SDK parses the raw replies itself,
so the shape it sees does not change with redis-py's version, and redis-py's own retries are off
(a silent re-send of XADD after a timeout would be a duplicate the SDK cannot mark).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aredis
import redis.exceptions
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import NoBackoff

from streams.sdk.errors import SdkError

log = logging.getLogger("streams.sdk")

Endpoints = str | Sequence[str]


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
    client.response_callbacks.clear()
    return client  # type: ignore[no-any-return]


@dataclass
class Endpoint:
    url: str
    client: aredis.Redis
    down_until: float = 0.0
    region: str | None = None  # the node's region name (CRDT.INFO), learnt on first use
    failures: int = field(default=0)

    def is_up(self, now: float) -> bool:
        return self.down_until <= now


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

    async def region_of(self, ep: Endpoint) -> str:
        """The region name the node reports (CRDT.INFO), or the URL for a plain Redis server."""
        if ep.region is None:
            try:
                flat = await cmd(ep.client, "CRDT.INFO")
                info = {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}
                value = info.get(b"region", ep.url.encode())
                ep.region = value.decode() if isinstance(value, bytes) else str(value)
            except redis.exceptions.ResponseError:  # a plain Redis server: name it by its URL
                ep.region = ep.url
        return ep.region

    async def close(self) -> None:
        for ep in self.endpoints:
            await ep.client.aclose()


async def cmd(client: aredis.Redis, *args: bytes | str | int | float) -> Any:
    """One command, raw RESP2 reply (the clients have no reply callbacks)."""
    return await client.execute_command(*args)  # type: ignore[no-untyped-call]
