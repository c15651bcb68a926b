"""The producer/consumer SDK, synchronous face (the asyncio one is `streams.sdk.aio`).

    from streams.sdk import Producer, GroupConsumer

    endpoints = ["redis://127.0.0.1:6380", "redis://127.0.0.1:6381"]
    Producer(endpoints, "orders").send({"order": "42"})

    def handle(entry_id: str, fields: dict[bytes, bytes]) -> None:
        ...  # return: ack; raise: retry later (Retry / DeadLetter for explicit outcomes)

    GroupConsumer(endpoints, "orders", "billing", "worker-1", handle,
                  dead_letter="orders:dead").run()     # until stop()

Each class here is a thin wrapper: it builds its asyncio twin and runs its coroutines on a private
event-loop thread (`streams.sdk.portal`), so both faces share one implementation. See
docs/sdk.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Self

from streams.sdk import aio
from streams.sdk.checkpoint import CheckpointHandler, CheckpointStore, CheckpointTx, SQLiteStore
from streams.sdk.consumer import Handler
from streams.sdk.deadletter import DEAD_LETTER_FIELDS
from streams.sdk.endpoints import Endpoints
from streams.sdk.errors import DeadLetter, NoHealthyEndpoint, Retry, SdkError, is_transient
from streams.sdk.metrics import CountingMetrics, Metrics
from streams.sdk.portal import Portal
from streams.sdk.producer import IDK_FIELD, Fields

__all__ = [
    "DEAD_LETTER_FIELDS",
    "IDK_FIELD",
    "CheckpointConsumer",
    "CheckpointStore",
    "CheckpointTx",
    "CountingMetrics",
    "DeadLetter",
    "GroupConsumer",
    "Handler",
    "Metrics",
    "NoHealthyEndpoint",
    "Producer",
    "Retry",
    "SQLiteStore",
    "SdkError",
    "is_transient",
]


class _SyncFace:
    """What every blocking face shares: an asyncio object (`aio`) run on a portal thread, closed
    with it, usable as a context manager."""

    _portal: Portal
    aio: Any

    def _stop_first(self) -> None:
        """Called before closing (consumers stop their loop)."""

    def close(self) -> None:
        self._stop_first()
        try:
            self._portal.call(self.aio.close())
        finally:
            self._portal.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SyncConsumer(_SyncFace):
    """The run loop of the blocking consumers."""

    def run(self) -> None:
        """Handle entries until `stop()` (another thread, a signal handler) or Ctrl-C; the
        current entry is finished first."""
        future = self._portal.submit(self.aio.run())
        try:
            future.result()
        except KeyboardInterrupt:
            self.aio.stop()
            future.result()

    def run_once(self) -> int:
        """One step: returns how many entries it handled."""
        result: int = self._portal.call(self.aio.run_once())
        return result

    def stop(self) -> None:
        self.aio.stop()

    def _stop_first(self) -> None:
        self.aio.stop()


class Producer(_SyncFace):
    """`streams.sdk.aio.Producer`, blocking.

    `maxlen` / `approximate`: XADD's MAXLEN [~]; `idempotency`: every entry carries an
    idempotency key (IDMP where the server has it, else an `_idk` field); `producer_id`: IDMP's
    producer ID (default: a new one per producer); `batch_size`: entries per pipelined request of
    `send_many`; `timeout_s`: a request's socket timeout; `retry_deadline_s`: how long a send is
    retried, failing over between endpoints; `down_s`: how long an endpoint that failed is
    skipped; `metrics`: counters and timings (`streams.sdk.metrics.Metrics`)."""

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
        self._portal = Portal(f"streams-sdk-producer-{stream}")
        self.aio: aio.Producer = aio.Producer(
            endpoints,
            stream,
            maxlen=maxlen,
            approximate=approximate,
            idempotency=idempotency,
            producer_id=producer_id,
            batch_size=batch_size,
            timeout_s=timeout_s,
            retry_deadline_s=retry_deadline_s,
            down_s=down_s,
            metrics=metrics,
        )

    def send(self, fields: Fields, *, idempotency_key: str | bytes | None = None) -> str:
        """XADD one entry (retried, failing over); returns its ID."""
        return self._portal.call(self.aio.send(fields, idempotency_key=idempotency_key))

    def send_many(
        self,
        entries: Iterable[Fields],
        *,
        idempotency_keys: Iterable[str | bytes | None] | None = None,
    ) -> list[str]:
        """XADD many entries in pipelined batches; returns their IDs in order."""
        return self._portal.call(self.aio.send_many(entries, idempotency_keys=idempotency_keys))

    @property
    def retries(self) -> int:
        return self.aio.retries


class GroupConsumer(_SyncConsumer):
    """`streams.sdk.aio.GroupConsumer`, blocking. A plain handler runs in a worker thread.

    `count` / `block_ms`: XREADGROUP's COUNT and BLOCK; `claim_idle_ms`: entries pending this
    long in another consumer are reclaimed (XREADGROUP CLAIM where the server has it, else an
    XAUTOCLAIM sweep); `max_deliveries`: after this many failed deliveries an entry goes to
    `dead_letter` (a stream; None: dropped with a log line); `retry_ms`: the delay before a
    failed entry is retried; `start_id`: where a group the consumer creates starts; `metrics`
    and `metrics_interval_s`: counters and how often they are reported; `dedupe_size`: entry
    IDs remembered to skip a redelivery already handled; `timeout_s` / `down_s`: socket timeout,
    and how long a failed endpoint is skipped; `concurrency`: handlers run at once within a
    batch (1: one after the other)."""

    def __init__(
        self,
        endpoints: Endpoints,
        stream: str,
        group: str,
        consumer: str,
        handler: Handler,
        *,
        count: int = 10,
        block_ms: int = 2000,
        claim_idle_ms: int = 30000,
        max_deliveries: int | None = 5,
        dead_letter: str | None = None,
        retry_ms: int = 1000,
        start_id: str = "0",
        metrics: Metrics | None = None,
        metrics_interval_s: float = 5.0,
        dedupe_size: int = 100_000,
        timeout_s: float = 5.0,
        down_s: float = 1.0,
        concurrency: int = 1,
    ) -> None:
        self._portal = Portal(f"streams-sdk-consumer-{consumer}")
        self.aio: aio.GroupConsumer = aio.GroupConsumer(
            endpoints,
            stream,
            group,
            consumer,
            handler,
            count=count,
            block_ms=block_ms,
            claim_idle_ms=claim_idle_ms,
            max_deliveries=max_deliveries,
            dead_letter=dead_letter,
            retry_ms=retry_ms,
            start_id=start_id,
            metrics=metrics,
            metrics_interval_s=metrics_interval_s,
            dedupe_size=dedupe_size,
            timeout_s=timeout_s,
            down_s=down_s,
            concurrency=concurrency,
        )

    @property
    def endpoint(self) -> str:
        return self.aio.endpoint


class CheckpointConsumer(_SyncConsumer):
    """`streams.sdk.aio.CheckpointConsumer`, blocking (seed 002's checkpointing consumer).

    `batch_size`: entries read per XRANGE; `poll_ms`: the wait when nothing new arrived;
    `timeout_s`: a request's socket timeout."""

    def __init__(
        self,
        endpoint: Endpoints,
        stream: str,
        name: str,
        handler: CheckpointHandler,
        store: CheckpointStore | None = None,
        *,
        batch_size: int = 100,
        poll_ms: int = 200,
        timeout_s: float = 5.0,
    ) -> None:
        self._portal = Portal(f"streams-sdk-checkpoint-{name}")
        self.aio: aio.CheckpointConsumer = aio.CheckpointConsumer(
            endpoint,
            stream,
            name,
            handler,
            store,
            batch_size=batch_size,
            poll_ms=poll_ms,
            timeout_s=timeout_s,
        )

    @property
    def store(self) -> CheckpointStore:
        return self.aio.store

    @property
    def checkpoint(self) -> str | None:
        return self.aio.checkpoint

    @property
    def skipped(self) -> int:
        return self.aio.skipped
