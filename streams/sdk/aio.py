"""The asyncio face of the SDK: the same classes as `streams.sdk`, with coroutine methods.

    from streams.sdk.aio import Producer, GroupConsumer

    producer = Producer(["redis://127.0.0.1:6380", "redis://127.0.0.1:6381"], "orders")
    entry_id = await producer.send({"order": "42"})

Handlers may be coroutine functions (awaited on the loop) or plain functions (run in a worker
thread, so a slow one does not stop lease renewal).
"""

from streams.sdk.checkpoint import CheckpointConsumer, CheckpointStore, SQLiteStore
from streams.sdk.consumer import GroupConsumer, Handler
from streams.sdk.deadletter import DEAD_LETTER_FIELDS
from streams.sdk.errors import DeadLetter, NoHealthyEndpoint, Retry, SdkError, is_transient
from streams.sdk.metrics import CountingMetrics, Metrics
from streams.sdk.producer import IDK_FIELD, Producer

__all__ = [
    "DEAD_LETTER_FIELDS",
    "IDK_FIELD",
    "CheckpointConsumer",
    "CheckpointStore",
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
