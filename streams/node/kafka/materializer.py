"""The materializer's Kafka side: read one partition of every op-log topic on the region's cluster.

One consumer thread reads, with `assign()` at explicit offsets (every materializer reads
everything of its partition, and a group join costs seconds), partition `partition` of every
`*.oplog` topic on the cluster (the region's own and the mirrored ones, under either MirrorMaker 2
naming) plus of the region's own `.local` topic, and hands decoded batches to the node. The
partition is a shard's: shard s's ops are in partition s of every log (the mirrors copy partition
s to partition s), so one materializer reads one shard. A topic without that partition is left
alone until it has one. Until shards exist every log has one partition, read by partition 0.

"Caught up" (the node serves only after it) means every topic reached its end at least once
since start (`streams.kafka.reading.EndTracker`: right in any order of records and EOF events, and
on Tansu, whose high watermark is not the log end): the region's own logs by partition EOF, other
regions' logs, which may grow steadily meanwhile, also by reading past the first end the broker
reported. The reading itself is `streams.kafka.reading.PacedConsumer`: the fetch wait follows
`streams.kafka.reading.FetchPacer` (long while reading the backlog, short while records flow, long
again when idle, and doubled whenever the broker keeps answering without the records it has: Tansu's
cost per fetch grows with a partition's history; a fixed 5 ms wait made a node with a few
thousand transactions in its log unable to start), a changed wait means a new librdkafka consumer
assigned where the old one stopped, and `wake` leaves the idle wait at once.

The region's own `.local` topic is read to its end before any other topic is assigned: the
node's catch-up fold (`streams.crdt.fold.Fold`) must know every local op before the replicated
ops that came after it, to apply each local op on exactly the state it was made on.

Every record goes through the shared admission step (`streams.kafka.records`: decoded, its ops
passed through the record gate), as in every other reader of the logs. A record that does not
decode stops the materializer with its topic, partition and offset named: nothing is skipped
silently. An operator who decided that such a record carries nothing (a
foreign producer wrote to the topic, say) names it with `--skip-record TOPIC:PARTITION:OFFSET`;
that record alone is skipped, with a warning in the log. A named record that does decode is
applied all the same: skipping a real op would make the region diverge for good.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException, Message

from streams.crdt.ops import Op
from streams.kafka import retention
from streams.kafka.gate import RecordGate, UndecodableRecord
from streams.kafka.paced import PacedConsumer
from streams.kafka.reading import Pacing, Partition
from streams.kafka.records import Admission
from streams.kafka.topics import is_oplog_topic
from streams.node.runtime.oplog import Batch, CorruptRecord, Decoded, RecordAt

log = logging.getLogger(__name__)

TOPIC_REFRESH_S = 0.5
TOPIC_RETRY_S = 1.0
PROGRESS_EVERY_S = 5.0
POLL_S = 0.05
MAX_BATCH = 10_000


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
        *,
        partition: int = 0,
        gate: RecordGate | None = None,
        covered: dict[int, int] | None = None,
    ) -> None:
        """`own_topics`: the region's own logs; read while catching up, then dropped, since the
        live node applied their ops when it wrote them (reading them back would only decode
        every write of the region to throw it away). `start_offsets` (per topic) and every
        position are offsets in partition `partition`, the one partition read of each topic.
        `covered` (`ReaderSpec.covered`): the applied vector of a boot state that came without
        positions; each op log it does not position is then read from its first record held,
        whose first op must follow on from that vector (`_check_follows`)."""
        self.bootstrap = bootstrap
        self.local_topic = local_topic
        self.partition = partition
        self.name = name
        self._on_batch = on_batch
        self._on_error = on_error
        self._start = dict(start_offsets or {})
        self.own_topics = own_topics
        self.skip_records = skip_records
        self.gate = gate
        """Refuses records that decode but cannot be ops of the topology (`streams.kafka.gate`)."""
        self.admission = Admission(gate, skip_records)
        """Every record read goes through it: decoded, gated, skipped records counted."""
        self.covered = covered
        self._unchecked: set[str] = set()
        """Op logs read from their first record held whose first op is not checked yet."""
        self._local_read = False  # the .local backlog is read: the other topics may come
        self.own_positions: dict[str, int] = {}
        """Where reading the own topics stopped when they were dropped after catching up."""
        self.pacing = pacing or Pacing()
        self._reader = PacedConsumer(
            bootstrap,
            f"streams-{name}",
            pacing=self.pacing,
            poll_s=POLL_S,
            max_records=MAX_BATCH,
            name=name,
        )
        self.records_read = 0
        self.caught_up = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.error: Exception | None = None

    # --- what the node reads -------------------------------------------------------------------

    @property
    def positions(self) -> dict[str, int]:
        """The next offset to read per topic (in partition `partition`)."""
        return {topic: offset for (topic, _p), offset in self._reader.positions().items()}

    def behind(self) -> dict[str, int]:
        """Per topic read, offsets of partition `partition` not read yet (node metrics)."""
        return {topic: n for (topic, _p), n in self._reader.behind().items()}

    @property
    def fetch_wait_ms(self) -> int:
        return self._reader.wait_ms

    def progress(self) -> str:
        """Per topic: where reading is and where the end is, as far as known."""
        return self._reader.describe()

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._reader.interrupt()  # an idle step waits up to IDLE_STEP_S: end it now
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            self._reader.close()
        except RuntimeError:
            pass

    def wake(self) -> None:
        """Records are expected soon (a sync is under way): leave the idle fetch wait now."""
        self._reader.wake()

    def wants(self, topic: str) -> bool:
        return is_oplog_topic(topic) or topic == self.local_topic

    # --- the consumer thread -------------------------------------------------------------------

    def _part(self, topic: str) -> Partition:
        return (topic, self.partition)

    def _local_reached_end(self) -> bool:
        local = self._reader.tracker.partitions.get(self._part(self.local_topic))
        return local is not None and local.reached_end

    def _refresh(self) -> None:
        """Assign the wanted topics that appeared (that have our partition): `.local` alone
        until its backlog is read, then the op logs."""
        present = {
            topic
            for topic, partitions in self._reader.topics(timeout=5).items()
            if self.wants(topic) and self.partition in partitions
        }
        assigned = self._reader.tracker.partitions
        new = {t for t in present if self._part(t) not in assigned}
        if self.caught_up.is_set():
            new -= self.own_topics
        if not self._local_read:
            if self._local_reached_end() or self.local_topic not in present:
                self._local_read = True  # read, or no local log (yet): nothing to read first
            else:
                new &= {self.local_topic}
        # Other regions' logs may grow steadily while they are read: caught up at the end
        # first reported (streams.kafka.reading's docstring says why).
        starts = {self._part(t): self._start.get(t, 0) for t in new}
        if self.covered is not None:
            lifted = [p for p in starts if p[0] not in self._start and p[0] != self.local_topic]
            if lifted:
                starts.update(self._reader.low_watermarks(lifted, timeout=10.0))
                self._unchecked.update(t for t, _p in lifted)
        self._check_reaches(starts)
        self._reader.assign(
            starts,
            growing={self._part(t) for t in new - self.own_topics},
        )

    def _check_reaches(self, starts: dict[Partition, int]) -> None:
        """Refuse to read on from a partition whose start moved past where this reader must
        begin (records deleted by the retention policy): a boot from the snapshot's positions,
        or a full replay from 0 when none was usable (`streams.kafka.retention`)."""
        if not starts:
            return
        lows = self._reader.low_watermarks(starts, timeout=10.0)
        from_snapshot = {p: o for p, o in starts.items() if p[0] in self._start}
        retention.check_reaches(self.name, lows, from_snapshot, "from the snapshot's position")
        whole = {p: o for p, o in starts.items() if p[0] not in self._start}
        retention.check_reaches(
            self.name,
            lows,
            whole,
            "from the log's beginning (no usable snapshot covers this log)",
        )

    def _drop_own_topics(self) -> None:
        dropped = self._reader.unassign(self._part(t) for t in self.own_topics)
        self.own_positions.update({topic: offset for (topic, _p), offset in dropped.items()})

    def _decode(self, msg: Message[Any, Any]) -> list[Decoded]:
        """The ops of one Kafka record (a pack's, or a single one), as the shared admission
        step (`streams.kafka.records`) admits them; none for a record skipped (forged, or named
        by --skip-record and refused)."""
        topic = msg.topic() or ""
        partition = msg.partition() or 0
        offset = msg.offset() or 0
        admission = self.admission
        headers = msg.headers() if admission.wants_headers else None
        try:
            admitted = admission.admit(topic, partition, offset, msg.value(), headers)
        except UndecodableRecord as exc:
            raise CorruptRecord(topic, partition, offset, exc.reason) from exc
        for skip in admitted.skipped:
            log.warning("%s: %s", self.name, skip.text())
        if admitted.withheld:
            log.warning(
                "%s: --skip-record names topic %s partition %d offset %d, which decodes: "
                "withheld until another record carrying its dot arrives",
                self.name,
                topic,
                partition,
                offset,
            )
        continues = admitted.continues
        decoded = [Decoded(topic, partition, offset, r, continues) for _i, r in admitted.items]
        if topic in self._unchecked and decoded:
            self._unchecked.discard(topic)
            self._check_follows(decoded[0])
        return decoded

    def _check_follows(self, first: Decoded) -> None:
        """The first op read of a log read from its first record held (a boot state without
        positions) must follow on from the state's applied vector: an op of origin O past
        covered[O] + 1 means the ops between were deleted (retention) before this state covered
        them; folding on would leave them missing for good, so reading stops, naming the log."""
        op = first.record
        if not isinstance(op, Op):
            return
        covered = (self.covered or {}).get(op.origin, 0)
        if op.seq > covered + 1:
            raise RuntimeError(
                f"{self.name}: {first.topic} partition {first.partition} now starts at offset"
                f" {first.offset} with op {op.origin}:{op.seq}, but the state this node booted"
                f" from covers that region's ops only up to seq {covered}: ops {covered + 1}.."
                f"{op.seq - 1} were deleted from the log (retention) before any snapshot this"
                " node can use covered them; boot from a newer snapshot (for a joining region:"
                " a peer snapshot taken after the deletion)"
            )

    @property
    def records_skipped(self) -> int:
        """Records skipped: forged ones, and those named by --skip-record."""
        return self.admission.skipped

    def _refuse_unresolved_skips(self) -> None:
        """A record named by --skip-record that decodes, passes the checks and met no rival
        under its dot is a real op: skipping it would make the region diverge for good."""
        unresolved = self.admission.unresolved()
        if unresolved:
            named = ", ".join(f"{t}:{p}:{o}" for t, p, o in unresolved)
            raise RuntimeError(
                f"--skip-record names {named}, which decodes to an op that no other record "
                "contradicts: refusing to skip a real op (remove the option)"
            )

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
                batch = [d for msg in self._reader.poll() for d in self._decode(msg)]
                self.records_read += len(batch)
                if batch:
                    self._on_batch(batch)
                now = time.monotonic()
                if not self._local_read and self._local_reached_end():
                    next_refresh = 0.0  # assign the other topics now
                if self.caught_up.is_set():
                    continue
                if self._local_read and self._reader.tracker.caught_up():
                    self._refuse_unresolved_skips()
                    self._reader.leave_catch_up()
                    self.caught_up.set()
                    self._drop_own_topics()
                    log.info(
                        "%s: caught up: %d records in %.1f s",
                        self.name,
                        self.records_read,
                        now - started,
                    )
                elif now >= next_progress:
                    next_progress = now + PROGRESS_EVERY_S
                    log.info(
                        "%s: catching up, %d records read in %.0f s: %s",
                        self.name,
                        self.records_read,
                        now - started,
                        self.progress(),
                    )
        except Exception as exc:  # reported to the node, which refuses to go on silently
            self.error = exc
            log.error("%s", exc)
            self._on_error(exc)
