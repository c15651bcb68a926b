"""One shard of a region on this node: a whole replicated state machine with its own log.

A shard owns a contiguous range of hash slots (`streams.slots`); its ops go to its own partition
of the region's logs, numbered by its own counter, with its own causal context, tombstones and
snapshots, written through its own group commit by its writer: the handle of the transactional
producer its node process shares between its shards (`streams.node.kafka.process_writer`: one
transaction holds the batches of several shards, and fencing is per process). Shards never need
each other: every rule of the seeds is per key, and a key lives in one shard.

The parts: `Replica` (the state and how records become state), the writer and `WritePath`
(group commit), `Loader` (boot, catch-up, reload after a failed batch), `Snapshotter`. This
class wires them and keeps the shard's health: whether it serves (LOADING only while it boots)
and whether it accepts writes.

When a batch fails, its ops (and the open batch's) are undone in memory and reads go on; writes
are refused at once (`WritePath.down`) while the shard makes its writer usable again
(`Writer.recover`, which never renews a writer another node superseded: the shard then stays
read-only, fenced; and which makes the end of the own logs readable, `streams.node.kafka.settle`),
then re-reads its log in the background (`Loader.reload`) and switches over to the state read.
Writes are taken again from then on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from streams.crdt import ops
from streams.ids import IdMode
from streams.node.runtime import refusals
from streams.node.runtime.backend import Outcome
from streams.node.runtime.clock import NodeClock
from streams.node.runtime.loader import DEFAULT_CATCH_UP_TIMEOUT_S, Loader
from streams.node.runtime.oplog import OpLog, WriterError, WriterFenced
from streams.node.runtime.refusals import LOADING, Refusal
from streams.node.runtime.replica import Issued, Replica
from streams.node.runtime.snapshotter import Pause, SnapshotPolicy, Snapshotter
from streams.node.runtime.tasks import Tasks
from streams.node.runtime.undo import CommittedView, Journal
from streams.node.runtime.waiters import Waiters
from streams.node.runtime.writepath import (
    DEFAULT_COMMIT_LINGER_S,
    DEFAULT_WRITE_TIMEOUT_S,
    WriteBatch,
    WritePath,
)

log = logging.getLogger(__name__)

TOMBSTONE_GC_S = 5.0
"""How often DEL / XGROUP DESTROY tombstones that every region has applied are dropped."""
STOP_TIMEOUT_S = 15.0

SLOW_COMMIT_S = 0.025
"""A batch in flight longer than this is slow (the broker stalls): reads are then answered from
the state the log holds (`committed_view`) instead of waiting for it. Commits take a few ms."""


@dataclass(frozen=True)
class ShardSetup:
    """What every shard of a node shares."""

    region_name: str
    region_id: int
    mode: IdMode
    regions: tuple[int, ...]
    """Every region id of the topology (tombstone collection needs them all)."""
    log: OpLog
    waiters: Waiters
    clock: NodeClock
    pause: Pause
    policy: SnapshotPolicy
    snapshot_files: dict[int, str] = field(default_factory=dict)
    """Per shard, a snapshot file to boot from (else the newest stored one)."""
    shards: int = 1
    write_timeout: float = DEFAULT_WRITE_TIMEOUT_S
    """`--write-timeout`: a write is answered (committed or refused) within it."""
    commit_linger: float = DEFAULT_COMMIT_LINGER_S
    """`--commit-linger-ms` in seconds (`WritePath._linger`)."""
    former: tuple[int, ...] = ()
    """Regions removed from the topology: no longer waited for, their ops still origins."""
    superseded: Callable[[int], str | None] = lambda _shard: None
    """Whether another node announced itself as this shard's writer since this one started
    (`streams.node.kafka.presence`): what such a node is, else None. Asked (blocking) before a
    writer is renewed."""


class Shard:
    def __init__(self, index: int, setup: ShardSetup) -> None:
        self.index = index
        self.setup = setup
        self.name = setup.region_name if setup.shards == 1 else f"{setup.region_name}/{index}"
        self.replica = Replica(setup.region_id, setup.mode, setup.waiters)
        self.replica.regions = setup.regions
        self.regions: tuple[int, ...] = setup.regions
        """The topology's current regions (tombstone collection waits for each of them)."""
        self.former: tuple[int, ...] = setup.former
        """Regions removed from the topology (no longer waited for)."""
        self.writer = setup.log.writer(index)
        self.writepath = WritePath(
            self.writer,
            self._committed,
            self._failed,
            lambda: Journal(self.replica.region),
            setup.write_timeout,
            setup.commit_linger,
        )
        self.loader = Loader(
            self.name,
            self.replica,
            lambda spec: setup.log.reader(index, spec),
            setup.log.snapshots(index),
            setup.snapshot_files.get(index),
            read_own=lambda: self.writer.fenced,
            on_refused=self._refused_snapshot,
        )
        self.snapshotter = Snapshotter(
            self.name,
            setup.region_name,
            self.replica,
            self.writer,
            self.writepath,
            self.loader,
            setup.log.snapshots(index),
            setup.clock.now_ms,
            setup.pause,
            setup.policy,
        )
        self.write_fault: str | None = None
        self.fenced_by: str | None = None
        """Another node announced itself as this shard's writer (`streams.node.kafka.presence`)."""
        self.writer_name = (
            setup.region_name if setup.shards == 1 else f"{setup.region_name} shard {index}"
        )
        self._view: CommittedView | None = None
        self._view_of: tuple[int, ...] = ()
        """What `_view` was made of (replica, batches, their op counts): a new one after any
        change."""
        self.tombstones_collected = 0
        self._next_gc = time.monotonic() + TOMBSTONE_GC_S
        self._tasks = Tasks()

    # --- life cycle -----------------------------------------------------------------------------

    async def start(self, catch_up_timeout: float = DEFAULT_CATCH_UP_TIMEOUT_S) -> None:
        """Register the writer (fencing any older one of this shard), load, then commit."""
        began = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, self.writer.start)
        log.info("%s: writer registered in %.2f s", self.name, time.monotonic() - began)
        await self.loader.boot(catch_up_timeout)
        self.snapshotter.restart_schedule()
        self.writepath.start()

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.writepath.stop(), STOP_TIMEOUT_S)
        except (TimeoutError, WriterError):
            pass
        self._tasks.cancel_all()
        await self.snapshotter.at_stop()
        await self.loader.stop()
        await asyncio.get_running_loop().run_in_executor(None, self.writer.close)

    # --- health ---------------------------------------------------------------------------------

    @property
    def loading(self) -> str | None:
        return self.loader.loading

    def read_refusal(self) -> Refusal | None:
        return LOADING if self.loader.loading is not None else None

    def write_refusal(self) -> Refusal | None:
        if self.writer.fenced:
            return refusals.fenced(self.write_fault)
        if self.loader.loading is not None:
            return LOADING
        if self.write_fault is not None:
            return refusals.writes_refused(self.write_fault)
        if self.loader.fatal is not None:
            return refusals.reader_stopped(self.loader.fatal)
        return None

    def local_refusal(self) -> Refusal | None:
        """Whether a command with only local ops (XREADGROUP, XACK, XCLAIM...) is refused: while
        the write path is down or the writer fenced, its batch could only fail."""
        if self.writer.fenced or self.writepath.down is not None:
            return self.write_refusal()
        return None

    # --- writing --------------------------------------------------------------------------------

    def prepare(self, bodies: list[ops.Body], now_ms: int) -> Issued:
        """Number and encode one command's ops (raises EncodeError); `issue` applies them."""
        return self.replica.prepare(bodies, now_ms)

    def issue(self, issued: Issued) -> None:
        """Apply prepared ops now and put them in the open batch (the caller checked
        `write_refusal` when they include replicated ops and holds the reply)."""
        self.replica.apply(issued, self.writepath.journal())
        self.writepath.add(issued)

    def pending(self) -> Outcome | None:
        return self.writepath.pending()

    def committed_view(self) -> CommittedView | None:
        """The keyspace as the log holds it, when a batch has been in flight for SLOW_COMMIT_S
        (the broker stalls): the pending batches' ops undone on copies
        (`streams.node.runtime.undo`). None otherwise: the live state is then read, and a read that
        saw a pending op waits
        for it, which is short."""
        since = self.writepath.in_flight_since
        if since is None or time.monotonic() - since < SLOW_COMMIT_S:
            return None
        batches = self.writepath.pending_batches()
        journals = [b.journal for b in batches if b.journal is not None]
        made_of = (
            id(self.replica),
            *(id(j) for j in journals),
            *(len(j.records) for j in journals),
        )
        if self._view is None or made_of != self._view_of:
            self._view = CommittedView(self.replica.region.state, journals)
            self._view_of = made_of
        for batch in batches:
            batch.viewed = True
        return self._view

    def flush_ack_effects(self) -> int:
        """Issue the consecutive-XACK effects held back for coalescing into the open batch."""
        if self.write_refusal() is not None:
            return 0
        issued = self.replica.ack_effects(self.setup.clock.now_ms(), self.writepath.journal)
        if issued.replicated:
            self.writepath.add(issued)
        return len(issued.replicated)

    def _committed(self, batch: WriteBatch) -> None:
        self.replica.committed(batch.replicated)
        if batch.viewed and batch.journal is not None:  # readers were shown the state without it
            self.replica.waiters.wake(batch.journal.keys())
        self._view = None

    def taken_over(self, text: str) -> None:
        """Another node announced itself as this shard's writer: its registration fenced this
        one's, so stop writing now rather than at the next failed append, say `text` on every
        write and in CRDT.INFO, and reload to follow the new writer's log."""
        if self.fenced_by is not None:
            return
        self.fenced_by = self.write_fault = text
        self.writer.fenced = True
        log.error("%s: %s", self.name, text)
        self._reload_soon(text)

    def _failed(self, exc: WriterError, batches: list[WriteBatch]) -> None:
        """Batches did not commit: the state holds ops the log may not. Undo them (reads go on
        from the state the log holds), refuse writes, and re-read the log in the background
        (the log decides whether the failed batch landed)."""
        self._view = None
        self.replica.undo([b.journal for b in batches if b.journal is not None])
        self.write_fault = self.fenced_by or self.writepath.down or str(exc)
        if self.loader.reloading is None:
            log.error("%s: a write batch failed (%s): re-reading the log", self.name, exc)
        self._reload_soon(str(exc))

    def _reload_soon(self, why: str) -> None:
        if self.loader.reloading is None and self.loader.loading is None:
            self.loader.reloading = why
            self._tasks.spawn(self._reload(why))

    def _refused_snapshot(self, why: str) -> None:
        """The snapshot this shard booted from failed its deferred digest check: re-read the
        state (the loader refuses that snapshot) unless a re-read is under way already."""
        if self.loader.reloading is None:
            self.loader.reloading = why
            self._tasks.spawn(self._reread(why))

    async def _reread(self, why: str) -> None:
        await self.loader.reload(why, self._switch)
        self.snapshotter.restart_schedule()

    async def _reload(self, why: str) -> None:
        """Recover the writer first, then re-read the log. In that order because the recovery
        ends the failed transaction (the renewal's init_transactions rolls it back) and makes
        the end of the own logs readable (`streams.node.kafka.settle`): re-read before it, the log
        could still hide records that appear later (a transaction the renewal then ends: on
        Tansu aborted records are delivered too), or never show its end at all, and the re-read
        would wait for ever while writes stay refused (issue 22's object store outage)."""
        recovered = await self._recover_writer()
        await self.loader.reload(why, self._switch)
        self.snapshotter.restart_schedule()
        if recovered and not self.writer.fenced:
            self.write_fault = None
            self.writepath.up()
            log.warning("%s: taking writes again", self.name)

    async def _recover_writer(self) -> bool:
        """Retry `Writer.recover` until it succeeds (True) or the writer is fenced (False)."""
        while not self.writer.fenced:
            try:
                await self.writer.recover(lambda: self.setup.superseded(self.index))
            except WriterFenced as exc:
                self.taken_over(str(exc))
                return False
            except Exception as exc:  # the broker or the writers' topic unreachable: retry
                log.warning("%s: the writer cannot be recovered yet (%s)", self.name, exc)
                await asyncio.sleep(1.0)
                continue
            return True
        return False

    def set_regions(self, regions: tuple[int, ...], former: tuple[int, ...]) -> None:
        """The topology's regions changed (a region was removed): causal stability and the
        commands that decide about every region's PELs stop waiting for the former ones."""
        self.regions = regions
        self.former = former
        self.replica.regions = regions

    def _switch(self, fresh: Replica) -> None:
        """The log was re-read into `fresh`: serve it from now on."""
        self.replica = fresh
        self.snapshotter.replica = fresh

    # --- background work -----------------------------------------------------------------------

    def housekeep(self) -> None:
        """Called every ack-flush interval: coalesced XACK effects, tombstones, snapshots."""
        self.flush_ack_effects()
        if time.monotonic() >= self._next_gc and self.loader.loading is None:
            self._next_gc = time.monotonic() + TOMBSTONE_GC_S
            self.tombstones_collected += self.replica.region.collect_tombstones(
                list(self.regions), self.former
            )
        if self.snapshotter.due():
            self._tasks.spawn(self.snapshotter.take())
