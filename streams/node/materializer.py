"""The materializer's Kafka side: read every op-log topic on the region's cluster.

One consumer thread reads, with `assign()` at explicit offsets (every materializer reads
everything, and a group join costs seconds), every `*.oplog` topic on the cluster (the region's
own and the mirrored ones, under either MirrorMaker 2 naming) plus the region's own `.local`
topic, and hands decoded batches to the node. "Caught up" is detected with partition-EOF events
(Tansu's watermark query reports the last batch's base offset + 1, not the log end). A record
that does not decode stops the materializer with its topic, partition and offset named: nothing
is skipped silently.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

from streams.crdt import ops
from streams.ops.codec import DecodeError, decode
from topology.topics import is_oplog_topic

log = logging.getLogger(__name__)

TOPIC_REFRESH_S = 0.5
FETCH_WAIT_MS = 5
"""Tansu holds an empty fetch for the whole fetch.wait.max.ms (librdkafka's default is 500 ms),
so the default would add ~250 ms to replication on average; a short wait costs a few idle polls."""


@dataclass(frozen=True)
class Decoded:
    topic: str
    partition: int
    offset: int
    record: ops.Op | ops.LocalOp


class CorruptRecord(RuntimeError):
    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(
            f"cannot decode the record at topic {topic} partition {partition} offset {offset}: "
            f"{reason}; the materializer stopped (nothing was skipped)"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset


Batch = list[Decoded]


class Materializer:
    def __init__(
        self,
        bootstrap: str,
        local_topic: str,
        on_batch: Callable[[Batch], None],
        on_error: Callable[[Exception], None],
        start_offsets: dict[str, int] | None = None,
        name: str = "materializer",
    ) -> None:
        self.bootstrap = bootstrap
        self.local_topic = local_topic
        self._on_batch = on_batch
        self._on_error = on_error
        self._start = dict(start_offsets or {})
        self._config: dict[str, str | int | bool] = {
                "bootstrap.servers": bootstrap,
                "group.id": f"streams-{name}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "log_level": 3,
        }
        self._consumer = Consumer(self._config)
        self._assigned: set[str] = set()
        self._at_eof: dict[str, bool] = {}
        self.positions: dict[str, int] = {}
        self.caught_up = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.error: Exception | None = None

    def read_to_end(self, topic: str, start: int, timeout: float = 10.0) -> Batch:
        """Read one topic from `start` to its end with a separate consumer (blocking).

        The node uses it after a failed append to learn whether the op landed after all, without
        waiting for the main consumer, which reports nothing new on an idle log.
        """
        consumer = Consumer({**self._config, "group.id": f"{self._config['group.id']}-reread"})
        consumer.assign([TopicPartition(topic, 0, start)])
        batch: Batch = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not read {topic} to its end in {timeout}s")
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return batch
                    raise RuntimeError(f"reading {topic}: {err}")
                offset = msg.offset() or 0
                try:
                    record = decode(msg.value())
                except DecodeError as exc:
                    raise CorruptRecord(topic, 0, offset, str(exc)) from exc
                batch.append(Decoded(topic, 0, offset, record))
        finally:
            consumer.close()

    def wants(self, topic: str) -> bool:
        return is_oplog_topic(topic) or topic == self.local_topic

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            self._consumer.close()
        except RuntimeError:
            pass

    def _refresh(self) -> None:
        metadata = self._consumer.list_topics(timeout=5)
        new = [t for t in metadata.topics if self.wants(t) and t not in self._assigned]
        if not new:
            return
        for topic in new:
            self._assigned.add(topic)
            self._at_eof[topic] = False
            self.positions.setdefault(topic, self._start.get(topic, 0))
        self._consumer.incremental_assign(
            [TopicPartition(t, 0, self.positions[t]) for t in new]
        )
        self.caught_up.clear()

    def _run(self) -> None:
        next_refresh = 0.0
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= next_refresh:
                    self._refresh()
                    next_refresh = now + TOPIC_REFRESH_S
                # consume(n, timeout) waits the whole timeout unless n records arrive: wait for
                # one, then take what is already there.
                first = self._consumer.poll(0.05)
                messages = [] if first is None else [first, *self._consumer.consume(999, 0)]
                batch: Batch = []
                for msg in messages:
                    topic = msg.topic() or ""
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            self._at_eof[topic] = True
                            continue
                        log.warning("materializer: %s", err)
                        continue
                    offset = msg.offset() or 0
                    partition = msg.partition() or 0
                    try:
                        record = decode(msg.value())
                    except DecodeError as exc:
                        raise CorruptRecord(topic, partition, offset, str(exc)) from exc
                    batch.append(Decoded(topic, partition, offset, record))
                    self.positions[topic] = offset + 1
                    self._at_eof[topic] = False
                if batch:
                    self._on_batch(batch)
                if self._assigned and all(self._at_eof.values()) and not batch:
                    self.caught_up.set()
        except Exception as exc:  # reported to the node, which refuses to go on silently
            self.error = exc
            log.error("%s", exc)
            self._on_error(exc)
