"""The continuous op-log reader of the materializer and the mirror (`PacedConsumer`), built on the
reading rules of `streams.kafka.reading`: its assignment, end tracking and fetch pacing, and a new
librdkafka consumer whenever the fetch wait changes, since librdkafka cannot change
`fetch.wait.max.ms` on a live consumer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, TopicPartition

from streams.kafka.reading import (
    EndNotReached,
    EndTracker,
    FetchPacer,
    Pacing,
    Partition,
    consumer_config,
    format_seconds,
    poll_batch,
)

if TYPE_CHECKING:
    from streams.kafka.reading import Msg

log = logging.getLogger(__name__)

IDLE_STEP_S = 0.5
"""How long an idle reader's step waits for a record before its bookkeeping runs (watermarks,
pacing): every reader of an idle topology ran it 10-20 times a second. A record or an error
event ends the wait at once; a `wake` within one `poll_s` slice."""


class PacedConsumer:
    """The continuous reader: one librdkafka consumer over the partitions assigned to it, with
    its `EndTracker` and its `FetchPacer` (the materializer and the mirror read this way).

    librdkafka cannot change `fetch.wait.max.ms` on a live consumer, so when the pacer picks
    another wait the consumer is replaced by a new one assigned where reading stands (~4 ms).
    The consumer is opened on first use and again after `close`, assigned where reading stands;
    the pacer outlives every consumer, so a wait learnt on a long log (the doubling) is kept.

    `poll` is one step: wait up to `poll_s` for events (`poll_batch`), feed records and EOF
    events to the tracker (other error events go to `on_error`, after the step's records were
    counted), note every partition's high watermark, let the pacer see the step, and hand back
    the data records. Records of partitions no longer assigned are dropped. `read_to_end`
    repeats it from where every partition stands up to an EOF reported after it began.

    Threads: one thread reads (every method but these five); `wake`, `interrupt`, `positions`,
    `describe` and `wait_ms` may be called from any thread. The reading thread may look at
    `tracker` freely.
    """

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        *,
        pacing: Pacing | None = None,
        catching_up: bool = True,
        poll_s: float = 0.05,
        max_records: int = 10_000,
        on_error: Callable[[Msg], None] | None = None,
        name: str = "reader",
        config: Mapping[str, object] | None = None,
    ) -> None:
        """`config`: librdkafka settings on top of `consumer_config`'s; `catching_up`: the
        first reads are a backlog (the pacer's long catch-up wait until `leave_catch_up`)."""
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.pacer = FetchPacer(pacing or Pacing(), time.monotonic(), catching_up=catching_up)
        self.poll_s = poll_s
        self.max_records = max_records
        self.name = name
        self._on_error = on_error or self._log_error
        self._config = dict(config or {})
        self.tracker = EndTracker()
        self._lock = threading.Lock()  # the tracker, for `positions` / `describe` elsewhere
        self._wake = threading.Event()
        self._interrupt = threading.Event()
        self._consumer: Consumer | None = None

    # --- from any thread -------------------------------------------------------------------------

    def wake(self) -> None:
        """Records are expected now (a sync, a copy on demand): the next step leaves the idle
        wait (`FetchPacer.wake`)."""
        self._wake.set()

    def interrupt(self) -> None:
        """End the current step's idle wait without changing the pacing (a stop, a pause)."""
        self._interrupt.set()

    def positions(self) -> dict[Partition, int]:
        """The next offset to read per assigned partition."""
        with self._lock:
            return {part: state.position for part, state in self.tracker.partitions.items()}

    def behind(self) -> dict[Partition, int]:
        """Per assigned partition, offsets between the position and the broker's last reported
        high watermark (0 when none was reported; transaction markers take offsets too)."""
        with self._lock:
            return {
                part: max(0, (state.high or 0) - state.position)
                for part, state in self.tracker.partitions.items()
            }

    def describe(self) -> str:
        with self._lock:
            return self.tracker.describe()

    @property
    def wait_ms(self) -> int:
        """The fetch wait of the consumer in use (or the next one)."""
        return self.pacer.wait_ms

    # --- the reading thread ----------------------------------------------------------------------

    def topics(self, timeout: float) -> dict[str, set[int]]:
        """Every topic on the cluster and the ids of its partitions (one metadata request)."""
        metadata = self._open().list_topics(timeout=timeout)
        return {name: set(topic.partitions) for name, topic in metadata.topics.items()}

    def low_watermarks(self, parts: Iterable[Partition], timeout: float) -> dict[Partition, int]:
        """Each partition's first offset still held (moved by DeleteRecords: retention)."""
        consumer = self._open()
        return {
            (t, p): consumer.get_watermark_offsets(
                TopicPartition(t, p), timeout=timeout, cached=False
            )[0]
            for t, p in parts
        }

    def assign(
        self, starts: Mapping[Partition, int], growing: Set[Partition] = frozenset()
    ) -> None:
        """Read `starts` (partitions not assigned yet -> first offset) besides what is assigned
        already; those in `growing` are appended to by others meanwhile (`EndTracker.assign`)."""
        if not starts:
            return
        opened = self._consumer is not None
        with self._lock:
            for part, offset in starts.items():
                self.tracker.assign(part, offset, growing=part in growing)
        consumer = self._open()  # a consumer opened now is assigned everything already
        if opened:
            consumer.incremental_assign(
                [TopicPartition(t, p, o) for (t, p), o in sorted(starts.items())]
            )

    def unassign(self, parts: Iterable[Partition]) -> dict[Partition, int]:
        """Stop reading `parts`; where each one stood."""
        with self._lock:
            dropped = {
                part: self.tracker.partitions.pop(part).position
                for part in parts
                if part in self.tracker.partitions
            }
        if dropped and self._consumer is not None:
            self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in dropped])
        return dropped

    def leave_catch_up(self) -> None:
        """The backlog is read: from now on the pacer waits briefly while records flow and long
        when idle."""
        self.pacer.caught_up(time.monotonic())

    def poll(self, wait_s: float | None = None) -> list[Msg]:
        """One step (see the class docstring); the data records it delivered, in order."""
        consumer = self._open()
        step_s = self.poll_s if wait_s is None else wait_s
        events = poll_batch(consumer, step_s, self.max_records)
        if not events and wait_s is None and self.pacer.idle:
            # Idle: wait longer in slices before the step's bookkeeping (an idle step's Python
            # work woke every reader 10-20 times a second); a record ends the wait at once, a
            # `wake` within a slice.
            slices = max(0, round(IDLE_STEP_S / step_s) - 1) if step_s > 0 else 0
            for _ in range(slices):
                if self._wake.is_set() or self._interrupt.is_set():
                    break
                events = poll_batch(consumer, step_s, self.max_records)
                if events:
                    break
        self._interrupt.clear()
        records: list[Msg] = []
        errors: list[Msg] = []
        delivered: set[Partition] = set()
        with self._lock:
            for msg in events:
                part = (msg.topic() or "", msg.partition() or 0)
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    errors.append(msg)
                elif part not in self.tracker.partitions:
                    continue  # unassigned meanwhile: an event librdkafka had queued already
                elif err is None:
                    self.tracker.on_record(part, msg.offset() or 0)
                    delivered.add(part)
                    records.append(msg)
                else:
                    self.tracker.on_eof(part, msg.offset() or 0)
            for part in self.tracker.partitions:
                _low, high = consumer.get_watermark_offsets(TopicPartition(*part), cached=True)
                self.tracker.on_high_watermark(part, high)
            behind = {part for part in self.tracker.partitions if self.tracker.behind(part)}
        for msg in errors:
            self._on_error(msg)
        now = time.monotonic()
        wait = self.pacer.observe(now, delivered, behind)
        if self._wake.is_set():
            self._wake.clear()
            wait = self.pacer.wake(now) or wait
        if wait is not None:
            self._replace()
        return records

    def read_to_end(
        self,
        timeout: float,
        *,
        doing: str = "reading to the end",
        timeout_error: Callable[[str], BaseException] = EndNotReached,
    ) -> Iterator[list[Msg]]:
        """Every assigned partition from where it stands up to an EOF reported since this call
        began (records that arrive meanwhile included), one `poll` step's records at a time.

        Every partition is assigned again first: librdkafka then reports a fresh EOF even when
        it reported one already and nothing arrived since. A pending `wake` takes effect
        before that. Raises `timeout_error` (its text names where each partition got) when not
        done within `timeout` seconds.
        """
        if self._wake.is_set():
            self._wake.clear()
            if self.pacer.wake(time.monotonic()) is not None:
                self._close_consumer()  # the next one is opened with the new wait
        with self._lock:
            for part, state in list(self.tracker.partitions.items()):
                self.tracker.assign(part, state.position, growing=state.growing)
        if self._consumer is None:
            self._open()
        else:
            self._assign_all(self._consumer)
        deadline = time.monotonic() + timeout
        while self.tracker.partitions and not self.tracker.caught_up():
            left = deadline - time.monotonic()
            if left <= 0:
                raise timeout_error(
                    f"{doing}: not done in {format_seconds(timeout)}: {self.describe()}"
                )
            yield self.poll(min(self.poll_s, left))

    def close(self, forget: bool = False) -> None:
        """Close the consumer. The positions stay, where reading stopped (the next step opens a
        consumer there), unless `forget`: then nothing is assigned any more."""
        if forget:
            with self._lock:
                self.tracker.partitions.clear()
        self._close_consumer()

    def _open(self) -> Consumer:
        if self._consumer is None:
            config = consumer_config(self.bootstrap, self.group_id, self.wait_ms, **self._config)
            self._consumer = Consumer(config)
            self._assign_all(self._consumer)
        return self._consumer

    def _close_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def _assign_all(self, consumer: Consumer) -> None:
        """Assign `consumer` every partition where reading stands."""
        with self._lock:
            where = [
                TopicPartition(t, p, state.position)
                for (t, p), state in sorted(self.tracker.partitions.items())
            ]
        if where:
            consumer.assign(where)

    def _replace(self) -> None:
        """A new consumer with the pacer's wait, assigned where reading stands."""
        self._close_consumer()
        self._open()
        log.debug("%s: fetch wait now %d ms", self.name, self.wait_ms)

    def _log_error(self, msg: Msg) -> None:
        """Without `on_error`: librdkafka retries what it reports (a dropped connection...)."""
        log.warning("%s: %s", self.name, msg.error())
