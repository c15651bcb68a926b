"""Kafka consumer idioms shared by the materializer, the mirror and the tools that read op logs.

Why a module of its own: reading an op log correctly on both the embedded Tansu broker and Apache
Kafka takes three non-obvious rules, and every reader must follow all three.

1. **How long a fetch may wait.** Apache Kafka answers a fetch as soon as it has data (long
   polling). Tansu (the embedded broker, memory storage) holds an *empty* fetch for the whole
   `fetch.wait.max.ms`, and its cost per fetch grows with the number of record batches in the
   partition: when that cost exceeds the wait, the fetch comes back with **no records at all**,
   only the high watermark. With the 5 ms wait used before, a topic holding about 6,000 one-op
   transactions (12,000 offsets: each transaction adds a control batch) could never be read
   again, so a restarted node never caught up. `FetchPacer` chooses the wait: long while
   catching up or idle (cheap for the broker), short while records flow (low replication
   latency), and doubled whenever a partition is behind its high watermark yet nothing arrives
   (the broker ran out of time).
2. **Where the end is.** Tansu reports `high watermark = last batch's base offset + 1`, not the
   log end, and transaction control records take offsets that read_committed never delivers.
   Partition-EOF events are right on both brokers: `EndTracker` says a partition is caught up
   once an EOF was reported at or after everything delivered, whatever the order in which
   records and EOF events arrive. But librdkafka reports EOF only when a fetch comes back
   empty at the end, and a log that another region appends to steadily never gives an empty
   fetch: a restart (or a reload after a failed write) waited as long as that region wrote.
   So a partition that others append to ("growing") is also caught up once reading passed the
   first end the broker reported after assignment: everything committed when catch-up began
   is read, which is what catching up means (Kafka Streams restores to the end offset it
   found at start, for the same reason). The region's own logs, which nobody else writes
   while it catches up, still need their EOF: a node must know its own last op exactly.
3. **Fetch sizes.** Op records may be 64 MB (a 10 MB Redis value and more); the fetch limits
   must let one record through and let catch-up take large steps.

The bookkeeping (`EndTracker`, `FetchPacer`) is pure (no Kafka calls, time passed in), so it is
unit-tested with every interleaving of events. The reading idioms built on it call a consumer:
`poll_batch` (wait for one event, then take what is already there: `consume(n, timeout)` waits
the whole timeout unless n events arrive), `ReadToEnd` (partitions from given offsets up to
their EOF, bounded by a timeout whose error names where each partition got; the one-off reads of
replay, snapshots, the pipeline and the mirror's resume); `streams.kafka.paced.PacedConsumer` is the
continuous reader of the materializer and the mirror, built on them. They are tested against a
scripted consumer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streams.kafka import security

log = logging.getLogger(__name__)

FETCH_MAX_BYTES = 128 * 1024 * 1024
"""One fetch may return this much: catch-up reads large steps, and one record always fits."""

Partition = tuple[str, int]


@dataclass(frozen=True)
class Pacing:
    """The fetch waits (milliseconds) a reader uses; see the module docstring for why."""

    active_ms: int = 10
    """While records flow: new records are seen within about this long (Tansu)."""
    idle_ms: int = 500
    """Once nothing arrived for `idle_after_s`: an idle consumer costs Tansu about 1 % of a
    core at 250-500 ms and 7 % at 5 ms; the first record after an idle spell waits up to this."""
    idle_after_s: float = 2.0
    catch_up_ms: int = 100
    """While reading a backlog: the broker answers as soon as it has data; 100 ms lets Tansu
    assemble fetches of partitions of tens of thousands of batches (beyond, the doubling below
    takes over), while a partition already at its end costs one wait before its EOF arrives."""
    max_ms: int = 8000
    """The wait never grows past this when a broker keeps running out of time."""


def consumer_config(
    bootstrap: str, group_id: str, wait_ms: int, **extra: str | int | bool | object
) -> dict[str, object]:
    """librdkafka settings for an op-log reader: assign() at explicit offsets (the group id is
    required by librdkafka but never joined nor committed), read_committed, EOF events, fetch
    limits that take the largest record, and the given fetch wait."""
    config: dict[str, object] = {
        **security.client_settings(bootstrap),
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": wait_ms,
        "fetch.max.bytes": FETCH_MAX_BYTES,
        "max.partition.fetch.bytes": FETCH_MAX_BYTES,
        "receive.message.max.bytes": FETCH_MAX_BYTES + 1024 * 1024,
        "log_level": 3,
    }
    config.update(extra)
    return config


@dataclass
class PartitionEnd:
    """What a reader knows about one partition's end."""

    position: int
    """The next offset to read (one past the last record delivered, or the assigned start)."""
    eof_at: int | None = None
    """Where the last partition-EOF event was reported, None since a later record."""
    reached_end: bool = False
    """An EOF was reported at least once since assignment (sticky: later records do not clear
    it, so a reader of a log that keeps growing still finishes its catch-up)."""
    high: int | None = None
    """The broker's last reported high watermark (on Tansu only a lower bound of the end)."""
    growing: bool = False
    """Others may append while it is read: reaching `target` counts as reaching the end."""
    target: int | None = None
    """The first high watermark reported after assignment (growing partitions only)."""

    def note_progress(self) -> None:
        if self.growing and self.target is not None and self.position >= self.target:
            self.reached_end = True


@dataclass
class EndTracker:
    """Per-partition positions and ends, fed with the events of a consumer in order."""

    partitions: dict[Partition, PartitionEnd] = field(default_factory=dict)

    def assign(self, part: Partition, start: int, growing: bool = False) -> None:
        """`growing`: other writers may append to it while it is read (see the module
        docstring): caught up at the first reported end, without waiting for an EOF."""
        self.partitions[part] = PartitionEnd(start, growing=growing)

    def on_record(self, part: Partition, offset: int) -> None:
        state = self.partitions[part]
        state.position = max(state.position, offset + 1)
        if state.eof_at is not None and offset >= state.eof_at:
            state.eof_at = None  # the log grew past the end seen before
        state.note_progress()

    def on_eof(self, part: Partition, offset: int) -> None:
        state = self.partitions[part]
        state.eof_at = offset
        state.reached_end = True
        # Control records at the tail are never delivered: the end is where EOF says.
        state.position = max(state.position, offset)

    def on_high_watermark(self, part: Partition, high: int) -> None:
        if high >= 0:
            state = self.partitions[part]
            state.high = high
            if state.target is None:
                state.target = high
                state.note_progress()

    def at_end(self, part: Partition) -> bool:
        return self.partitions[part].eof_at is not None

    def caught_up(self) -> bool:
        """Every assigned partition has reached its end at least once (an EOF, or for a
        growing partition the first end reported)."""
        return bool(self.partitions) and all(p.reached_end for p in self.partitions.values())

    def behind(self, part: Partition) -> bool:
        """The broker said there is more than what was delivered, and no EOF since."""
        state = self.partitions[part]
        return state.eof_at is None and state.high is not None and state.high > state.position

    def describe(self) -> str:
        """'topic[p] at 120 of 300, ...' for progress lines and timeout errors."""
        parts = []
        for (topic, partition), state in sorted(self.partitions.items()):
            name = topic if partition == 0 else f"{topic}[{partition}]"
            if state.reached_end and state.eof_at is not None:
                parts.append(f"{name} at its end ({state.position})")
            elif state.high is not None and state.high > state.position:
                parts.append(f"{name} at {state.position} of at least {state.high}")
            elif state.reached_end:
                parts.append(f"{name} at {state.position} (end reached, more since)")
            else:
                parts.append(f"{name} at {state.position}, end not seen yet")
        return ", ".join(parts) if parts else "no topic assigned yet"


class FetchPacer:
    """Chooses the fetch wait from what the consumer sees (pure: time is passed in).

    Modes: `catch_up` until the caller says the backlog is read, then `active` while records
    flow and `idle` after `idle_after_s` without any. Independently of the mode, a partition
    that stays behind its high watermark for two waits without delivering anything means the
    broker could not assemble the fetch in time: the wait doubles (up to `max_ms`) and that
    doubled wait becomes the floor for every mode from then on.
    """

    def __init__(self, pacing: Pacing, now: float, catching_up: bool = True) -> None:
        self.pacing = pacing
        self.catching_up = catching_up
        self.floor_ms = 0
        self._last_data = now
        self._behind_since: dict[Partition, float] = {}
        self.wait_ms = self._target(now)

    def _target(self, now: float) -> int:
        p = self.pacing
        if self.catching_up:
            base = p.catch_up_ms
        elif now - self._last_data >= p.idle_after_s:
            base = p.idle_ms
        else:
            base = p.active_ms
        return min(p.max_ms, max(base, self.floor_ms))

    @property
    def idle(self) -> bool:
        """The idle wait is in use (nothing arrived for `idle_after_s`, no backlog)."""
        return not self.catching_up and self.wait_ms == self.pacing.idle_ms and not self.floor_ms

    def caught_up(self, now: float) -> None:
        self.catching_up = False
        self._last_data = now

    def wake(self, now: float) -> int | None:
        """Records are expected now (a copy on demand, a sync): leave the idle wait at once.
        Returns the new wait when it changed."""
        self._last_data = now
        target = self._target(now)
        if target == self.wait_ms:
            return None
        self.wait_ms = target
        return target

    def observe(self, now: float, delivered: set[Partition], behind: set[Partition]) -> int | None:
        """After one poll: `delivered` are the partitions that returned records, `behind` those
        the tracker says are behind. Returns the new wait when it should change, else None."""
        if delivered:
            self._last_data = now
        for part in delivered:
            self._behind_since.pop(part, None)
        for part in list(self._behind_since):
            if part not in behind:
                del self._behind_since[part]
        for part in behind - delivered:
            since = self._behind_since.setdefault(part, now)
            if now - since > 2 * self.wait_ms / 1000 + 0.1 and self.wait_ms < self.pacing.max_ms:
                self.floor_ms = min(self.pacing.max_ms, max(self.floor_ms, self.wait_ms * 2))
                self._behind_since = {p: now for p in self._behind_since}
        target = self._target(now)
        if target == self.wait_ms:
            return None
        self.wait_ms = target
        return target


if TYPE_CHECKING:
    Msg = Message[Any, Any]


def poll_batch(consumer: Consumer, first_wait_s: float, max_records: int) -> list[Msg]:
    """Wait up to `first_wait_s` for one event, then take what is already queued, `max_records`
    events at most. (`consume(n, timeout)` waits the whole timeout unless n events arrive, which
    would add the timeout to every poll of a caught-up log.)"""
    first = consumer.poll(first_wait_s)
    if first is None:
        return []
    if max_records <= 1:
        return [first]
    return [first, *consumer.consume(max_records - 1, 0)]


def format_seconds(t: float) -> str:
    return f"{t:.0f}s" if t >= 10 else f"{t:.2g}s"


class EndNotReached(TimeoutError):
    """`ReadToEnd` ran out of time; the text names where each partition got."""


class ReadToEnd:
    """The data records of some partitions, each read from a given offset up to the first
    partition-EOF event reported for it (the end: never the high watermark, see rule 2), in
    offset order per partition; decoding is the caller's. Iterate once.

    - `timeout`: the whole read must end within it; `stall_timeout`: at most this long without
      any event. Either raises `timeout_error` (default `EndNotReached`) with a text that says,
      per partition, where reading got and what end the broker reported.
    - `on_error`: gets every error event other than EOF (raise to stop, return to go on); without
      it such an event raises KafkaException.
    - `after_batch(consumer, events)`: called after each poll, once its records were handed out
      (empty polls too); returns the consumer to go on with (the same, or one the caller
      assigned where reading stands). A reader that goes on after the end, with paced fetch
      waits, is a `PacedConsumer` instead.
    - `follow`: an EOF only moves the position; reading ends when the caller `finish`es every
      partition.
    - `growing`: others append to the partitions while they are read (another region's log, a
      source a mirror verifies): a partition also ends once reading passed the first end the
      broker reported (`ends` then holds the position reached), since a log written steadily
      may never give the empty fetch librdkafka needs to report an EOF.
    - `finish(part)`: the caller has what it wants of `part`; its later records are dropped.
    Finished partitions are unassigned while others are still read.
    """

    def __init__(
        self,
        consumer: Consumer,
        starts: Mapping[Partition, int],
        *,
        doing: str = "reading to the end",
        timeout: float | None = None,
        stall_timeout: float | None = None,
        wait_s: float = 0.1,
        max_records: int = 10_000,
        on_error: Callable[[Msg], None] | None = None,
        after_batch: Callable[[Consumer, list[Msg]], Consumer] | None = None,
        follow: bool = False,
        growing: bool = False,
        timeout_error: Callable[[str], BaseException] = EndNotReached,
    ) -> None:
        self.consumer = consumer
        self.starts = dict(starts)
        self.doing = doing
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.wait_s = wait_s
        self.max_records = max_records
        self.on_error = on_error
        self.after_batch = after_batch
        self.follow = follow
        self.growing = growing
        self.timeout_error = timeout_error
        self.tracker = EndTracker()
        for part, start in self.starts.items():
            self.tracker.assign(part, start, growing=growing)
        self.ends: dict[Partition, int] = {}
        """Where the last EOF was reported, per partition that reported one."""
        self.stalled = False
        """The read ended on `stall_timeout` (not on `timeout`): the partitions still open got
        neither a record nor their end for that long."""
        self._open = set(self.starts)
        self._finished: list[Partition] = []

    @property
    def unfinished(self) -> frozenset[Partition]:
        """The partitions whose end was not reached (yet)."""
        return frozenset(self._open)

    def finish(self, part: Partition) -> None:
        if part in self._open:
            self._open.discard(part)
            self._finished.append(part)

    def __iter__(self) -> Iterator[Msg]:
        consumer = self.consumer
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in sorted(self.starts.items())])
        started = last_event = time.monotonic()
        while self._open:
            wait = self.wait_s
            if self.timeout is not None:
                wait = max(0.0, min(wait, started + self.timeout - time.monotonic()))
            batch = poll_batch(consumer, wait, self.max_records)
            for msg in batch:
                part = (msg.topic() or "", msg.partition() or 0)
                err = msg.error()
                if err is None:
                    if part in self._open:
                        self.tracker.on_record(part, msg.offset() or 0)
                        yield msg
                elif err.code() == KafkaError._PARTITION_EOF:
                    if part in self._open:
                        self.tracker.on_eof(part, msg.offset() or 0)
                        self.ends[part] = msg.offset() or 0
                        if not self.follow:
                            self.finish(part)
                elif self.on_error is not None:
                    self.on_error(msg)
                else:
                    raise KafkaException(err)
            if self.growing and not self.follow:
                self._finish_grown(consumer)
            if self.after_batch is not None:
                consumer = self.after_batch(consumer, batch)
            if self._finished and self._open:
                consumer.incremental_unassign([TopicPartition(t, p) for t, p in self._finished])
            self._finished = []
            now = time.monotonic()
            if batch:
                last_event = now
            if not self._open:
                return
            if self.timeout is not None and now - started >= self.timeout:
                raise self._timed_out(consumer, f"not done in {format_seconds(self.timeout)}")
            if self.stall_timeout is not None and now - last_event > self.stall_timeout:
                self.stalled = True
                raise self._timed_out(
                    consumer, f"no data nor end for {format_seconds(self.stall_timeout)}"
                )

    def _finish_grown(self, consumer: Consumer) -> None:
        """Finish the growing partitions that reading took past the first end reported."""
        for part in list(self._open):
            _low, high = consumer.get_watermark_offsets(TopicPartition(*part), cached=True)
            self.tracker.on_high_watermark(part, high)
            state = self.tracker.partitions[part]
            if state.reached_end:
                self.ends[part] = state.position
                self.finish(part)

    def _timed_out(self, consumer: Consumer, why: str) -> BaseException:
        for part in self._open:
            try:
                _low, high = consumer.get_watermark_offsets(TopicPartition(*part), cached=True)
            except (KafkaException, RuntimeError):
                continue  # only for the text: without it, the text says less
            self.tracker.on_high_watermark(part, high)
        return self.timeout_error(f"{self.doing}: {why}: {self.tracker.describe()}")
