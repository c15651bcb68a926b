"""A MirrorMaker-style mirror: copies each region's op log from its home cluster to the others.

Why our own mirror and not MirrorMaker 2 everywhere: the embedded topology (Tansu brokers, no JVM)
needs one, and tests need to replicate on demand (`copy_available`, `MirrorSet.copy_among`) and to
cut replication (`pause`). The docker-compose setup runs the real MirrorMaker 2 (topology/mm2/);
both produce the same topic names, so region nodes cannot tell them apart.

Guarantees:
- At least once, in source order, with key, value, headers and timestamp preserved. Duplicates are
  harmless: the materializer drops an op whose `(origin, seq)` it has already applied.
- Stateless resume: the target topic itself records how far the copy got. Every copied record
  carries `mirror.source` (the source cluster alias) and `mirror.offset` (its source offset); a
  restarted mirror reads the target's last record and continues at its `mirror.offset` + 1. No
  consumer group, no offset store that could disagree with the data. Before trusting it, the
  mirror checks that the source still holds that very record (same offset, key and value).
- Failures: Kafka errors are logged and retried (reopen the clients, resume from the target, but
  never past the first record whose delivery failed). A recreated target topic (a memory-only
  broker restarted) is refilled from the start; a recreated source topic, a multi-partition op
  log, or a target written by someone else raise MirrorError: retrying cannot fix those.
- A mirror only ever reads the exact topic `<region>.oplog` on the region's home cluster, never a
  mirrored copy (that would loop records around the clusters); a source record that already carries
  `mirror.source` is refused as a configuration error.

Tansu specifics handled here (docs/architecture.md, "Tansu"): the high watermark reported by
ListOffsets is the last batch's base offset + 1, so resume reads from there to partition EOF to
get the whole last batch; "caught up" is detected with partition EOF, not watermarks; topics are
created explicitly with one partition; consumers use assign(), never a consumer group; the source
consumer's fetch wait follows `topology.kafka.FetchPacer` (short while copying, long when idle,
doubled when the broker cannot assemble a fetch of a long log in time).

The command line (`python -m topology.mirror --topology FILE`) is `topology.mirror_cli`.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from topology.config import Topology
from topology.kafka import (
    MAX_RECORD_BYTES,
    EndTracker,
    FetchPacer,
    Pacing,
    ReadToEnd,
    consumer_config,
    poll_batch,
)
from topology.topics import TopicError, ensure_topics, mirrored_name, oplog_topic

log = logging.getLogger("topology.mirror")
_kafka_log = logging.getLogger("topology.mirror.kafka")


class _KnownConfigWarnings(logging.Filter):
    """librdkafka warns at every producer creation that the gapless guarantee we rely on is
    "experimental"; it is chosen on purpose, so the warning would only bury real ones."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "enable.gapless.guarantee is experimental" not in record.getMessage()


_kafka_log.addFilter(_KnownConfigWarnings())

MIRROR_SOURCE_HEADER = "mirror.source"
MIRROR_OFFSET_HEADER = "mirror.offset"

# How long a background mirror waits before looking again for a source topic that does not exist.
MISSING_TOPIC_RECHECK = 0.5
# How often an idle background mirror checks that its source and target topics are still the
# ones it started with (a memory-only broker that restarts recreates them under the same name).
TOPIC_CHECK_INTERVAL = 1.0

_FATAL_CONSUMER_ERRORS = {
    KafkaError._AUTO_OFFSET_RESET,
    KafkaError.OFFSET_OUT_OF_RANGE,
}


class MirrorError(RuntimeError):
    """A fatal condition that retrying cannot fix: the configuration or the logs are wrong."""


class MirrorTimeout(TimeoutError):
    """`copy_available` did not reach the source's end and get it acknowledged in time."""


def _header(headers: Sequence[tuple[str, str | bytes | None]] | None, name: str) -> bytes | None:
    """The last value of header `name` (the mirror appends its headers last)."""
    found: bytes | None = None
    for key, value in headers or ():
        if key == name:
            found = value.encode() if isinstance(value, str) else value
    return found


def _headers_list(message: Message[Any, Any]) -> list[tuple[str, str | bytes | None]]:
    headers = message.headers()
    if headers is None:
        return []
    if isinstance(headers, dict):
        return list(headers.items())
    return list(headers)


class Mirror:
    """Copies `<region>.oplog` from the region's home cluster to one other cluster.

    One instance owns one source consumer and one target producer. `copy_available` and the
    background thread share them under a lock, so a test may call `copy_available` while the
    thread runs. `pause` only stops the background thread: an explicit `copy_available` still
    copies (that is how a paused topology is synchronised on demand).
    """

    def __init__(
        self,
        source_bootstrap: str,
        target_bootstrap: str,
        region_name: str,
        source_alias: str,
        naming: str = "identity",
        *,
        poll_timeout: float = 0.1,
        batch_size: int = 2000,
    ) -> None:
        if source_bootstrap == target_bootstrap:
            raise ValueError(
                f"mirror of {region_name}: source and target are the same cluster"
                f" ({source_bootstrap}); regions that share a cluster need no mirror"
            )
        self.source_bootstrap = source_bootstrap
        self.target_bootstrap = target_bootstrap
        self.region_name = region_name
        self.source_alias = source_alias
        self.naming = naming
        self.source_topic = oplog_topic(region_name)
        self.target_topic = mirrored_name(self.source_topic, source_alias, naming)
        self.name = f"{self.source_topic}@{source_alias} -> {self.target_topic}@{target_bootstrap}"
        self.poll_timeout = poll_timeout
        self.batch_size = batch_size
        self._alias_bytes = source_alias.encode()
        self._lock = threading.RLock()
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._target_ready = False
        # The next source offset to copy; None means "unknown: derive it from the target".
        self._next: int | None = None
        self._copied = 0
        self._delivery_error: KafkaError | None = None
        self._resume_floor: int | None = None  # lowest source offset whose delivery failed
        # Topic ids (Kafka topic UUIDs) seen when the clients were opened: a topic recreated
        # under the same name gets a new id, the only way to notice it on Tansu.
        self._source_id: str | None = None
        self._target_id: str | None = None
        self._admins: dict[str, AdminClient] = {}
        self._last_topic_check = 0.0
        self._fatal_client_error: KafkaError | None = None
        self._paused = False
        self._pacer = FetchPacer(Pacing(), time.monotonic(), catching_up=False)
        self._end = EndTracker()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None  # why the background thread gave up, if it did

    # -- public surface -------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def copied(self) -> int:
        """Records the target acknowledged since this Mirror was created (re-copies included)."""
        return self._copied

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def position(self) -> int | None:
        """The next source offset to copy, once known."""
        return self._next

    def copy_available(self, timeout: float = 30.0) -> int:
        """Copy everything the source holds now (up to partition EOF) and wait for the target's
        acknowledgement; return how many records the target acknowledged during the call
        (re-copies after a failed delivery included).

        Raises MirrorTimeout when that does not finish within `timeout` seconds and MirrorError on
        a fatal condition. A source topic that does not exist yet means nothing to copy (0).
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            before = self._copied
            while True:
                try:
                    if not self._ensure_ready(deadline, check_topics=True):
                        return self._copied - before
                    self._drain_to_eof(deadline)
                    self._flush(deadline)
                except (KafkaException, TopicError) as exc:
                    self._after_kafka_error(exc)
                    self._check_deadline(deadline, f"retrying after a Kafka error ({exc})")
                    time.sleep(self._remaining(deadline, cap=0.2))
                    continue
                if self._recover_from_delivery_errors():
                    self._check_deadline(deadline, "re-copying after a failed delivery")
                    continue
                return self._copied - before

    def start(self) -> None:
        """Copy continuously in a background thread until `stop`."""
        if self.running:
            return
        self._stop.clear()
        self.error = None
        self._thread = threading.Thread(target=self._run, name=f"mirror {self.name}", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        """Stop the background copying; once this returns the target receives nothing more
        (records already handed to the producer are flushed first) until `resume`."""
        with self._lock:
            self._paused = True
            if self._producer is not None:
                left = self._producer.flush(10.0)
                if left:
                    log.warning("%s: %d records still in flight after pause", self.name, left)

    def resume(self) -> None:
        self._paused = False

    def stop(self) -> None:
        """Stop the background thread (if any) and close the Kafka clients. Idempotent; a later
        `copy_available` or `start` reopens clients and resumes from the target."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        with self._lock:
            self._close_clients(flush=True)

    def __enter__(self) -> Mirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Mirror({self.name}, copied={self._copied}, paused={self._paused})"

    # -- clients --------------------------------------------------------------------------------

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka's error callback: transient errors are retried by librdkafka itself."""
        if error.fatal():
            self._fatal_client_error = error
            log.error("%s: fatal Kafka error: %s", self.name, error)
        else:
            log.debug("%s: Kafka error (retried): %s", self.name, error)

    def _on_delivery(self, error: KafkaError | None, message: Message[Any, Any]) -> None:
        if error is None:
            self._copied += 1
            return
        if self._delivery_error is None:
            self._delivery_error = error
        # Remember the lowest source offset that may be missing on the target: the next resume
        # starts no later than this, whatever the target's last record says (at least once
        # even if a later record made it after an earlier one failed).
        offset_bytes = _header(_headers_list(message), MIRROR_OFFSET_HEADER)
        if offset_bytes is not None and offset_bytes.isdigit():
            offset = int(offset_bytes)
            if self._resume_floor is None or offset < self._resume_floor:
                self._resume_floor = offset

    def _new_consumer(self, bootstrap: str, purpose: str, wait_ms: int | None = None) -> Consumer:
        config = consumer_config(
            bootstrap,
            f"streams-mirror-{self.source_alias}-{self.region_name}",
            self._pacer.pacing.catch_up_ms if wait_ms is None else wait_ms,
            **{
                "client.id": f"mirror-{purpose}-{self.source_alias}-{self.region_name}",
                # Never silently jump to the start or end of a log: that would re-copy or skip.
                "auto.offset.reset": "error",
                "error_cb": self._on_error,
                "logger": _kafka_log,
            },
        )
        return Consumer(config)

    def _source_consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self._new_consumer(
                self.source_bootstrap, "source", self._pacer.wait_ms
            )
        return self._consumer

    def _assign_source(self, consumer: Consumer, offset: int) -> None:
        consumer.assign([TopicPartition(self.source_topic, 0, offset)])
        self._end.assign((self.source_topic, 0), offset)

    def _observe(self, consumer: Consumer, batch: list[Message[Any, Any]]) -> None:
        """Feed one poll's events to the end tracker and the pacer; when the pacer asks for
        another fetch wait, switch to a new source consumer at the next offset to copy."""
        part = (self.source_topic, 0)
        if part not in self._end.partitions:
            return
        delivered = set()
        for message in batch:
            error = message.error()
            if error is None:
                self._end.on_record(part, message.offset() or 0)
                delivered.add(part)
            elif error.code() == KafkaError._PARTITION_EOF:
                self._end.on_eof(part, message.offset() or 0)
        _low, high = consumer.get_watermark_offsets(TopicPartition(*part), cached=True)
        self._end.on_high_watermark(part, high)
        behind = {part} if self._end.behind(part) else set()
        wait = self._pacer.observe(time.monotonic(), delivered, behind)
        if wait is not None and consumer is self._consumer and self._next is not None:
            self._consumer = None
            consumer.close()
            self._assign_source(self._source_consumer(), self._next)

    def _target_producer(self) -> Producer:
        if self._producer is None:
            self._fatal_client_error = None
            self._producer = Producer(
                {
                    "bootstrap.servers": self.target_bootstrap,
                    "client.id": f"mirror-target-{self.source_alias}-{self.region_name}",
                    "enable.idempotence": True,
                    "acks": "all",
                    # A failed batch stops the producer instead of leaving a hole that a later
                    # success would hide from resume (which trusts the target's last record).
                    "enable.gapless.guarantee": True,
                    # Never create the target topic as a side effect of a metadata request (Tansu
                    # would give it several partitions, e.g. after a target broker restart).
                    "allow.auto.create.topics": False,
                    # Surface an unreachable target as delivery errors (then: reopen, resume from
                    # the target) instead of queueing for librdkafka's default five minutes.
                    "message.timeout.ms": 30000,
                    "linger.ms": 5,
                    "message.max.bytes": MAX_RECORD_BYTES,  # as the region writer
                    "on_delivery": self._on_delivery,
                    "error_cb": self._on_error,
                    "logger": _kafka_log,
                }
            )
        return self._producer

    def _close_clients(self, flush: bool) -> None:
        producer, self._producer = self._producer, None
        consumer, self._consumer = self._consumer, None
        if producer is not None:
            left = producer.flush(10.0) if flush else len(producer)
            if left:
                if flush:
                    log.warning("%s: dropping %d undelivered records", self.name, left)
                # Purged records get failed delivery reports, which lower the resume floor;
                # close() would otherwise wait for them without a time limit.
                producer.purge(in_queue=True, in_flight=True, blocking=True)
                producer.poll(0)
            producer.close()
        if consumer is not None:
            consumer.close()
        # AdminClient has no close(): dropping it is what disconnects it. That matters: Tansu
        # does not exit on SIGTERM while clients are still connected.
        self._admins.clear()
        # The next use derives its position from the target again.
        self._next = None
        self._target_ready = False
        self._delivery_error = None

    # -- preparing: topics and the resume position ---------------------------------------------

    def _ensure_ready(self, deadline: float, check_topics: bool = False) -> bool:
        """Open clients, check topics and position the source consumer; False while the source
        topic does not exist (nothing to copy yet). With `check_topics`, first make sure that
        open clients still look at the topics they were opened for."""
        if self._next is not None and self._consumer is not None and self._producer is not None:
            if not check_topics or self._topics_unchanged(deadline):
                return True
        # Open the producer first: an idempotent producer spends ~0.5 s getting its producer id
        # (a fixed librdkafka timer), which then overlaps the checks and the resume below.
        self._target_producer()
        consumer = self._source_consumer()
        if not self._source_exists(consumer, deadline):
            return False
        source_id = self._topic_id(self.source_bootstrap, self.source_topic, deadline)
        if self._source_id is not None and source_id != self._source_id:
            raise self._source_recreated()
        self._source_id = source_id
        if not self._target_ready:
            self._prepare_target(deadline)
        if self._next is None:
            start = self._resume_offset(deadline)
            if self._resume_floor is not None and self._resume_floor < start:
                log.info(
                    "%s: the target ends at source offset %d but offset %d failed: re-copying",
                    self.name,
                    start - 1,
                    self._resume_floor,
                )
                start = self._resume_floor
            self._resume_floor = None
            self._next = start
            log.info("%s: starting at source offset %d", self.name, self._next)
        self._assign_source(consumer, self._next)
        return True

    def _source_exists(self, consumer: Consumer, deadline: float) -> bool:
        metadata = consumer.list_topics(timeout=self._remaining(deadline, cap=10.0))
        topic = metadata.topics.get(self.source_topic)
        if topic is None or topic.error is not None:
            return False
        if len(topic.partitions) != 1:
            raise MirrorError(
                f"{self.source_topic} on {self.source_bootstrap} has {len(topic.partitions)}"
                " partitions; an op log has exactly one (a producer auto-created it? create op"
                " logs with topology.topics.ensure_topics)"
            )
        return True

    def _prepare_target(self, deadline: float) -> None:
        ensure_topics(
            self.target_bootstrap, [self.target_topic], timeout=self._remaining(deadline, cap=30.0)
        )
        probe = self._new_consumer(self.target_bootstrap, "probe")
        try:
            metadata = probe.list_topics(timeout=self._remaining(deadline, cap=10.0))
        finally:
            probe.close()
        topic = metadata.topics.get(self.target_topic)
        if topic is not None and len(topic.partitions) != 1:
            raise MirrorError(
                f"{self.target_topic} on {self.target_bootstrap} has {len(topic.partitions)}"
                " partitions; a mirrored op log must have exactly one"
            )
        self._target_id = self._topic_id(self.target_bootstrap, self.target_topic, deadline)
        self._target_ready = True

    def _admin(self, bootstrap: str) -> AdminClient:
        admin = self._admins.get(bootstrap)
        if admin is None:
            config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _kafka_log}
            admin = self._admins[bootstrap] = AdminClient(config)
        return admin

    def _topic_id(self, bootstrap: str, topic: str, deadline: float) -> str | None:
        """The topic's id, or None when the topic does not exist."""
        futures = self._admin(bootstrap).describe_topics(
            TopicCollection([topic]), request_timeout=max(1.0, self._remaining(deadline, 10.0))
        )
        try:
            description = futures[topic].result()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise
        return str(description.topic_id)

    def _topics_unchanged(self, deadline: float) -> bool:
        """Raise if the source topic was recreated (fatal: the copies on the target belong to a
        log that no longer exists); if the target was, close the clients so that the next step
        recreates it and copies from what it holds (nothing: from the start). False then."""
        self._last_topic_check = time.monotonic()
        if self._topic_id(self.source_bootstrap, self.source_topic, deadline) != self._source_id:
            raise self._source_recreated()
        if self._topic_id(self.target_bootstrap, self.target_topic, deadline) != self._target_id:
            log.warning(
                "%s: the target topic was deleted or recreated (broker restart?): copying again"
                " from what it holds",
                self.name,
            )
            self._close_clients(flush=False)
            return False
        return True

    def _source_recreated(self) -> MirrorError:
        return MirrorError(
            f"{self.source_topic} on {self.source_bootstrap} was deleted or recreated since this"
            f" mirror started (its topic id changed; a memory-only broker restarted?): the copies"
            f" in {self.target_topic} on {self.target_bootstrap} belong to a log that is gone"
        )

    def _resume_offset(self, deadline: float) -> int:
        """The source offset to continue from: the target's last `mirror.offset` + 1, else 0.

        Before trusting it, check that the source still holds that record with the same key and
        value. A memory-only broker that restarted has an empty (or different) log under the
        same name; continuing at the old offset would skip its records silently.
        """
        last = self._last_target_record(deadline)
        if last is None:
            return 0
        offset_bytes = _header(_headers_list(last), MIRROR_OFFSET_HEADER)
        source = _header(_headers_list(last), MIRROR_SOURCE_HEADER)
        where = f"{self.target_topic} on {self.target_bootstrap} (offset {last.offset()})"
        if offset_bytes is None or not offset_bytes.isdigit():
            raise MirrorError(
                f"the last record of {where} has no valid {MIRROR_OFFSET_HEADER} header: something"
                " other than this mirror writes to the topic, so resuming from it is impossible"
            )
        if source != self._alias_bytes:
            raise MirrorError(
                f"the last record of {where} was mirrored from {source!r}, not from"
                f" {self.source_alias!r}: two mirrors write the same target topic"
            )
        mirrored = int(offset_bytes)
        self._verify_source_record(mirrored, last, deadline)
        return mirrored + 1

    def _last_target_record(self, deadline: float) -> Message[Any, Any] | None:
        """The target topic's last committed record, or None when it is empty or missing."""
        consumer = self._new_consumer(self.target_bootstrap, "resume")
        try:
            metadata = consumer.list_topics(timeout=self._remaining(deadline, cap=10.0))
            topic = metadata.topics.get(self.target_topic)
            if topic is None or topic.error is not None:
                return None
            partition = TopicPartition(self.target_topic, 0)
            low, high = consumer.get_watermark_offsets(
                partition, timeout=self._remaining(deadline, cap=10.0)
            )
            if high <= low:
                return None
            # On Tansu `high` is the last batch's base offset + 1, so high - 1 is where the last
            # batch starts; on Apache Kafka it is the last record. Either way, reading to EOF from
            # there yields the last record, unless the tail holds no data record (control batches
            # of a transactional writer): then widen the window backwards.
            window = 1
            while True:
                start = max(low, high - window)
                last = None
                for message in self._read_to_eof(
                    consumer, self.target_topic, start, deadline, "reading the target's tail"
                ):
                    last = message
                if last is not None or start == low:
                    return last
                window *= 16
        finally:
            consumer.close()

    def _verify_source_record(self, offset: int, copy: Message[Any, Any], deadline: float) -> None:
        consumer = self._source_consumer()
        low, high = consumer.get_watermark_offsets(
            TopicPartition(self.source_topic, 0), timeout=self._remaining(deadline, cap=10.0)
        )
        if offset < low:
            log.warning(
                "%s: source offset %d is below the log start %d (retention?): cannot verify",
                self.name,
                offset,
                low,
            )
            return
        # Find the true end first: Tansu answers a fetch beyond the log end with silence (no
        # OFFSET_OUT_OF_RANGE), so positioning at a vanished offset would just hang.
        end = self._log_end(consumer, max(low, high - 1), deadline)
        if offset >= end:
            problem = f"the source log ends at offset {end}"
        else:
            problem = f"the source holds no record at offset {offset}"
            for message in self._read_to_eof(
                consumer, self.source_topic, offset, deadline, "verifying the source"
            ):
                if message.offset() == offset:
                    if message.key() == copy.key() and message.value() == copy.value():
                        return
                    problem = f"the source record at offset {offset} differs from its copy"
                break
        raise MirrorError(
            f"{self.target_topic} on {self.target_bootstrap} ends with a copy of"
            f" {self.source_topic} offset {offset} from {self.source_alias}, but {problem}:"
            " the source log was recreated (a memory-only broker restarted?). Delete the"
            " target topic (or start a fresh target cluster) to mirror the new log from the start."
        )

    def _log_end(self, consumer: Consumer, start: int, deadline: float) -> int:
        """The offset at which partition EOF is reported when reading from `start`: the end of
        what read_committed can see (Tansu's high watermark may be below it)."""
        reading = self._read_to_eof(
            consumer, self.source_topic, start, deadline, "finding the source's end"
        )
        for _message in reading:
            pass
        return reading.ends[(self.source_topic, 0)]

    # -- copying --------------------------------------------------------------------------------

    def _read_to_eof(
        self, consumer: Consumer, topic: str, start: int, deadline: float, doing: str
    ) -> ReadToEnd:
        """Data records of `topic` from `start` up to partition EOF, by the deadline."""
        return ReadToEnd(
            consumer,
            {(topic, 0): start},
            doing=f"{self.name}: timed out {doing}",
            timeout=self._remaining(deadline),
            wait_s=self.poll_timeout,
            max_records=self.batch_size,
            on_error=self._on_consumer_event,
            after_batch=self._paced,
            timeout_error=MirrorTimeout,
        )

    def _paced(self, consumer: Consumer, batch: list[Message[Any, Any]]) -> Consumer:
        """After each poll of a read to EOF: while copying, the source consumer's fetch wait
        follows the pacer, which may swap in a new consumer (returned)."""
        if consumer is self._consumer and self._next is not None:
            self._observe(consumer, batch)  # after the batch was handled: _next is past it
            return self._source_consumer()
        return consumer

    def _drain_to_eof(self, deadline: float) -> int:
        consumer = self._source_consumer()
        # Re-assigning at the current position makes librdkafka emit a fresh EOF even when it
        # already reported one and nothing new arrived since. A copy on demand is interactive:
        # read with the short fetch wait.
        assert self._next is not None
        if self._pacer.wake(time.monotonic()) is not None:
            consumer.close()
            self._consumer = None
            consumer = self._source_consumer()
        self._end.assign((self.source_topic, 0), self._next)
        producer = self._target_producer()
        count = 0
        reading = self._read_to_eof(
            consumer, self.source_topic, self._next, deadline, "reading the source"
        )
        for message in reading:
            self._forward(producer, message, deadline)
            count += 1
            if count % 1000 == 0:
                producer.poll(0)
        return count

    def _pump(self) -> int:
        """One background step: forward whatever one consume call returns."""
        consumer = self._source_consumer()
        producer = self._target_producer()
        batch = poll_batch(consumer, self.poll_timeout, self.batch_size)
        count = 0
        deadline = time.monotonic() + 60.0
        for message in batch:
            error = message.error()
            if error is None:
                self._forward(producer, message, deadline)
                count += 1
            elif error.code() != KafkaError._PARTITION_EOF:
                self._consumer_error(error, message)
        producer.poll(0)
        self._observe(consumer, batch)
        return count

    def _forward(self, producer: Producer, message: Message[Any, Any], deadline: float) -> None:
        offset = message.offset()
        assert offset is not None
        headers = _headers_list(message)
        if _header(headers, MIRROR_SOURCE_HEADER) is not None:
            raise MirrorError(
                f"{self.source_topic} offset {offset} on {self.source_bootstrap} carries a"
                f" {MIRROR_SOURCE_HEADER} header: it is a mirrored copy, and a mirror must only"
                " read a region's own op log on its home cluster (check the region's bootstrap)"
            )
        headers.append((MIRROR_SOURCE_HEADER, self._alias_bytes))
        headers.append((MIRROR_OFFSET_HEADER, str(offset).encode()))
        ts_type, ts = message.timestamp()
        timestamp = 0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts
        while True:
            try:
                producer.produce(
                    self.target_topic,
                    value=message.value(),
                    key=message.key(),
                    partition=0,
                    timestamp=timestamp,
                    headers=headers,
                )
                break
            except BufferError:
                # The local queue is full: serve delivery reports until there is room.
                producer.poll(0.05)
                self._check_deadline(deadline, "waiting for room in the producer queue")
        self._next = offset + 1

    def _flush(self, deadline: float) -> None:
        if self._producer is None:
            return
        left = self._producer.flush(self._remaining(deadline))
        if left:
            raise MirrorTimeout(
                f"{self.name}: {left} records not acknowledged by the target in time"
            )

    def _on_consumer_event(self, message: Message[Any, Any]) -> None:
        error = message.error()
        assert error is not None
        self._consumer_error(error, message)

    def _consumer_error(self, error: KafkaError, message: Message[Any, Any]) -> None:
        topic = message.topic() or self.source_topic
        if error.code() in _FATAL_CONSUMER_ERRORS:
            raise MirrorError(
                f"{topic} has no offset {message.offset()}: {error.str()} (the log was truncated"
                " or recreated)"
            )
        if error.fatal():
            raise MirrorError(f"{self.name}: fatal consumer error on {topic}: {error}")
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            # The topic vanished (deleted, broker restarted): start over (the topic-id check
            # then tells a recreated source, which is fatal, from a recreated target, which is
            # refilled).
            raise KafkaException(error)
        # Anything else (a broker connection dropped, ...) librdkafka retries by itself.
        log.warning("%s: consumer error (retried by the client): %s", self.name, error)

    def _recover_from_delivery_errors(self) -> bool:
        """After a failed delivery (or a fatal producer state) start over from what the target
        holds, but no later than the first record that failed (the resume floor). True if it
        did."""
        error = self._delivery_error or self._fatal_client_error
        if error is None:
            return False
        log.warning("%s: delivery failed (%s); resuming from the target", self.name, error)
        self._close_clients(flush=False)
        self._fatal_client_error = None
        return True

    def _after_kafka_error(self, exc: Exception) -> None:
        log.warning("%s: Kafka error, will retry from the target's end: %s", self.name, exc)
        self._close_clients(flush=False)
        self._fatal_client_error = None

    # -- background thread ----------------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            if self._paused:
                self._stop.wait(self.poll_timeout)
                continue
            try:
                with self._lock:
                    if self._paused or self._stop.is_set():
                        continue
                    due = time.monotonic() - self._last_topic_check >= TOPIC_CHECK_INTERVAL
                    ready = self._ensure_ready(time.monotonic() + 30.0, check_topics=due)
                    if ready:
                        if self._pump() > 0:
                            self._last_topic_check = time.monotonic()  # busy: check when idle
                        self._recover_from_delivery_errors()
                if not ready:
                    self._stop.wait(MISSING_TOPIC_RECHECK)
                backoff = 0.1
            except MirrorError as exc:
                self.error = exc
                log.error("%s: stopped: %s", self.name, exc)
                return
            except (KafkaException, TopicError, MirrorTimeout) as exc:
                with self._lock:
                    self._after_kafka_error(exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception as exc:  # pragma: no cover - a bug: report it, do not spin
                self.error = exc
                log.exception("%s: stopped by an unexpected error", self.name)
                return

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _remaining(deadline: float, cap: float | None = None) -> float:
        left = max(0.0, deadline - time.monotonic())
        return min(left, cap) if cap is not None else left

    def _check_deadline(self, deadline: float, doing: str) -> None:
        if time.monotonic() >= deadline:
            raise MirrorTimeout(f"{self.name}: timed out {doing}")


class MirrorSet:
    """Every mirror of a topology: one per ordered pair (home region -> each other cluster).

    Regions that share a cluster need no mirror between them (the materializer reads every op log
    on its cluster), so such pairs are skipped.
    """

    def __init__(self, topology: Topology, naming: str | None = None) -> None:
        self.topology = topology
        self.naming = naming or topology.mirror_naming
        self.mirrors: dict[tuple[str, str], Mirror] = {}
        for source in topology.regions:
            for target in topology.regions:
                if target.name == source.name or target.bootstrap == source.bootstrap:
                    continue
                self.mirrors[(source.name, target.name)] = Mirror(
                    source.bootstrap, target.bootstrap, source.name, source.alias, self.naming
                )

    def mirror(self, source: str, target: str) -> Mirror:
        """The mirror copying region `source`'s op log to region `target`'s cluster."""
        try:
            return self.mirrors[(source, target)]
        except KeyError:
            raise KeyError(f"no mirror from {source!r} to {target!r}") from None

    @property
    def copied(self) -> int:
        return sum(mirror.copied for mirror in self.mirrors.values())

    @property
    def errors(self) -> dict[tuple[str, str], BaseException]:
        """Background mirrors that gave up, and why."""
        return {pair: m.error for pair, m in self.mirrors.items() if m.error is not None}

    def start(self) -> None:
        for mirror in self.mirrors.values():
            mirror.start()

    def stop(self) -> None:
        for mirror in self.mirrors.values():
            mirror.stop()

    def pause(self) -> None:
        for mirror in self.mirrors.values():
            mirror.pause()

    def resume(self) -> None:
        for mirror in self.mirrors.values():
            mirror.resume()

    @property
    def paused(self) -> bool:
        return all(mirror.paused for mirror in self.mirrors.values())

    def copy_among(self, region_names: list[str] | None = None, timeout: float = 30.0) -> int:
        """`copy_available` for every pair whose source and target are both in `region_names`
        (every pair when None), in parallel; returns the total copied. One pass: an op log
        copied here was complete at its EOF, and mirrors never copy mirrored topics, so a single
        pass replicates everything among the regions."""
        if region_names is None:
            chosen = set(self.topology.names)
        else:
            for name in region_names:
                self.topology.region(name)  # KeyError naming the unknown region
            chosen = set(region_names)
        pairs = [m for (s, t), m in self.mirrors.items() if s in chosen and t in chosen]
        if not pairs:
            return 0
        with ThreadPoolExecutor(max_workers=len(pairs), thread_name_prefix="mirror-copy") as pool:
            futures = [pool.submit(m.copy_available, timeout) for m in pairs]
            return sum(future.result() for future in futures)

    def __enter__(self) -> MirrorSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":  # `python -m topology.mirror`: the command line lives apart
    from topology.mirror_cli import main

    sys.exit(main())
