"""The materializer's Kafka side: read every op-log topic on the region's cluster.

One consumer thread reads, with `assign()` at explicit offsets (every materializer reads
everything, and a group join costs seconds), every `*.oplog` topic on the cluster (the region's
own and the mirrored ones, under either MirrorMaker 2 naming) plus the region's own `.local`
topic, and hands decoded batches to the node.

"Caught up" (the node serves only after it) means every topic reached its end at least once
since start (`topology.kafka.EndTracker`: right in any order of records and EOF events, and on
Tansu, whose high watermark is not the log end): the region's own logs by partition EOF, other
regions' logs, which may grow steadily meanwhile, also by reading past the first end the broker
reported. The fetch wait follows
`topology.kafka.FetchPacer`: long while reading the backlog, short while records flow, long again
when idle, and doubled whenever the broker keeps answering without the records it has (Tansu's
cost per fetch grows with a partition's history; a fixed 5 ms wait made a node with a few
thousand transactions in its log unable to start). Changing the wait means a new librdkafka
consumer, assigned where the old one stopped.

The region's own `.local` topic is read to its end before any other topic is assigned: the
node's catch-up fold (`streams.replay.fold.Fold`) must know every local op before the replicated
ops that came after it, to apply each local op on exactly the state it was made on.

A record that does not decode stops the materializer with its topic, partition and offset named:
nothing is skipped silently. An operator who decided that such a record carries nothing (a
foreign producer wrote to the topic, say) names it with `--skip-record TOPIC:PARTITION:OFFSET`;
that record alone is skipped, with a warning in the log. A named record that does decode is
applied all the same: skipping a real op would make the region diverge for good.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streams.crdt import ops
from streams.ops.codec import DecodeError, decode
from topology.kafka import (
    EndTracker,
    FetchPacer,
    Pacing,
    Partition,
    consumer_config,
    poll_batch,
)
from topology.topics import is_oplog_topic

log = logging.getLogger(__name__)

TOPIC_REFRESH_S = 0.5
TOPIC_RETRY_S = 1.0
PROGRESS_EVERY_S = 5.0
POLL_S = 0.05
MAX_BATCH = 10_000


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
            f"{reason}; the materializer stopped (nothing was skipped; if this record carries "
            f"no op, restart the node with --skip-record {topic}:{partition}:{offset})"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset


Batch = list[Decoded]

RecordAt = tuple[str, int, int]
"""(topic, partition, offset) of one record."""


def parse_record_at(text: str) -> RecordAt:
    """'r2.oplog:0:1234' -> ('r2.oplog', 0, 1234); ValueError with the expected form."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"expected TOPIC:PARTITION:OFFSET (e.g. r2.oplog:0:1234), got {text!r}")
    return parts[0], int(parts[1]), int(parts[2])


class Materializer:
    def __init__(
        self,
        bootstrap: str,
        local_topic: str,
        on_batch: Callable[[Batch], None],
        on_error: Callable[[Exception], None],
        start_offsets: dict[str, int] | None = None,
        name: str = "materializer",
        pacing: Pacing | None = None,
        own_topics: frozenset[str] = frozenset(),
        skip_records: frozenset[RecordAt] = frozenset(),
    ) -> None:
        """`own_topics`: the region's own logs; read while catching up, then dropped, since the
        live node applied their ops when it wrote them (reading them back would only decode
        every write of the region to throw it away)."""
        self.bootstrap = bootstrap
        self.local_topic = local_topic
        self.name = name
        self._on_batch = on_batch
        self._on_error = on_error
        self._start = dict(start_offsets or {})
        self.own_topics = own_topics
        self.skip_records = skip_records
        self.records_skipped = 0
        self._local_read = False  # the .local backlog is read: the other topics may come
        self.own_positions: dict[str, int] = {}
        """Where reading the own topics stopped when they were dropped after catching up."""
        self._group_id = f"streams-{name}"
        self.pacing = pacing or Pacing()
        self._pacer = FetchPacer(self.pacing, time.monotonic())
        self._consumer = self._new_consumer(self._pacer.wait_ms)
        self._tracker = EndTracker()
        self._tracker_lock = threading.Lock()
        self.records_read = 0
        self.caught_up = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.error: Exception | None = None

    # --- what the node reads -------------------------------------------------------------------

    @property
    def positions(self) -> dict[str, int]:
        """The next offset to read per topic (partition 0: op logs have one partition)."""
        with self._tracker_lock:
            return {t: s.position for (t, _p), s in self._tracker.partitions.items()}

    @property
    def fetch_wait_ms(self) -> int:
        return self._pacer.wait_ms

    def progress(self) -> str:
        """Per topic: where reading is and where the end is, as far as known."""
        with self._tracker_lock:
            return self._tracker.describe()

    # --- life cycle ----------------------------------------------------------------------------

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

    def wake(self) -> None:
        """Records are expected soon (a sync is under way): leave the idle fetch wait now."""
        self._wake.set()

    def wants(self, topic: str) -> bool:
        return is_oplog_topic(topic) or topic == self.local_topic

    # --- the consumer thread -------------------------------------------------------------------

    def _new_consumer(self, wait_ms: int) -> Consumer:
        return Consumer(consumer_config(self.bootstrap, self._group_id, wait_ms))

    def _refresh(self) -> None:
        metadata = self._consumer.list_topics(timeout=5)
        with self._tracker_lock:
            new = [
                t
                for t in metadata.topics
                if self.wants(t) and (t, 0) not in self._tracker.partitions
            ]
            if self.caught_up.is_set():
                new = [t for t in new if t not in self.own_topics]
            if not self._local_read:
                local = self._tracker.partitions.get((self.local_topic, 0))
                if local is not None and local.reached_end:
                    self._local_read = True
                elif self.local_topic in metadata.topics:
                    new = [t for t in new if t == self.local_topic]
                else:
                    self._local_read = True  # no local log (yet): nothing to read first
            for topic in new:
                # Other regions' logs may grow steadily while they are read: caught up at the
                # end first reported (topology.kafka's docstring says why).
                growing = topic not in self.own_topics
                self._tracker.assign((topic, 0), self._start.get(topic, 0), growing=growing)
        if new:
            self._consumer.incremental_assign(
                [TopicPartition(t, 0, self._start.get(t, 0)) for t in new]
            )

    def _drop_own_topics(self) -> None:
        with self._tracker_lock:
            own = [p for p in self._tracker.partitions if p[0] in self.own_topics]
            for part in own:
                self.own_positions[part[0]] = self._tracker.partitions[part].position
                del self._tracker.partitions[part]
        if own:
            self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in own])

    def _repace(self, wait_ms: int) -> None:
        """A new consumer with another fetch wait, assigned where reading stands."""
        old = self._consumer
        self._consumer = self._new_consumer(wait_ms)
        old.close()
        with self._tracker_lock:
            where = [
                TopicPartition(t, p, state.position)
                for (t, p), state in self._tracker.partitions.items()
            ]
        if where:
            self._consumer.assign(where)
        log.debug("%s: fetch wait now %d ms", self.name, wait_ms)

    def _decode(self, msg: Message[Any, Any]) -> Decoded | None:
        """The decoded record; None for an undecodable one the operator named to skip."""
        topic = msg.topic() or ""
        partition = msg.partition() or 0
        offset = msg.offset() or 0
        try:
            record = decode(msg.value())
        except DecodeError as exc:
            if (topic, partition, offset) in self.skip_records:
                self.records_skipped += 1
                log.warning(
                    "%s: skipping the record at topic %s partition %d offset %d as "
                    "--skip-record asked: %s",
                    self.name,
                    topic,
                    partition,
                    offset,
                    exc,
                )
                return None
            raise CorruptRecord(topic, partition, offset, str(exc)) from exc
        if (topic, partition, offset) in self.skip_records:
            log.warning(
                "%s: --skip-record names topic %s partition %d offset %d, but that record "
                "decodes: applied, not skipped",
                self.name,
                topic,
                partition,
                offset,
            )
        return Decoded(topic, partition, offset, record)

    def _poll(self) -> tuple[Batch, set[Partition]]:
        messages = poll_batch(self._consumer, POLL_S, MAX_BATCH)
        batch: Batch = []
        delivered: set[Partition] = set()
        with self._tracker_lock:
            for msg in messages:
                err = msg.error()
                part = (msg.topic() or "", msg.partition() or 0)
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self._tracker.on_eof(part, msg.offset() or 0)
                    else:
                        log.warning("%s: %s", self.name, err)
                    continue
                decoded = self._decode(msg)
                delivered.add(part)
                self._tracker.on_record(part, msg.offset() or 0)
                if decoded is not None:
                    batch.append(decoded)
            for part in self._tracker.partitions:
                _low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(*part), cached=True
                )
                self._tracker.on_high_watermark(part, high)
        return batch, delivered

    def _run(self) -> None:
        next_refresh = 0.0
        next_progress = time.monotonic() + PROGRESS_EVERY_S
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= next_refresh:
                    next_refresh = now + TOPIC_REFRESH_S
                    try:
                        self._refresh()
                    except KafkaException as exc:
                        # The broker is unreachable for now (frozen, restarting): the topic list
                        # is looked up again later; reading goes on with what is assigned.
                        log.warning("%s: cannot list topics, retrying: %s", self.name, exc)
                        next_refresh = now + TOPIC_RETRY_S
                batch, delivered = self._poll()
                self.records_read += len(batch)
                if batch:
                    self._on_batch(batch)
                now = time.monotonic()
                with self._tracker_lock:
                    local = self._tracker.partitions.get((self.local_topic, 0))
                    if not self._local_read and local is not None and local.reached_end:
                        next_refresh = 0.0  # assign the other topics now
                    caught_up = self._local_read and self._tracker.caught_up()
                    behind = {p for p in self._tracker.partitions if self._tracker.behind(p)}
                if caught_up and not self.caught_up.is_set():
                    self._pacer.caught_up(now)
                    self.caught_up.set()
                    self._drop_own_topics()
                    log.info(
                        "%s: caught up: %d records in %.1f s",
                        self.name,
                        self.records_read,
                        now - started,
                    )
                elif not self.caught_up.is_set() and now >= next_progress:
                    next_progress = now + PROGRESS_EVERY_S
                    log.info(
                        "%s: catching up, %d records read in %.0f s: %s",
                        self.name,
                        self.records_read,
                        now - started,
                        self.progress(),
                    )
                wait = self._pacer.observe(now, delivered, behind)
                if self._wake.is_set():
                    self._wake.clear()
                    wait = self._pacer.wake(now) or wait
                if wait is not None:
                    self._repace(wait)
        except Exception as exc:  # reported to the node, which refuses to go on silently
            self.error = exc
            log.error("%s", exc)
            self._on_error(exc)
