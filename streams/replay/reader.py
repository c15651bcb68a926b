"""Read op-log topics from a Kafka cluster at explicit offsets, for the replay tools.

Uses `topology.kafka.consumer_config` (read_committed, partition-EOF events, 128 MB fetches) with
a fetch wait of at least 500 ms: Tansu's cost per fetch grows with the number of record batches
in a partition and it answers *nothing* when the wait expires first, so a short wait can never
read a topic of thousands of transactions. A partition's end is its EOF event, never the high
watermark (on Tansu the last batch's base offset + 1). Records come back raw (value bytes), so
`streams log` can show an undecodable record and go on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from topology.kafka import consumer_config
from topology.topics import LOCAL_SUFFIX, is_oplog_topic

READ_WAIT_MS = 500
STALL_TIMEOUT_S = 120.0
"""No event at all for this long while reading: the cluster is gone; fail with the positions."""

Partition = tuple[str, int]


class ReadError(RuntimeError):
    """The cluster could not be read (unreachable, a topic missing, a stalled fetch)."""


@dataclass(frozen=True)
class Raw:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    value: bytes | None


Sink = Callable[[Raw], bool]
"""Called per record in offset order per partition; returning False stops that partition."""


def _consumer(bootstrap: str) -> Consumer:
    config = consumer_config(bootstrap, f"streams-replay-{uuid.uuid4().hex[:8]}", READ_WAIT_MS)
    return Consumer(config)


def list_topics(bootstrap: str, timeout: float = 10.0) -> list[str]:
    consumer = _consumer(bootstrap)
    try:
        metadata = consumer.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ReadError(f"cannot list topics on {bootstrap}: {exc}") from exc
    finally:
        consumer.close()
    return sorted(t for t in metadata.topics if not t.startswith("__"))


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
) -> dict[Partition, int]:
    """Read each partition from its start to its end (EOF) or its stop offset (exclusive).

    Returns the next offset per partition (where the read ended). With `follow`, never ends on
    EOF (until the sink says stop or the process is interrupted).
    """
    stops = dict(stops or {})
    positions = dict(starts)
    todo = {p for p in starts if stops.get(p) is None or positions[p] < stops[p]}
    if not todo:
        return positions
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(t, p, positions[(t, p)]) for t, p in sorted(todo)])
        last_event = time.monotonic()
        while todo:
            # consume(n, timeout) waits the whole timeout unless n records arrive: wait for one
            # event, then take what is already there.
            first = consumer.poll(1.0)
            messages = [] if first is None else [first, *consumer.consume(10000, 0)]
            if not messages:
                if time.monotonic() - last_event > STALL_TIMEOUT_S:
                    where = ", ".join(f"{t}[{p}] at {positions[(t, p)]}" for t, p in sorted(todo))
                    raise ReadError(
                        f"no data nor end from {bootstrap} for {STALL_TIMEOUT_S}s: {where}"
                    )
                continue
            last_event = time.monotonic()
            done: list[Partition] = []
            for msg in messages:
                part = (msg.topic() or "", msg.partition() or 0)
                if part not in todo:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        positions[part] = max(positions[part], msg.offset() or 0)
                        if not follow:
                            done.append(part)
                            todo.discard(part)
                        continue
                    if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        raise ReadError(f"topic {part[0]} does not exist on {bootstrap}")
                    if err.fatal():
                        raise ReadError(f"reading {part[0]} on {bootstrap}: {err}")
                    continue
                offset = msg.offset() or 0
                stop = stops.get(part)
                if stop is not None and offset >= stop:
                    done.append(part)
                    todo.discard(part)
                    continue
                kind, ts = msg.timestamp()
                raw = Raw(part[0], part[1], offset, ts if kind != 0 else None, msg.value())
                positions[part] = offset + 1
                if not sink(raw) or (stop is not None and offset + 1 >= stop):
                    done.append(part)
                    todo.discard(part)
            if progress is not None:
                progress(len(messages))
            if done and todo:
                consumer.incremental_unassign([TopicPartition(t, p) for t, p in done])
    finally:
        consumer.close()
    return positions


def first_records(bootstrap: str, topics: list[str]) -> dict[str, Raw]:
    """The first record of each topic (empty topics are absent): how origins get their names."""
    found: dict[str, Raw] = {}

    def take(raw: Raw) -> bool:
        found[raw.topic] = raw
        return False

    read(bootstrap, {(t, 0): 0 for t in topics}, take)
    return found
