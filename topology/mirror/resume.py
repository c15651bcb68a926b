"""Where a (re)started mirror continues: per partition, after the source offset that the target
partition's last record is a copy of.

The target itself records how far copying got (each copy's `mirror.offset` header), so there is
no consumer group and no offset store that could disagree with the data. Before trusting it, the
source must still hold that very record (same offset, key and value): a memory-only broker that
restarted has an empty (or different) log under the same name, and continuing at the old offset
would skip its records silently.

Tansu's high watermark is the last batch's base offset + 1 (on Apache Kafka the offset after the
last record), so reading to partition EOF from just below it yields a partition's last record; a
tail of transaction control batches holds none, and the window widens backwards. All partitions
are read in one pass each: the time a read waits for its EOF (one fetch wait) is paid once.

A target whose end cannot be read: Tansu's S3 storage writes a produce in steps (the partition's
watermark object, then the batch object), so a produce cut short by a failing object store (or a
killed broker) can leave the watermark one past the last batch. Such a partition never reports
its EOF (librdkafka reports it only at the watermark) and a fetch at the missing offset answers
nothing, until a later batch is written behind the gap, and the only writer of a mirrored topic
is this mirror, which waits here for that end: copying into that cluster stopped for good (seen
after an object store outage: issue 21). So the tail read is also bounded by
`TAIL_STALL_S` without any record or EOF: a partition that delivered its last records and then
stays silent ends at the last record it delivered. On Apache Kafka a fetch below the watermark
always answers with data, so only a stalled broker could end a read that way, and resuming from
an earlier copy only copies some records again (at least once: readers drop duplicates).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, TopicPartition

from streams.kafka.reading import ReadToEnd
from topology.mirror.clients import Clients
from topology.mirror.deadline import Deadline, MirrorError, MirrorTimeout
from topology.mirror.headers import MIRROR_OFFSET_HEADER, copied_from

if TYPE_CHECKING:
    from streams.kafka.reading import Msg

log = logging.getLogger(__name__)

TAIL_STALL_S = 5.0
"""How long a read of the target's tail may go without a record or an EOF before the last record
it delivered counts as the partition's last (see the module docstring)."""


def resume_offsets(clients: Clients, partitions: int, deadline: Deadline) -> dict[int, int]:
    """Per partition of the source, the next source offset to copy (for an empty target: 0, or
    the source's first record held with `Route.from_log_start`)."""
    copies = {
        p: (_mirrored_offset(clients, p, last), last)
        for p, last in _last_copies(clients, partitions, deadline).items()
    }
    _verify_sources(clients, copies, deadline)
    empty = [p for p in range(partitions) if p not in copies]
    first = dict.fromkeys(empty, 0)
    if empty and clients.route.from_log_start:
        consumer = clients.consumer(clients.route.source_bootstrap, "log-start")
        try:
            bounds = _bounds(consumer, clients.route.source_topic, empty, deadline)
        finally:
            consumer.close()
        first = {p: low for p, (low, _high) in bounds.items()}
    return {p: copies[p][0] + 1 if p in copies else first[p] for p in range(partitions)}


def _read(
    clients: Clients,
    consumer: Consumer,
    topic: str,
    starts: Mapping[int, int],
    deadline: Deadline,
    doing: str,
    growing: bool = False,
    stall_timeout: float | None = None,
) -> ReadToEnd:
    """Data records of `topic` from `starts` (partition -> offset) up to each one's EOF (or, for
    a `growing` log, at least up to the end first reported)."""
    route = clients.route
    return ReadToEnd(
        consumer,
        {(topic, p): offset for p, offset in starts.items()},
        doing=f"{route.name}: timed out {doing}",
        timeout=deadline.left(),
        wait_s=route.poll_timeout,
        max_records=route.batch_size,
        on_error=clients.consumer_event,
        growing=growing,
        timeout_error=MirrorTimeout,
        stall_timeout=stall_timeout,
    )


def _bounds(
    consumer: Consumer, topic: str, partitions: Iterable[int], deadline: Deadline
) -> dict[int, tuple[int, int]]:
    """(low, high) watermarks per partition."""
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=deadline.left(cap=10.0))
        for p in partitions
    }


def _last_copies(clients: Clients, partitions: int, deadline: Deadline) -> dict[int, Msg]:
    """The last committed record of each target partition that holds one."""
    topic = clients.route.target_topic
    consumer = clients.consumer(clients.route.target_bootstrap, "resume")
    try:
        bounds = _bounds(consumer, topic, range(partitions), deadline)
        windows = {p: 1 for p, (low, high) in bounds.items() if high > low}
        found: dict[int, Msg] = {}
        while windows:
            starts = {p: max(bounds[p][0], bounds[p][1] - window) for p, window in windows.items()}
            reading = _read(
                clients,
                consumer,
                topic,
                starts,
                deadline,
                "reading the target's tail",
                stall_timeout=TAIL_STALL_S,
            )
            try:
                for message in reading:
                    found[message.partition() or 0] = message
            except MirrorTimeout as exc:
                _end_at_last_delivered(clients, reading, found, exc)
            # No data record in the window (control batches of a transactional writer): widen.
            windows = {
                p: w * 16 for p, w in windows.items() if p not in found and starts[p] > bounds[p][0]
            }
        return found
    finally:
        consumer.close()


def _end_at_last_delivered(
    clients: Clients, reading: ReadToEnd, found: Mapping[int, Msg], exc: MirrorTimeout
) -> None:
    """The tail read stalled: each partition still open that delivered a record ends at the
    last one it delivered (a watermark past its last batch, see the module docstring); raise
    `exc` if one delivered nothing (nothing to resume from)."""
    if not reading.stalled:
        raise exc
    for _topic, partition in sorted(reading.unfinished):
        last = found.get(partition)
        if last is None:
            raise exc
        log.warning(
            "%s: partition %d of the target answers no record and no end after offset %s "
            "for %.0f s although its watermark is further (%s): resuming after that record",
            clients.route.name,
            partition,
            last.offset(),
            TAIL_STALL_S,
            exc,
        )


def _mirrored_offset(clients: Clients, partition: int, last: Msg) -> int:
    """The source offset that `last` (a target partition's last record) is a copy of."""
    route = clients.route
    source, offset = copied_from(last)
    where = (
        f"{route.target_topic} partition {partition} on {route.target_bootstrap}"
        f" (offset {last.offset()})"
    )
    if offset is None:
        raise MirrorError(
            f"the last record of {where} has no valid {MIRROR_OFFSET_HEADER} header: something"
            " other than this mirror writes to the topic, so resuming from it is impossible"
        )
    if source != route.source_alias.encode():
        raise MirrorError(
            f"the last record of {where} was mirrored from {source!r}, not from"
            f" {route.source_alias!r}: two mirrors write the same target topic"
        )
    return offset


def _verify_sources(
    clients: Clients, copies: Mapping[int, tuple[int, Msg]], deadline: Deadline
) -> None:
    """Raise MirrorError unless each source partition holds the record its copy came from."""
    if not copies:
        return
    route = clients.route
    topic = route.source_topic
    consumer = clients.consumer(route.source_bootstrap, "verify")
    try:
        bounds = _bounds(consumer, topic, copies, deadline)
        wanted: dict[int, int] = {}
        for p, (offset, _copy) in copies.items():
            if offset < bounds[p][0]:
                log.warning(
                    "%s: source partition %d offset %d is below the log start %d (retention?):"
                    " cannot verify",
                    route.name,
                    p,
                    offset,
                    bounds[p][0],
                )
            else:
                wanted[p] = offset
        # Find the true ends first: Tansu answers a fetch beyond the log end with silence (no
        # OFFSET_OUT_OF_RANGE), so positioning at a vanished offset would just hang.
        tails = {p: max(bounds[p][0], bounds[p][1] - 1) for p in wanted}
        # The source's region may write steadily meanwhile: its log has no EOF to wait for,
        # and the end first reported is past every record a copy can come from.
        ends = _read(
            clients, consumer, topic, tails, deadline, "finding the source's end", growing=True
        )
        for _message in ends:
            pass
        problems = {
            p: f"the source log ends at offset {ends.ends[(topic, p)]}"
            for p, offset in wanted.items()
            if offset >= ends.ends[(topic, p)]
        }
        present = {p: offset for p, offset in wanted.items() if p not in problems}
        problems |= {p: f"the source holds no record at offset {o}" for p, o in present.items()}
        reading = _read(clients, consumer, topic, present, deadline, "verifying the source")
        for message in reading:
            p = message.partition() or 0
            offset, copy = copies[p]
            if message.offset() == offset:
                if message.key() == copy.key() and message.value() == copy.value():
                    del problems[p]
                else:
                    problems[p] = f"the source record at offset {offset} differs from its copy"
            reading.finish((topic, p))  # the first record at or after the offset decides
    finally:
        consumer.close()
    for p, problem in sorted(problems.items()):
        raise MirrorError(
            f"{route.target_topic} partition {p} on {route.target_bootstrap} ends with a copy of"
            f" {topic} partition {p} offset {copies[p][0]} from {route.source_alias}, but"
            f" {problem}: the source log was recreated (a memory-only broker restarted?). Delete"
            " the target topic (or start a fresh target cluster) to mirror the new log from the"
            " start."
        )
