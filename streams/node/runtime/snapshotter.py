"""When and how a shard writes a snapshot of its state (`streams.node.kafka.snapshots` stores it).

Like Redis's BGSAVE: commands pause (`Pause`) while the batch in flight commits and nothing read
waits to be applied, the exact log positions the state covers are noted, and the process forks;
the child writes the snapshot from its copy-on-write image while the parent serves on, then the
parent publishes the file. A snapshot is due every `every_ops` new ops or `every_s` seconds with
new ops (0 turns either off), on CRDT.SNAPSHOT, and at a clean stop after enough new ops
(`at_stop`). New ops are this shard's committed writes and the ops its fold applied from the
logs (the other regions'): a region that only receives must snapshot too, or its restart reads
every log from the start (measured: after 1,000,000 XADDs into r1 of three regions on Apache
Kafka, r2 and r3 read 1,000,064 ops at restart and served after 58 s, while r1 read its 92,000
ops of tail).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from streams.crdt.region import Region
from streams.kafka import clusters
from streams.node.runtime.loader import Loader
from streams.node.runtime.oplog import SnapshotStore, Writer
from streams.node.runtime.replica import Replica
from streams.node.runtime.writepath import WritePath
from streams.snapshot import Positions, write_snapshot

log = logging.getLogger(__name__)

DEFAULT_SNAPSHOT_EVERY_OPS = 100_000
DEFAULT_SNAPSHOT_EVERY_S = 600.0
STOP_SNAPSHOT_MIN_OPS = 10_000
"""A clean stop snapshots when at least this many ops (or `every_ops`, if fewer) came since the
last snapshot, as Redis saves its RDB on shutdown: the restart then reads no tail. Below it,
reading the tail at the next start costs less than writing a snapshot at every stop."""
STOP_SNAPSHOT_TIMEOUT_S = 8.0
"""How long a stop waits for its snapshot (a process manager's kill comes after ~10 s)."""
QUIET_ATTEMPTS = 20
QUIET_RETRY_S = 0.05


class Pause:
    """Holds every command of the node while a snapshot forks (a few milliseconds)."""

    def __init__(self) -> None:
        self._quiet: asyncio.Event | None = None

    async def wait(self) -> None:
        if self._quiet is not None:
            await self._quiet.wait()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        quiet = self._quiet = asyncio.Event()
        try:
            yield
        finally:
            self._quiet = None
            quiet.set()


@dataclass
class SnapshotPolicy:
    every_ops: int = DEFAULT_SNAPSHOT_EVERY_OPS
    every_s: float = DEFAULT_SNAPSHOT_EVERY_S


class Snapshotter:
    def __init__(
        self,
        name: str,
        region_name: str,
        replica: Replica,
        writer: Writer,
        writepath: WritePath,
        loader: Loader,
        store: SnapshotStore,
        now_ms: Callable[[], int],
        pause: Pause,
        policy: SnapshotPolicy,
    ) -> None:
        self.name = name
        self.region_name = region_name
        self.replica = replica
        self.writer = writer
        self.writepath = writepath
        self.loader = loader
        self.store = store
        self.now_ms = now_ms
        self.pause = pause
        self.policy = policy
        self.taken = 0
        self.last = ""
        self.last_pause_ms = 0.0
        self._running = False
        self._since = (0, 0, time.monotonic())
        """(committed ops, folded ops, when) at the last snapshot or (re)load."""

    def _counts(self) -> tuple[int, int]:
        """This shard's committed ops, and the ops its replica's fold applied from the logs."""
        return self.writepath.ops, self.replica.fold.applied_count

    def restart_schedule(self) -> None:
        """The state was (re)loaded: count ops and time from now."""
        self._since = (*self._counts(), time.monotonic())

    def new_ops(self) -> int:
        """Ops the state holds beyond the last snapshot (or load), whoever wrote them. A fold
        replaced by a reload counts from 0 again: the reload restarts the schedule too."""
        committed_then, folded_then, _when = self._since
        committed, folded = self._counts()
        return max(0, committed - committed_then) + max(0, folded - folded_then)

    def due(self) -> bool:
        if self._running or self._unsettled() or self.writer.fenced:
            return False
        when = self._since[2]
        new_ops = self.new_ops()
        policy = self.policy
        by_ops = policy.every_ops > 0 and new_ops >= policy.every_ops
        by_time = policy.every_s > 0 and new_ops > 0 and time.monotonic() - when >= policy.every_s
        return by_ops or by_time

    async def at_stop(self) -> None:
        """The node stops cleanly (no more commands; the batches committed): snapshot when enough
        ops came since the last one (`STOP_SNAPSHOT_MIN_OPS`) and snapshots are on. A failure or
        a timeout only costs the next start its tail."""
        policy = self.policy
        if policy.every_ops <= 0 and policy.every_s <= 0:
            return
        least = min(STOP_SNAPSHOT_MIN_OPS, policy.every_ops or STOP_SNAPSHOT_MIN_OPS)
        if self.writer.fenced or self.new_ops() < least:
            return
        try:
            async with asyncio.timeout(STOP_SNAPSHOT_TIMEOUT_S):
                await self.loader.checked.wait()  # a stop soon after the start: let it finish
                await self.take()
        except TimeoutError:
            log.warning(
                "%s: no snapshot at stop within %g s: the next start reads the tail",
                self.name,
                STOP_SNAPSHOT_TIMEOUT_S,
            )

    def _unsettled(self) -> bool:
        """The shard loads, re-reads its log after a failed batch, refuses writes, or its
        snapshot's digest is still being checked: what it holds now is not what a snapshot
        should keep (a wrong state would be stored under a digest of its own)."""
        loader = self.loader
        return (
            loader.loading is not None
            or loader.reloading is not None
            or not loader.checked.is_set()
            or self.writepath.down is not None
        )

    def positions(self) -> Positions:
        """The next offset per topic that the state covers: what the replica applied from the
        other regions' logs, and for the own logs what the committed transactions wrote."""
        positions = self.replica.positions()
        reader = self.loader.reader
        own = dict(reader.own_positions) if reader is not None else {}
        for topic, offset in self.writer.next_offsets.items():
            own[topic] = max(own.get(topic, 0), offset)
        for topic, offset in own.items():
            part = (topic, self.writer.partition)
            positions[part] = max(positions.get(part, 0), offset)
        return positions

    async def take(self) -> str | None:
        """Write a snapshot to the store; its id, or None when none could be taken now."""
        if self._running:
            return None
        self._running = True
        try:
            forked = await self._fork()
            if forked is None:
                return None
            return await self._publish(*forked)
        except Exception:
            log.exception("%s: taking a snapshot failed", self.name)
            return None
        finally:
            self._running = False

    async def _fork(self) -> tuple[int, str, str] | None:
        """Pause commands until nothing is uncommitted or waiting, then fork the writer child."""
        for _attempt in range(QUIET_ATTEMPTS):
            if self._unsettled():
                return None
            paused = time.perf_counter()
            with self.pause.holding():
                try:
                    if await self.writepath.settled() is not None:
                        return None  # the batch failed: the shard reloads
                    if (
                        self.writepath.pending() is None
                        and self.replica.settled()
                        and not self._unsettled()
                    ):
                        region = self.replica.region
                        snapshot_id = f"{self.now_ms()}-{region.vector.get(region.id, 0)}"
                        meta = {
                            "writer": f"node {self.name}",
                            "snapshot_id": snapshot_id,
                            "shard": str(self.writer.partition),
                        }
                        cluster = self.store.cluster_id
                        if cluster:  # the cluster its positions are offsets of
                            meta[clusters.SNAPSHOT_META] = cluster
                        pid, path = fork_write(region, self.positions(), self.region_name, meta)
                        self._since = (*self._counts(), time.monotonic())
                        return pid, path, snapshot_id
                finally:
                    self.last_pause_ms = (time.perf_counter() - paused) * 1000
            await asyncio.sleep(QUIET_RETRY_S)
        log.warning("%s: no quiet moment for a snapshot; trying later", self.name)
        return None

    async def _publish(self, pid: int, path: str, snapshot_id: str) -> str | None:
        loop = asyncio.get_running_loop()
        try:
            if not await loop.run_in_executor(None, wait_child, pid):
                log.error("%s: the snapshot child failed; no snapshot stored", self.name)
                return None
            with open(path, "rb") as fp:
                data = fp.read()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        await loop.run_in_executor(None, self.store.publish, snapshot_id, data)
        self.taken += 1
        self.last = snapshot_id
        log.info(
            "%s: snapshot %s stored (%d bytes; commands paused %.1f ms)",
            self.name,
            snapshot_id,
            len(data),
            self.last_pause_ms,
        )
        return snapshot_id


def fork_write(
    region: Region, positions: Positions, region_name: str, meta: dict[str, str]
) -> tuple[int, str]:
    """Fork a child that writes the snapshot file; returns (child pid, file path). The caller must
    reap the child (`wait_child`)."""
    fd, path = tempfile.mkstemp(prefix=f"streams-{region_name}-", suffix=".snapshot")
    os.close(fd)
    pid = os.fork()
    if pid == 0:  # the child: pure Python on its copy of the state, then leave without cleanup
        status = 1
        try:
            with open(path, "wb") as out:
                write_snapshot(region, positions, out, region_name=region_name, meta=meta)
            status = 0
        finally:
            os._exit(status)
    return pid, path


def wait_child(pid: int) -> bool:
    """Block until the child exits; True if it wrote its file."""
    _pid, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
