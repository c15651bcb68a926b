"""The asyncio producer: XADD to the first healthy region, retrying transient failures.

Any region takes writes (active-active), so a failed write is retried on the next endpoint at
once and on the same one after a short backoff once every endpoint has failed. A retried XADD may
have landed the first time (the reply was lost), so a retry can write the entry twice, possibly
in two regions under two IDs. An idempotency key prevents that: pass `idempotency_key=` or
construct with `idempotency=True` to get a random one per entry. Where the server has XADD IDMP
(Redis 8.6, and every region of this database: `streams.sdk.capabilities`), the key is sent as
`IDMP <producer_id> <key>`: a retry, in the same region or in another one after a failover,
gets the first entry's ID back and writes nothing (across regions once they have synced; two
concurrent copies converge to one, docs/architecture.md). Elsewhere the key travels as the
`_idk` field, which the consumers drop the second copy by.

In a region whose shards are spread over several nodes, the writes go to the node serving the
stream's slot, found by following MOVED from the node named (`streams.sdk.endpoints`); a MOVED
write did not run, so following it writes nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeVar

import redis.asyncio as aredis

from streams.sdk.capabilities import Capabilities
from streams.sdk.endpoints import Endpoint, Endpoints, EndpointSet
from streams.sdk.errors import NoHealthyEndpoint, SdkError, is_transient
from streams.sdk.metrics import Metrics

log = logging.getLogger("streams.sdk.producer")

IDK_FIELD = b"_idk"
"""The field holding an entry's idempotency key."""

FieldValue = str | bytes | int | float
Fields = Mapping[str, FieldValue] | Mapping[bytes, FieldValue] | Mapping[str | bytes, FieldValue]
"""An entry's fields; keys and values are sent as bytes (numbers in their repr)."""
T = TypeVar("T")


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SdkError(f"field names and values must be str, bytes, int or float, not {value!r}")
    return repr(value).encode()


def encode_fields(fields: Fields, idempotency_key: str | bytes | None) -> list[bytes]:
    """Flat `f1 v1 f2 v2 ...` with the idempotency key last; at least one field."""
    if not isinstance(fields, Mapping):
        raise SdkError(f"an entry is a mapping of field -> value, not {type(fields).__name__}")
    flat: list[bytes] = []
    for name, value in fields.items():
        key = _bytes(name)
        if key == IDK_FIELD and idempotency_key is not None:
            raise SdkError("pass the idempotency key either as the _idk field or as the argument")
        flat += [key, _bytes(value)]
    if idempotency_key is not None:
        flat += [IDK_FIELD, _bytes(idempotency_key)]
    if not flat:
        raise SdkError("an entry needs at least one field")
    return flat


class Producer:
    """Appends entries to `stream` through the first healthy endpoint (see the module doc)."""

    def __init__(
        self,
        endpoints: Endpoints,
        stream: str,
        *,
        maxlen: int | None = None,
        approximate: bool = True,
        idempotency: bool = False,
        producer_id: str | None = None,
        batch_size: int = 200,
        timeout_s: float = 5.0,
        retry_deadline_s: float = 30.0,
        down_s: float = 1.0,
        metrics: Metrics | None = None,
    ) -> None:
        if not stream:
            raise SdkError("stream name must not be empty")
        if maxlen is not None and maxlen < 0:
            raise SdkError("maxlen must be >= 0")
        if batch_size < 1:
            raise SdkError("batch_size must be >= 1")
        self.endpoints = EndpointSet(endpoints, timeout_s=timeout_s, down_s=down_s)
        self.stream = stream
        self.maxlen = maxlen
        self.approximate = approximate
        self.idempotency = idempotency
        self.producer_id = producer_id or f"sdk-{uuid.uuid4().hex}"
        """IDMP's producer ID: the same for every retry of this producer's entries."""
        self.capabilities = Capabilities()
        self.batch_size = batch_size
        self.retry_deadline_s = retry_deadline_s
        self.metrics = metrics or Metrics()
        self._last: Endpoint | None = None
        self.retries = 0
        """Requests sent again after a transient failure (each may have written a duplicate)."""

    def _xadd_args(
        self, fields: Fields, key: str | bytes | None, idmp: bool
    ) -> list[bytes | str | int]:
        """The XADD of one entry: its key as IDMP where the server has it, else as `_idk`."""
        args: list[bytes | str | int] = ["XADD", self.stream]
        if key is not None and idmp:
            args += ["IDMP", self.producer_id, _bytes(key)]
        if self.maxlen is not None:
            args += ["MAXLEN", "~" if self.approximate else "=", self.maxlen]
        return args + ["*", *encode_fields(fields, None if idmp else key)]

    def _key(self, given: str | bytes | None) -> str | bytes | None:
        if given is None and self.idempotency:
            return uuid.uuid4().hex
        return given

    async def send(self, fields: Fields, *, idempotency_key: str | bytes | None = None) -> str:
        """XADD one entry; returns its ID."""
        key = self._key(idempotency_key)
        encode_fields(fields, key)  # refuse a bad entry before any I/O

        async def call(ep: Endpoint) -> str:
            idmp = key is not None and (await self.capabilities.of(ep, self.stream)).idmp
            reply = await ep.cmd(self.stream, *self._xadd_args(fields, key, idmp))
            return reply.decode() if isinstance(reply, bytes) else str(reply)

        return await self._with_failover(call)

    async def send_many(
        self,
        entries: Iterable[Fields],
        *,
        idempotency_keys: Iterable[str | bytes | None] | None = None,
    ) -> list[str]:
        """XADD many entries in pipelined batches of `batch_size`; returns their IDs in order.

        A batch whose connection fails is sent again whole (the server may have written part of
        it): every entry is written at least once, in order within a batch."""
        items = list(entries)
        keys = list(idempotency_keys) if idempotency_keys is not None else [None] * len(items)
        if len(keys) != len(items):
            raise SdkError("idempotency_keys must have one key (or None) per entry")
        entries_keys = [(f, self._key(k)) for f, k in zip(items, keys, strict=True)]
        for f, k in entries_keys:
            encode_fields(f, k)  # refuse a bad entry before any I/O
        ids: list[str] = []
        for start in range(0, len(entries_keys), self.batch_size):
            ids += await self._send_batch(entries_keys[start : start + self.batch_size])
        return ids

    async def _send_batch(self, batch: list[tuple[Fields, str | bytes | None]]) -> list[str]:
        done: dict[int, str] = {}
        idmp = False

        async def run(client: aredis.Redis) -> list[str]:
            todo = [i for i in range(len(batch)) if i not in done]
            pipe = client.pipeline(transaction=False)
            for i in todo:
                fields, key = batch[i]
                pipe.execute_command(*self._xadd_args(fields, key, idmp))
            replies = await pipe.execute(raise_on_error=False)
            first_error: BaseException | None = None
            for i, reply in zip(todo, replies, strict=True):
                if isinstance(reply, BaseException):
                    first_error = first_error or reply
                else:
                    done[i] = reply.decode() if isinstance(reply, bytes) else str(reply)
            if first_error is not None:
                raise first_error  # MOVED or transient: the rest is sent again; else it raises
            return [done[i] for i in range(len(batch))]

        async def call(ep: Endpoint) -> list[str]:
            nonlocal idmp
            idmp = (await self.capabilities.of(ep, self.stream)).idmp
            return await ep.call(self.stream, run)

        return await self._with_failover(call)

    async def _with_failover(self, call: Callable[[Endpoint], Awaitable[T]]) -> T:
        deadline = time.monotonic() + self.retry_deadline_s
        attempt = 0
        while True:
            ep = self.endpoints.preferred()
            try:
                result = await call(ep)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self.endpoints.mark_down(ep, exc)
                self.capabilities.forget(ep.url)
                attempt += 1
                self.retries += 1
                if time.monotonic() >= deadline:
                    raise NoHealthyEndpoint(
                        f"no endpoint took the write within {self.retry_deadline_s} s "
                        f"(last error on {ep.url}: {exc})"
                    ) from exc
                if self.endpoints.preferred() is ep or attempt >= len(self.endpoints):
                    await asyncio.sleep(min(0.05 * 2 ** min(attempt, 5), 1.0))
                continue
            if self._last is not None and self._last is not ep:
                log.info("producer for %s now writes to %s", self.stream, ep.url)
                self.metrics.failover(self._last.url, ep.url)
            self._last = ep
            return result

    async def close(self) -> None:
        await self.endpoints.close()

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
