"""The target side of one mirror: its producer, the copies it writes, what delivery reports say.

The producer is idempotent with the gapless guarantee: records reach a target partition in
source order, each once per producer, and a failed batch stops the producer instead of leaving a
hole that a later success would hide. After a failure the mirror starts over from the target
(`topology.mirror.resume`), but never past the first record whose delivery failed: `floors`
keeps, per partition, the lowest source offset that may be missing on the target (at least once
even if a later record made it after an earlier one failed).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, Producer

from topology.mirror.clients import Clients
from topology.mirror.deadline import Deadline, MirrorError
from topology.mirror.headers import MIRROR_SOURCE_HEADER, copied_from, copy_headers, is_copy

if TYPE_CHECKING:
    from streams.kafka.reading import Msg

log = logging.getLogger(__name__)

SKIP_REPORT_EVERY = 1000


class TargetWriter:
    """Writes copies to the target topic, partition p of the source to partition p."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients
        self.route = clients.route
        self._alias = self.route.source_alias.encode()
        self._producer: Producer | None = None
        self.copied = 0
        """Records the target acknowledged (re-copies included), over every producer."""
        self.failed: KafkaError | None = None
        """The first delivery error of the current producer."""
        self.floors: dict[int, int] = {}
        """Per partition, the lowest source offset whose delivery failed, until resumed."""
        self.skipped = 0
        """Source records not copied because they carry a `mirror.source` header."""
        self.last_skipped: tuple[int, int | None] | None = None
        """(partition, offset) of the newest of them."""

    def open(self) -> None:
        """Create the producer if there is none (an idempotent producer spends ~0.5 s getting
        its producer id, a fixed librdkafka timer: opening it first overlaps that wait)."""
        if self._producer is None:
            self.clients.fatal = None
            self._producer = self.clients.producer(self._on_delivery)

    def forward(self, message: Msg, deadline: Deadline) -> None:
        """Hand the copy of a source record to the producer (waiting for room in its queue)."""
        assert self._producer is not None
        partition = message.partition() or 0
        if is_copy(message):
            offset = message.offset()
            if offset == 0:
                raise MirrorError(
                    f"{self.route.source_topic} partition {partition} on"
                    f" {self.route.source_bootstrap} starts with a record carrying a"
                    f" {MIRROR_SOURCE_HEADER} header: it is a mirrored copy, and a mirror must"
                    " only read a region's own op log on its home cluster (check the region's"
                    " bootstrap)"
                )
            self._skip_copy(partition, offset)
            return
        ts_type, ts = message.timestamp()
        while True:
            try:
                self._producer.produce(
                    self.route.target_topic,
                    value=message.value(),
                    key=message.key(),
                    partition=partition,
                    timestamp=0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                    headers=copy_headers(message, self._alias),
                )
                return
            except BufferError:
                # The local queue is full: serve delivery reports until there is room.
                self._producer.poll(0.05)
                deadline.check("waiting for room in the producer queue")

    def _skip_copy(self, partition: int, offset: int | None) -> None:
        """A record in the source log carries a `mirror.source` header: it is not the region's
        own (a mirrored copy, or a record some other producer wrote there). Copying it would
        hand other regions a record their home cluster never had; stopping for good would let
        one stray record end the region's replication. So it is skipped and reported: the first
        one and then one line per `SKIP_REPORT_EVERY`, with the count (`skipped`). Only a log
        whose very first record is a copy is refused (`forward`): that is a mirrored topic, a
        mirror pointed at the wrong cluster."""
        self.skipped += 1
        self.last_skipped = (partition, offset)
        if self.skipped == 1 or self.skipped % SKIP_REPORT_EVERY == 0:
            log.warning(
                "%s: skipped %s partition %d offset %s on %s: it carries a %s header, so it is "
                "not a record of the region's own op log (a copy, or written by another "
                "producer); %d skipped so far (a mirror pointed at a cluster that holds only "
                "copies skips everything: check the region's bootstrap)",
                self.route.name,
                self.route.source_topic,
                partition,
                offset,
                self.route.source_bootstrap,
                MIRROR_SOURCE_HEADER,
                self.skipped,
            )

    def poll(self) -> None:
        """Serve delivery reports that arrived."""
        if self._producer is not None:
            self._producer.poll(0)

    def flush(self, deadline: Deadline) -> None:
        """Wait for every copy handed over to be acknowledged, by the deadline."""
        if self._producer is None:
            return
        left = self._producer.flush(deadline.left())
        if left:
            raise deadline.expired(f"waiting for the target to acknowledge {left} records")

    def settle(self) -> None:
        """Let what was handed over reach the target (at most 10 s), before a pause."""
        if self._producer is not None:
            left = self._producer.flush(10.0)
            if left:
                log.warning("%s: %d records still in flight after pause", self.route.name, left)

    def close(self, flush: bool) -> None:
        """Close the producer, after delivering what it holds (`flush`) or not; what it does not
        deliver lowers the floors."""
        producer, self._producer = self._producer, None
        if producer is not None:
            left = producer.flush(10.0) if flush else len(producer)
            if left:
                if flush:
                    log.warning("%s: dropping %d undelivered records", self.route.name, left)
                # Purged records get failed delivery reports, which lower the floors; close()
                # would otherwise wait for them without a time limit.
                producer.purge(in_queue=True, in_flight=True, blocking=True)
                try:
                    producer.poll(0)
                except KafkaException as exc:
                    # A fatal producer error (e.g. a gap after its broker lost an S3 write)
                    # surfaces here, in the very call that closes the producer for it: raised,
                    # it would end the mirror's thread for good (issue 21).
                    log.warning("%s: closing a failed producer: %s", self.route.name, exc)
            producer.close()
        self.failed = None

    def take_floors(self) -> dict[int, int]:
        """The floors, forgotten here: the caller resumes from them."""
        floors, self.floors = self.floors, {}
        return floors

    def _on_delivery(self, error: KafkaError | None, message: Msg) -> None:
        offset = message.offset()
        if error is None and offset is not None and offset >= 0:
            self.copied += 1
            return
        if error is None:
            # Delivered without an offset: librdkafka reports a retried batch that the broker
            # answers with DUPLICATE_SEQUENCE_NUMBER as delivered ("previous send succeeded but
            # was not acknowledged"). Tansu's S3 storage records the producer's sequence before
            # it writes the batch, so after its broker or store failed in between, the batch was
            # never stored: the copy may be missing on the target (its region then waits for
            # that op for ever; tests/faults/test_durable_gaps.py makes it). Start over from the
            # target, no later than this record (copied again if it is there).
            error = KafkaError(
                KafkaError.DUPLICATE_SEQUENCE_NUMBER,
                "delivered without an offset (the broker had the producer's sequence but maybe"
                " not the record)",
            )
            log.warning("%s: a copy was acknowledged without an offset: %s", self.route.name, error)
        if self.failed is None:
            self.failed = error
        _source, offset = copied_from(message)
        if offset is not None:
            partition = message.partition() or 0
            self.floors[partition] = min(offset, self.floors.get(partition, offset))
