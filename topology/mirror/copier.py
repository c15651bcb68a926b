"""`Mirror`: copies one region's op log to one other cluster, continuously or on demand.

One instance owns one source reader (`streams.kafka.reading.PacedConsumer`) and one target writer
(`TargetWriter`). `copy_available` and the background thread share them under a lock, so a test
may call `copy_available` while the thread runs. `pause` only stops the background thread: an
explicit `copy_available` still copies (that is how a paused topology is synchronised on demand).

Clients open in one step (`_ensure_ready`: producer, topic checks, resume positions, reader
assignment) and close in one step: any Kafka error, failed delivery or changed topic closes them
and the next step opens them again from what the target holds, so nothing but the target's data
says where copying stands.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import KafkaException

from streams.kafka.topics import Replication, TopicError
from topology.mirror import topic_pair
from topology.mirror.clients import Clients, Route
from topology.mirror.deadline import Deadline, MirrorError, MirrorTimeout
from topology.mirror.resume import resume_offsets
from topology.mirror.writer import TargetWriter

log = logging.getLogger(__name__)

MISSING_TOPIC_RECHECK = 0.5
"""How long a background mirror waits before looking again for a source topic that does not
exist."""
TOPIC_CHECK_INTERVAL = 5.0
"""How often an idle background mirror checks that its source and target topics are still the
ones it started with (a memory-only broker that restarts recreates them under the same name).
Each check is a metadata request to both clusters: at 1 s, six flows of an idle three-region
topology spent 0.6 % of a core on it (issue 34, measured 2026-11-28)."""
STEP_TIMEOUT = 30.0
"""What one background step (opening the clients, resuming) may take before it starts over."""


class Mirror:
    """Copies `<region>.oplog` from the region's home cluster to one other cluster, each
    partition to the partition of the same number (see the package docstring)."""

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
        replication: Replication | None = None,
        from_log_start: bool = False,
    ) -> None:
        """`replication`: of the target topic when this mirror creates it (the topology's);
        `from_log_start`: `Route.from_log_start`."""
        route = Route(
            source_bootstrap,
            target_bootstrap,
            region_name,
            source_alias,
            naming,
            poll_timeout=poll_timeout,
            batch_size=batch_size,
            replication=replication or Replication(),
            from_log_start=from_log_start,
        )
        self.route = route
        self.source_bootstrap = source_bootstrap
        self.target_bootstrap = target_bootstrap
        self.region_name = region_name
        self.source_alias = source_alias
        self.naming = naming
        self.source_topic = route.source_topic
        self.target_topic = route.target_topic
        self.name = route.name
        self.poll_timeout = poll_timeout
        self.batch_size = batch_size
        self._clients = Clients(route)
        self._reader = self._clients.reader()
        self._writer = TargetWriter(self._clients)
        self._lock = threading.RLock()
        self._pair: topic_pair.TopicPair | None = None  # set while the clients are open
        self._source_id: str | None = None  # the source topic's id when first seen
        self._last_topic_check = 0.0
        self._paused = False
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
        return self._writer.copied

    @property
    def skipped(self) -> int:
        """Source records not copied because they are not the region's own (they carry a
        `mirror.source` header: `topology.mirror.writer.TargetWriter._skip_copy`)."""
        return self._writer.skipped

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def positions(self) -> dict[int, int]:
        """The next source offset to copy per partition, once known (clients open)."""
        return {p: offset for (_topic, p), offset in self._reader.positions().items()}

    @property
    def position(self) -> int | None:
        """The next source offset of partition 0 to copy, once known."""
        return self.positions.get(0)

    def copy_available(self, timeout: float = 30.0) -> int:
        """Copy everything the source holds now (every partition up to its EOF) and wait for
        the target's acknowledgement; return how many records the target acknowledged during
        the call (re-copies after a failed delivery included).

        Raises MirrorTimeout when that does not finish within `timeout` seconds and MirrorError on
        a fatal condition. A source topic that does not exist yet means nothing to copy (0).
        """
        deadline = Deadline(timeout, self.name)
        with self._lock:
            before = self.copied
            while True:
                try:
                    if not self._ensure_ready(deadline, check_topics=True):
                        return self.copied - before
                    self._drain(deadline)
                    self._writer.flush(deadline)
                except (KafkaException, TopicError) as exc:
                    self._after_kafka_error(exc)
                    deadline.check(f"retrying after a Kafka error ({exc})")
                    time.sleep(deadline.left(cap=0.2))
                    continue
                if self._recover_from_delivery_errors():
                    deadline.check("re-copying after a failed delivery")
                    continue
                return self.copied - before

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
        self._reader.interrupt()  # the step holds the lock: end its idle wait
        with self._lock:
            self._paused = True
            self._writer.settle()

    def resume(self) -> None:
        self._paused = False

    def stop(self) -> None:
        """Stop the background thread (if any) and close the Kafka clients. Idempotent; a later
        `copy_available` or `start` reopens clients and resumes from the target."""
        self._stop.set()
        self._reader.interrupt()  # an idle step waits up to IDLE_STEP_S: end it now
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
        return f"Mirror({self.name}, copied={self.copied}, paused={self._paused})"

    # -- opening and closing the clients -------------------------------------------------------

    def _ensure_ready(self, deadline: Deadline, check_topics: bool = False) -> bool:
        """Open the clients, check the topics and position the reader at the resume offsets;
        False while the source topic does not exist (nothing to copy yet). With
        `check_topics`, first make sure that open clients still look at their topics."""
        if self._pair is not None:
            if not check_topics or self._topics_unchanged(deadline):
                return True
        self._writer.open()  # first: its producer id arrives while the rest is done
        pair = topic_pair.prepare(self._clients, self._source_id, deadline)
        if pair is None:
            return False
        self._source_id = pair.source.id
        starts = resume_offsets(self._clients, pair.partitions, deadline)
        for partition, floor in self._writer.take_floors().items():
            if floor < starts.get(partition, 0):
                log.info(
                    "%s: partition %d: the target ends at source offset %d but offset %d failed:"
                    " re-copying",
                    self.name,
                    partition,
                    starts[partition] - 1,
                    floor,
                )
                starts[partition] = floor
        log.info(
            "%s: starting at source offset %s",
            self.name,
            ", ".join(f"{offset} (partition {p})" for p, offset in sorted(starts.items())),
        )
        self._reader.assign({(self.source_topic, p): offset for p, offset in starts.items()})
        self._pair = pair
        return True

    def _topics_unchanged(self, deadline: Deadline) -> bool:
        """Raise if the source topic was recreated (fatal: the copies on the target belong to a
        log that no longer exists); if the target was, close the clients so that the next step
        recreates it and copies from what it holds (nothing: from the start). False then."""
        assert self._pair is not None
        self._last_topic_check = time.monotonic()
        if topic_pair.unchanged(self._clients, self._pair, deadline):
            return True
        self._close_clients(flush=False)
        return False

    def _close_clients(self, flush: bool) -> None:
        """Close every client; the next use derives its positions from the target again."""
        self._pair = None
        self._writer.close(flush)
        self._reader.close(forget=True)
        self._clients.drop_admins()

    def _recover_from_delivery_errors(self) -> bool:
        """After a failed delivery (or a fatal client state) start over from what the target
        holds, but no later than the first record that failed (the floors). True if it did."""
        error = self._writer.failed or self._clients.fatal
        if error is None:
            return False
        log.warning("%s: delivery failed (%s); resuming from the target", self.name, error)
        self._close_clients(flush=False)
        self._clients.fatal = None
        return True

    def _after_kafka_error(self, exc: Exception) -> None:
        log.warning("%s: Kafka error, will retry from the target's end: %s", self.name, exc)
        self._close_clients(flush=False)
        self._clients.fatal = None

    # -- copying --------------------------------------------------------------------------------

    def _drain(self, deadline: Deadline) -> None:
        """Copy every partition up to an EOF reported now. A copy on demand is interactive:
        the reader leaves its idle fetch wait first."""
        self._reader.wake()
        for records in self._reader.read_to_end(
            deadline.left(),
            doing=f"{self.name}: timed out reading the source",
            timeout_error=MirrorTimeout,
        ):
            for message in records:
                self._writer.forward(message, deadline)
            self._writer.poll()

    def _pump(self) -> int:
        """One background step: forward what one poll of the source returns."""
        records = self._reader.poll()
        deadline = Deadline(60.0, self.name)
        for message in records:
            self._writer.forward(message, deadline)
        self._writer.poll()
        return len(records)

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
                    ready = self._ensure_ready(Deadline(STEP_TIMEOUT, self.name), due)
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
