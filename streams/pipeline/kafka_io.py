"""Kafka access for the pipeline: find the op-log partitions, resolve offsets, read a range.

Runs on the driver (planning: topics, earliest/latest/timestamp offsets) and on the executors
(reading one offset range with confluent-kafka). It reads op logs by the rules every reader
follows (`streams.kafka.reading`, whose `consumer_config` it uses: assign() at explicit offsets,
read_committed, partition-EOF events, fetch sizes that take the largest record):

- `fetch.wait.max.ms` of at least 500 ms: a batch job reads large backlogs, and the embedded Tansu
  broker answers with nothing at all when the wait runs out before it assembled the fetch.
- The end of a partition is what a partition-EOF event reports, never the high watermark (Tansu
  reports the last batch's base offset + 1). Transaction control records take offsets that are
  never delivered, so reading a range `[start, end)` stops when the next offset reaches `end`, or
  at an EOF at or past `end`; an EOF before `end` means the records are gone.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streams.config import load as load_topology
from streams.kafka import reading as kafka
from streams.pipeline.options import EARLIEST, LATEST, Offsets, SourceOptions, parse

_kafka_log = logging.getLogger("streams.pipeline.kafka")


class SourceError(RuntimeError):
    """The cluster, a topic or an offset cannot be read as asked; the message says which."""


class DataLossError(SourceError):
    """Offsets that Kafka no longer holds were requested and failOnDataLoss is true."""


@dataclass(frozen=True)
class Range:
    """One offset range `[start, end)` of one partition: what a Spark input partition reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@functools.lru_cache(maxsize=8)
def _register_topology(path: str) -> None:
    """Read the `topology` option's file once per process (driver or executor): its regions'
    `[region.kafka]` settings (TLS, SASL) then apply to every consumer made for their clusters
    (`streams.kafka.security`)."""
    load_topology(path)


def consumer_config(opts: SourceOptions, purpose: str) -> dict[str, object]:
    """`streams.kafka.reading.consumer_config`, with the pipeline's data-loss rule and log, and
    the security settings of the `topology` option's cluster."""
    if opts.topology is not None:
        _register_topology(opts.topology)
    return kafka.consumer_config(
        opts.bootstrap,
        f"streams-pipeline-{purpose}",
        max(500, opts.fetch_wait_ms),
        **{
            "auto.offset.reset": "error" if opts.fail_on_data_loss else "earliest",
            "socket.timeout.ms": 30000,
            "logger": _kafka_log,
        },
    )


# --- planning (driver) ---------------------------------------------------------------------


@contextmanager
def planning(bootstrap: str, purpose: str) -> Iterator[tuple[SourceOptions, Consumer]]:
    """The default options for `bootstrap` and a consumer for a job's own planning on the
    driver (topics, partitions, ends), closed afterwards."""
    opts = parse({"kafka.bootstrap.servers": bootstrap})
    consumer = Consumer(consumer_config(opts, purpose))
    try:
        yield opts, consumer
    finally:
        consumer.close()


def partitions_of(opts: SourceOptions, consumer: Consumer) -> list[tuple[str, int]]:
    """The subscribed (topic, partition) pairs; errors for an unreachable cluster or a named
    topic that is missing or is not an op log."""
    return describe(opts, consumer)[0]


def describe(opts: SourceOptions, consumer: Consumer) -> tuple[list[tuple[str, int]], str | None]:
    """`partitions_of`, and the cluster's id (the offsets planned are its own)."""
    try:
        metadata = consumer.list_topics(timeout=15)
    except KafkaException as exc:
        raise SourceError(f"cannot reach Kafka at {opts.bootstrap}: {exc}") from exc
    return _subscribed(opts, metadata), metadata.cluster_id or None


def _subscribed(opts: SourceOptions, metadata: Any) -> list[tuple[str, int]]:
    names = sorted(t for t in metadata.topics if not t.startswith("__"))
    if opts.subscribe is not None:
        missing = [t for t in opts.subscribe if t not in metadata.topics]
        if missing:
            raise SourceError(
                f"topic(s) {', '.join(missing)} do not exist on {opts.bootstrap} "
                f"(op logs there: {', '.join(t for t in names if t.endswith('.oplog')) or 'none'})"
            )
        not_oplog = [t for t in opts.subscribe if not _is_op_log_name(t)]
        if not_oplog:
            raise SourceError(
                f"topic(s) {', '.join(not_oplog)} are not op logs (an op log is named "
                f"<region>.oplog, or <region>.local for region-local ops)"
            )
    chosen = [t for t in names if opts.wants(t)]
    if opts.pattern is not None:
        chosen = [t for t in chosen if _is_op_log_name(t)]
    out: list[tuple[str, int]] = []
    for topic in chosen:
        for p in sorted(metadata.topics[topic].partitions):
            out.append((topic, p))
    return out


def first_values(
    opts: SourceOptions, consumer: Consumer, tps: list[tuple[str, int]], timeout: float = 60.0
) -> dict[tuple[str, int], bytes | None]:
    """The first record's value of each partition, empty ones left out: how a job without a
    topology file learns which region writes each op log (the record gate's regions,
    `streams.kafka.records.Trust.from_logs`)."""
    starts = {tp: _watermarks(consumer, tp)[0] for tp in tps}
    found: dict[tuple[str, int], bytes | None] = {}
    reading = kafka.ReadToEnd(
        consumer,
        {tp: o for tp, o in starts.items()},
        doing=f"reading the first record of each op log on {opts.bootstrap}",
        timeout=timeout,
        wait_s=1.0,
        timeout_error=SourceError,
    )
    try:
        for msg in reading:
            tp = (msg.topic() or "", msg.partition() or 0)
            found.setdefault(tp, msg.value())
            reading.finish(tp)
    finally:
        consumer.unassign()
    return dict(sorted(found.items()))


def _is_op_log_name(topic: str) -> bool:
    return topic.endswith(".oplog") or topic.endswith(".local")


def _watermarks(consumer: Consumer, tp: tuple[str, int]) -> tuple[int, int]:
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(*tp), timeout=15, cached=False)
    except KafkaException as exc:
        raise SourceError(f"cannot query offsets of {tp[0]}[{tp[1]}]: {exc}") from exc
    return int(low), int(high)


def refuse_truncated(consumer: Consumer, tps: list[tuple[str, int]], job: str) -> None:
    """A fold of the logs from their beginning (the snapshot, audit and export jobs) over a log
    whose first records the retention policy deleted would miss their ops without a word: say
    which log and what is gone instead (`streams.kafka.retention`). These jobs do not start from
    a stored snapshot (yet)."""
    for tp in tps:
        low, _high = _watermarks(consumer, tp)
        if low > 0:
            raise SourceError(
                f"{tp[0]}[{tp[1]}] now starts at offset {low}: the records before it were deleted"
                f" by the retention policy, so the {job} job, which folds the logs from their"
                f" beginning, cannot see their ops; it does not start from a snapshot (yet): use"
                f" a node's snapshot (`streams snapshot`, CRDT.SNAPSHOT) instead"
            )


def log_end(consumer: Consumer, tp: tuple[str, int], timeout: float = 60.0) -> int:
    """The true end offset of a partition (read_committed): read from just below the high
    watermark to the partition-EOF event, whose offset is the end (Tansu's high watermark is only
    the last batch's base offset + 1)."""
    low, high = _watermarks(consumer, tp)
    if high <= low:
        return high
    where = f"{tp[0]}[{tp[1]}]"

    def on_error(msg: Message) -> None:
        err = msg.error()
        if err is not None and (err.fatal() or err.code() == KafkaError._ALL_BROKERS_DOWN):
            raise SourceError(f"reading the end of {where}: {err}")

    reading = kafka.ReadToEnd(
        consumer,
        {tp: max(low, high - 1)},
        doing=f"could not find the end of {where}",
        timeout=timeout,
        wait_s=1.0,
        on_error=on_error,
        timeout_error=SourceError,
    )
    end = high
    try:
        for msg in reading:
            end = max(end, (msg.offset() or 0) + 1)
        return max(end, reading.ends[tp])
    finally:
        consumer.unassign()


def resolve(
    opts: SourceOptions,
    consumer: Consumer,
    tps: list[tuple[str, int]],
    spec: str | Offsets,
    what: str,
) -> dict[tuple[str, int], int]:
    """Concrete offsets for `spec` (earliest / latest / JSON) on each partition. With
    failOnDataLoss, an explicit offset below what Kafka still holds is an error."""
    out: dict[tuple[str, int], int] = {}
    for tp in tps:
        if isinstance(spec, str):
            wanted = EARLIEST if spec == "earliest" else LATEST
        else:
            wanted = spec.get(tp[0], {}).get(tp[1], EARLIEST if what == "starting" else LATEST)
        low, _high = _watermarks(consumer, tp)
        if wanted == EARLIEST:
            out[tp] = low
        elif wanted == LATEST:
            out[tp] = log_end(consumer, tp)
        elif wanted < low:
            if opts.fail_on_data_loss:
                raise DataLossError(
                    f"{what} offset {wanted} of {tp[0]}[{tp[1]}] is no longer in Kafka (the log "
                    f"starts at {low}); set failOnDataLoss=false to start at {low} instead"
                )
            out[tp] = low
        else:
            out[tp] = wanted
    if not isinstance(spec, str):
        unknown = sorted(
            f"{t}[{p}]" for t, parts in spec.items() for p in parts if (t, p) not in out
        )
        if unknown:
            raise SourceError(
                f"{what}Offsets names {', '.join(unknown)}, which the subscription does not "
                f"include (subscribed: {', '.join(f'{t}[{p}]' for t, p in tps) or 'nothing'})"
            )
    return out


def offsets_for_time(
    consumer: Consumer, tps: list[tuple[str, int]], ts_ms: int
) -> dict[tuple[str, int], int]:
    """The first offset at or after `ts_ms` per partition (the end when none is)."""
    try:
        found = consumer.offsets_for_times(
            [TopicPartition(t, p, ts_ms) for t, p in tps], timeout=15
        )
    except KafkaException as exc:
        raise SourceError(f"the broker cannot look offsets up by time: {exc}") from exc
    out: dict[tuple[str, int], int] = {}
    for tp, res in zip(tps, found, strict=True):
        if res.error is not None:
            raise SourceError(f"offsets by time for {tp[0]}[{tp[1]}]: {res.error}")
        out[tp] = res.offset if res.offset >= 0 else log_end(consumer, tp)
    return out


def split(ranges: list[Range], min_partitions: int | None) -> list[Range]:
    """Cut ranges so there are at least `min_partitions` of them, big ranges cut first into
    near-equal pieces (like Spark's Kafka source). Empty ranges are dropped."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[Range] = []
    for r in ranges:
        pieces = max(1, min(r.size, round(min_partitions * r.size / total)))
        step, extra = divmod(r.size, pieces)
        start = r.start
        for i in range(pieces):
            end = start + step + (1 if i < extra else 0)
            out.append(Range(r.topic, r.partition, start, end))
            start = end
    return out


# --- reading (executors) -------------------------------------------------------------------


def read_range(opts: SourceOptions, rng: Range) -> Iterator[Message]:
    """The committed records of `[start, end)`, in offset order. Stops at `end` (or at an EOF at
    or past it); an EOF before `end` means the records are gone (DataLossError with
    failOnDataLoss, else the range ends there)."""
    if rng.size == 0:
        return
    consumer = Consumer(consumer_config(opts, "read"))
    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    where = f"{rng.topic}[{rng.partition}] offsets {rng.start}..{rng.end - 1}"
    last_progress = time.monotonic()
    position = rng.start
    try:
        while position < rng.end:
            batch = kafka.poll_batch(consumer, 1.0, 10000)
            if not batch:
                if time.monotonic() - last_progress > opts.read_timeout_s:
                    raise SourceError(
                        f"reading {where}: no progress for {opts.read_timeout_s:.0f}s at offset "
                        f"{position} (is {opts.bootstrap} reachable?)"
                    )
                continue
            last_progress = time.monotonic()
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof = msg.offset() or 0
                        if eof >= rng.end:
                            return
                        if eof >= position:
                            # The log ends before the range does: its records are gone (a
                            # recreated topic, a restarted memory-only broker).
                            if opts.fail_on_data_loss:
                                raise DataLossError(
                                    f"reading {where}: the log ends at {eof}; offsets up to "
                                    f"{rng.end - 1} are no longer in Kafka (failOnDataLoss)"
                                )
                            return
                        continue
                    if (
                        err.code() == KafkaError._AUTO_OFFSET_RESET
                        or "out of range" in str(err).lower()
                    ):
                        raise DataLossError(
                            f"reading {where}: offset {position} is no longer in Kafka ({err}); "
                            f"set failOnDataLoss=false to skip what was lost"
                        )
                    if err.fatal():
                        raise SourceError(f"reading {where}: {err}")
                    _kafka_log.warning("reading %s: %s", where, err)
                    continue
                offset = msg.offset() or 0
                if offset >= rng.end:
                    return
                position = offset + 1
                yield msg
    finally:
        consumer.close()
