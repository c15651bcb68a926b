"""Before a shard reads its own logs (boot, or a re-read after a failed batch), make sure their end
can be read: the node must know its own last op exactly, or it numbers its next op with a seq
that a record it did not see already carries (a forked log: two records under one dot).

Called by the writer right after `init_transactions` (which fences any older producer of the
shard) and after each recovery, so nothing else writes the partitions meanwhile. On Apache Kafka
there is nothing to do: registering the transactional id completes or aborts the previous
producer's transaction before it returns, so the last stable offset of the own partitions is
their high watermark and a read_committed reader gets its EOF there.

Tansu 0.6.0's S3 storage (the durable default) breaks that in two ways, both seen after a broker
SIGKILL or an object store outage (issues 21 and 22):

- A transaction left *prepared*: a produce or EndTxn request writes several objects in turn
  (the producer's sequence and the transactions in `meta.json`, the partition's watermark, the
  batch). A broker killed after EndTxn marked the transaction PrepareCommit but before it wrote
  the markers leaves it so, and `init_transactions` rolls back only a transaction that is still
  in Begin: it bumps the epoch and leaves the prepared one. Its records then stay behind the last
  stable offset, invisible to read_committed readers: the node reads its log to that EOF and
  reuses the dot of the old transaction's op. The next transaction that writes the partition
  completes the prepared one (Tansu completes overlapping prepared transactions in EndTxn), and
  the old op appears beside the new one under the same dot: regions stop on the conflict.
- A watermark past the last record: a produce interrupted between its watermark object and its
  batch object leaves the watermark one past the last batch. librdkafka reports EOF only at the
  watermark and a fetch at the missing offset answers nothing, so a reader waits for an end that
  comes only once a later batch is written behind the gap, and the node writes nothing until it
  has read its log: it refused writes for good (the object store outage of issue 22).

So the partitions are probed (`probe`): a read_committed reader must get its EOF, at the end a
read_uncommitted reader sees (the broker's watermark). Where it does not, a *barrier* is
written: a transaction holding, for each such partition, an exact copy of a record already in it
(its first, key, value and headers), which is then aborted. Its EndTxn completes any prepared
transaction of the partitions (Tansu) and its records and abort markers lie behind any gap, so
the end can be read again; the probe then runs again. On Kafka an aborted record is never
delivered to read_committed readers; Tansu delivers aborted records, and there the copy is a
duplicate of an op every reader has already applied (same dot, same bytes: the fold drops it,
the record gate accepts it, a mirror copies it at least once as it may copy anything). A barrier
is written only when a probe fails, that is after a crash or an outage, never in normal running.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streams.kafka.reading import Partition, consumer_config

if TYPE_CHECKING:
    from streams.kafka.reading import Msg

log = logging.getLogger(__name__)

PROBE_WAIT_MS = 100
"""The probes' fetch wait: Tansu holds an empty fetch that long before answering it."""
PROBE_STALL_S = 3.0
"""A probe that gets neither a record nor the end of a partition for this long stops: its end
cannot be read (a watermark past the last record), or the broker is too slow to tell."""
PROBE_TIMEOUT_S = 30.0
ROUNDS = 3
"""Barriers written before giving up (each round: probe, barrier where needed)."""


class SettleError(RuntimeError):
    """The own logs' end could not be made readable (the broker is unreachable, or a partition
    holds no record to write a barrier with)."""


@dataclass(frozen=True)
class Probe:
    """What the probes saw of one partition."""

    stable_end: int | None
    """Where a read_committed reader got its EOF (None: it got none)."""
    end: int | None
    """The end a read_uncommitted reader saw: its EOF, else the broker's watermark."""

    @property
    def settled(self) -> bool:
        return self.stable_end is not None and self.end is not None and self.stable_end >= self.end

    def describe(self) -> str:
        if self.stable_end is None:
            return f"no end readable (the broker's watermark is {self.end})"
        return f"read_committed end {self.stable_end}, broker's end {self.end}"


def settle(
    producer: Producer,
    bootstrap: str,
    topics: Iterable[str],
    partition: int,
    name: str,
    fenced: Callable[[KafkaException], bool],
) -> int:
    """Probe the own partitions and write barriers until every end can be read; return how many
    barriers were written. Raises `SettleError`, or the KafkaException for which `fenced` is
    true (another writer took over)."""
    parts = [(topic, partition) for topic in topics]
    for round_ in range(ROUNDS + 1):
        probes = probe(bootstrap, parts)
        unsettled = {part: p for part, p in probes.items() if not p.settled}
        if not unsettled:
            return round_
        text = ", ".join(f"{t}[{p}]: {probe_.describe()}" for (t, p), probe_ in unsettled.items())
        if round_ == ROUNDS:
            raise SettleError(f"{name}: the end of the own logs cannot be read: {text}")
        log.warning("%s: own log end not readable (%s): writing a barrier", name, text)
        try:
            _barrier(producer, bootstrap, unsettled, name)
        except KafkaException as exc:
            if fenced(exc):
                raise
            raise SettleError(f"{name}: cannot write a barrier: {exc}") from exc
    raise AssertionError("unreachable")


def probe(bootstrap: str, parts: list[Partition]) -> dict[Partition, Probe]:
    """Read each partition from just before its end, read_committed and read_uncommitted at once,
    until both readers reached the end or `PROBE_STALL_S` passed without news."""
    committed = _consumer(bootstrap, "read_committed")
    uncommitted = _consumer(bootstrap, "read_uncommitted")
    try:
        starts = _starts(uncommitted, parts)
        committed.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in parts])
        uncommitted.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in parts])
        stable_ends: dict[Partition, int] = {}
        ends: dict[Partition, int] = {}
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        last_news = time.monotonic()
        while time.monotonic() < min(deadline, last_news + PROBE_STALL_S):
            news = _step(committed, stable_ends) | _step(uncommitted, ends)
            if news:
                last_news = time.monotonic()
            if len(stable_ends) == len(parts) and len(ends) == len(parts):
                break
        return {
            part: Probe(stable_ends.get(part), ends.get(part, _watermark(uncommitted, part)))
            for part in parts
        }
    except KafkaException as exc:
        raise SettleError(f"cannot read the own logs' ends: {exc}") from exc
    finally:
        committed.close()
        uncommitted.close()


def _consumer(bootstrap: str, isolation: str) -> Consumer:
    config = consumer_config(bootstrap, "streams-settle", PROBE_WAIT_MS)
    config["isolation.level"] = isolation
    return Consumer(config)


def _starts(consumer: Consumer, parts: list[Partition]) -> dict[Partition, int]:
    """Just before each partition's end as a read_uncommitted ListOffsets tells it (Kafka: the
    high watermark; Tansu: at or below the last batch): a read from there ends with an EOF after
    a fetch or two where the end is readable (a read_committed reader gets none when the last
    stable offset is below the start: then the partition is not settled anyway)."""
    starts = {}
    for topic, partition in parts:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        starts[(topic, partition)] = max(low, high - 1, 0)
    return starts


def _step(consumer: Consumer, ends: dict[Partition, int]) -> bool:
    """One short poll; EOF offsets go to `ends`. Whether anything arrived."""
    msg = consumer.poll(0.02)
    if msg is None:
        return False
    error = msg.error()
    if error is not None and error.code() == KafkaError._PARTITION_EOF:
        ends[(msg.topic() or "", msg.partition() or 0)] = msg.offset() or 0
    elif error is not None and not error.retriable() and error.fatal():
        raise KafkaException(error)
    return True


def _watermark(consumer: Consumer, part: Partition) -> int | None:
    """The high watermark of the broker's last fetch answer (None before one)."""
    _low, high = consumer.get_watermark_offsets(TopicPartition(*part), cached=True)
    return high if high >= 0 else None


def _barrier(
    producer: Producer, bootstrap: str, parts: Mapping[Partition, Probe], name: str
) -> None:
    """One transaction with a copy of the first record of each partition, flushed and aborted."""
    firsts = _first_records(bootstrap, list(parts))
    empty = [f"{t}[{p}]" for t, p in parts if (t, p) not in firsts]
    if empty:
        raise SettleError(
            f"{name}: {', '.join(empty)} hold no record to write a barrier with: the end of an "
            "empty partition whose watermark is past 0 cannot be read (Tansu lost its first write)"
        )
    failed: list[KafkaError] = []

    def delivered(error: KafkaError | None, _msg: Msg) -> None:
        if error is not None:
            failed.append(error)

    producer.begin_transaction()
    for (topic, partition), msg in firsts.items():
        producer.produce(
            topic,
            partition=partition,
            key=msg.key(),
            value=msg.value(),
            headers=msg.headers(),
            on_delivery=delivered,
        )
    left = producer.flush(PROBE_TIMEOUT_S)
    producer.abort_transaction(PROBE_TIMEOUT_S)
    if left or failed:
        raise SettleError(f"{name}: the barrier was not written: {failed or f'{left} left'}")
    log.warning(
        "%s: barrier written and aborted in %s", name, ", ".join(f"{t}[{p}]" for t, p in firsts)
    )


def _first_records(bootstrap: str, parts: list[Partition]) -> dict[Partition, Any]:
    """The first data record of each partition (read_uncommitted, from its start)."""
    consumer = _consumer(bootstrap, "read_uncommitted")
    found: dict[Partition, Any] = {}
    try:
        starts = []
        for topic, partition in parts:
            low, _high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=10
            )
            starts.append(TopicPartition(topic, partition, max(low, 0)))
        consumer.assign(starts)
        done: set[Partition] = set()
        last_news = time.monotonic()
        while len(done) < len(parts) and time.monotonic() < last_news + PROBE_STALL_S:
            msg = consumer.poll(0.05)
            if msg is None:
                continue
            last_news = time.monotonic()
            part = (msg.topic() or "", msg.partition() or 0)
            error = msg.error()
            if error is None and part not in found:
                found[part] = msg
                done.add(part)
            elif error is not None and error.code() == KafkaError._PARTITION_EOF:
                done.add(part)
        return found
    finally:
        consumer.close()
