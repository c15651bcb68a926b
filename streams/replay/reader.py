"""Read op-log topics from a Kafka cluster at explicit offsets, for the replay tools.

Uses `streams.kafka.reading.consumer_config` (read_committed, partition-EOF events, 128 MB fetches)
with a fetch wait of at least 500 ms: Tansu's cost per fetch grows with the number of record batches
in a partition and it answers *nothing* when the wait expires first, so a short wait can never
read a topic of thousands of transactions. A partition's end is its EOF event, never the high
watermark (on Tansu the last batch's base offset + 1): `streams.kafka.reading.ReadToEnd` reads to
it. Records come back raw (value bytes), so `streams log` can show an undecodable record and go on.
Partitions are explicit everywhere: a region's logs have one partition per shard.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streams.kafka.gate import ReadHeaders
from streams.kafka.reading import Partition, ReadToEnd, consumer_config
from streams.kafka.topics import LOCAL_SUFFIX, is_oplog_topic
from streams.replay import kafka_connect

READ_WAIT_MS = 500
STALL_TIMEOUT_S = 120.0
"""No event at all for this long while reading: the cluster is gone; fail with the positions."""


class ReadError(RuntimeError):
    """The cluster could not be read as asked (a topic missing, a fatal error); an unreachable
    or stalled cluster is `kafka_connect.Unreachable` instead."""


@dataclass(frozen=True)
class Raw:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    value: bytes | None
    headers: ReadHeaders | None = None
    """Only when the read asked for them (a signing region's records are checked with them)."""


Sink = Callable[[Raw], bool]
"""Called per record in offset order per partition; returning False stops that partition."""


def _consumer(bootstrap: str) -> Consumer:
    """A reader's consumer, once `bootstrap` answered as Kafka (`kafka_connect.ensure`: a wrong
    address fails at once with one line, not librdkafka's retries)."""
    kafka_connect.ensure(bootstrap)
    config = consumer_config(bootstrap, f"streams-replay-{uuid.uuid4().hex[:8]}", READ_WAIT_MS)
    return Consumer(kafka_connect.client_config(config))


def partition_counts(bootstrap: str, timeout: float = 10.0) -> dict[str, int]:
    """Every topic on the cluster (Kafka's internal `__` ones left out) -> its partition count:
    a region's logs have one partition per shard."""
    return describe(bootstrap, timeout)[0]


def describe(bootstrap: str, timeout: float = 10.0) -> tuple[dict[str, int], str | None]:
    """`partition_counts`, and the cluster's id (`streams.kafka.clusters`: every position a
    verb prints or stores says which cluster it was read from; None if the broker names none)."""
    consumer = _consumer(bootstrap)
    try:
        metadata = kafka_connect.metadata(consumer, bootstrap, timeout)
    finally:
        consumer.close()
    counts = {
        name: len(topic.partitions)
        for name, topic in sorted(metadata.topics.items())
        if not name.startswith("__")
    }
    return counts, metadata.cluster_id or None


def low_watermarks(
    bootstrap: str, parts: Iterable[Partition], timeout: float = 10.0
) -> dict[Partition, int]:
    """Each partition's first offset still held (moved past 0 by DeleteRecords: retention)."""
    wanted = list(parts)
    if not wanted:
        return {}
    consumer = _consumer(bootstrap)
    lows: dict[Partition, int] = {}
    try:
        for t, p in wanted:
            try:
                low, _high = consumer.get_watermark_offsets(
                    TopicPartition(t, p), timeout=timeout, cached=False
                )
            except KafkaException:  # no such partition (yet): nothing was deleted from it
                low = 0
            lows[(t, p)] = low
    finally:
        consumer.close()
    return lows


class Truncated(ReadError):
    """A read would start before a partition's first record still held (the retention policy
    deleted the records before it)."""


def refuse_truncated(bootstrap: str, starts: Mapping[Partition, int], why: str) -> None:
    """Raise `Truncated` naming the first partition whose start retention deleted: `why` says
    what the read is for and what cannot be done without those records."""
    lows = low_watermarks(bootstrap, starts)
    for part in sorted(starts):
        if lows.get(part, 0) > starts[part]:
            raise Truncated(
                f"{part[0]} partition {part[1]} on {bootstrap} now starts at offset"
                f" {lows[part]}: the records before it were deleted by the retention policy,"
                f" and {why} needs them from offset {starts[part]}"
            )


def list_topics(bootstrap: str, timeout: float = 10.0) -> list[str]:
    return list(partition_counts(bootstrap, timeout))


def oplog_topics(topics: list[str]) -> list[str]:
    return [t for t in topics if is_oplog_topic(t)]


def local_topics(topics: list[str]) -> list[str]:
    return [t for t in topics if t.endswith(LOCAL_SUFFIX)]


def read(
    bootstrap: str,
    starts: Mapping[Partition, int],
    sink: Sink,
    *,
    stops: Mapping[Partition, int] | None = None,
    follow: bool = False,
    progress: Callable[[int], None] | None = None,
    headers: bool = False,
) -> dict[Partition, int]:
    """Read each partition from its start to its end (EOF) or its stop offset (exclusive).

    Returns the next offset per partition (where the read ended). With `follow`, never ends on
    EOF (until the sink says stop or the process is interrupted). `headers`: hand each record's
    headers to the sink too (`streams.kafka.records.Admission.wants_headers`).
    """
    stops = dict(stops or {})
    positions = dict(starts)
    todo = {p for p in starts if stops.get(p) is None or positions[p] < stops[p]}
    if not todo:
        return positions

    def on_error(msg: Message[Any, Any]) -> None:
        err = msg.error()
        assert err is not None
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise ReadError(f"topic {msg.topic()} does not exist on {bootstrap}")
        if err.fatal():
            raise ReadError(f"reading {msg.topic()} on {bootstrap}: {err}")

    def counted(consumer: Consumer, batch: list[Message[Any, Any]]) -> Consumer:
        if batch and progress is not None:
            progress(len(batch))
        return consumer

    consumer = _consumer(bootstrap)
    try:
        reading = ReadToEnd(
            consumer,
            {p: positions[p] for p in todo},
            doing=f"reading from {bootstrap}",
            stall_timeout=STALL_TIMEOUT_S,
            wait_s=1.0,
            on_error=on_error,
            after_batch=counted,
            follow=follow,
            timeout_error=kafka_connect.Unreachable,  # stalled: the cluster went away
        )
        for msg in reading:
            part = (msg.topic() or "", msg.partition() or 0)
            offset = msg.offset() or 0
            stop = stops.get(part)
            if stop is not None and offset >= stop:
                # A record at or past the stop proves every offset before it was read: those
                # without a data record are transaction markers (or aborted), which
                # read_committed never delivers. So the stop is reached, not "last record + 1".
                positions[part] = max(positions[part], stop)
                reading.finish(part)
                continue
            kind, ts = msg.timestamp()
            raw = Raw(
                part[0],
                part[1],
                offset,
                ts if kind != 0 else None,
                msg.value(),
                msg.headers() if headers else None,
            )
            positions[part] = offset + 1
            if not sink(raw) or (stop is not None and offset + 1 >= stop):
                reading.finish(part)
        for part, end in reading.ends.items():
            positions[part] = max(positions[part], end)
    finally:
        consumer.close()
    return positions


def first_records(bootstrap: str, parts: Iterable[Partition]) -> dict[Partition, Raw]:
    """The first record of each partition (empty ones are absent): how origins get their names
    (a shard may be the only one whose partition an origin wrote to)."""
    found: dict[Partition, Raw] = {}

    def take(raw: Raw) -> bool:
        found[(raw.topic, raw.partition)] = raw
        return False

    read(bootstrap, dict.fromkeys(parts, 0), take)
    return found
