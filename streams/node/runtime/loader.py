"""A shard's loading: boot from a snapshot and the logs' tails, and reload after a failed write.

Boot reads the snapshot file given (`--snapshot`), else the newest complete snapshot in the
shard's snapshot store, else nothing (a full replay), and then folds every op log from the
snapshot's positions to its end (the reader reports "caught up"; `streams.kafka.reading` says how
that is decided); only then does the shard serve. A snapshot from the store serves before its
state's digest is compared with the one it recorded: a child forked before the tails are applied
checks it, and a mismatch refuses that snapshot and re-reads
(`streams.node.runtime.digest_check`). A catch-up that does not finish within its timeout fails
with the reader's account of every topic's position and end.

A reload (after a write batch failed, `streams.node.runtime.writepath`, or a takeover) does the same
into a fresh replica with a new reader, in the background: the shard goes on serving reads from
the replica it has (the failed batches' ops undone, `streams.node.runtime.undo`), and switches over
to the fresh one once it has read the logs to their end (`switch`). It is retried until it succeeds,
since only the log can tell whether the failed batch landed; while the broker is away it simply
waits for it. Each reader feeds the replica it was made for: the old reader goes on feeding the
replica that serves until the switch, and is stopped then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from streams.kafka import clusters
from streams.node.runtime.digest_check import DigestCheck, PendingCheck, fork_check
from streams.node.runtime.oplog import Batch, Reader, ReaderSpec, Snapshot, SnapshotStore
from streams.node.runtime.replica import Replica
from streams.snapshot import DIGEST_MISMATCH, read_snapshot

log = logging.getLogger(__name__)

DEFAULT_CATCH_UP_TIMEOUT_S = 300.0
RECOVERY_RETRY_S = 1.0
CATCH_UP_POLL_S = 0.01


class CatchUpTimeout(TimeoutError):
    """The node could not read its op logs to their end in time; the text says how far it got."""


ReaderFactory = Callable[[ReaderSpec], Reader]


class Loader:
    def __init__(
        self,
        name: str,
        replica: Replica,
        new_reader: ReaderFactory,
        snapshots: SnapshotStore,
        snapshot_file: str | None = None,
        read_own: Callable[[], bool] = lambda: False,
        on_refused: Callable[[str], None] = lambda why: None,
    ) -> None:
        """`read_own`: whether the reader must keep reading the region's own logs (this node was
        fenced: another writer appends to them). `on_refused(why)`: the snapshot the shard booted
        from failed its deferred digest check: the shard must re-read (`reload`)."""
        self.name = name
        self.replica = replica
        self._new_reader = new_reader
        self.snapshots = snapshots
        self.snapshot_file = snapshot_file
        self._read_own = read_own
        self.loading: str | None = "starting"
        """Why the shard does not serve (yet); None once it does."""
        self.fatal: str | None = None
        """Why reading stopped for good (a record that does not decode, ...)."""
        self.reloading: str | None = None
        """Why a fresh replica is being read in the background (the shard serves meanwhile)."""
        self.booted_from = "full replay of the logs"
        self.boot_records = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reader: Reader | None = None
        """The current reader (made by each catch-up)."""
        self.digest_check = "none"
        """The state's digest against its snapshot's: "none" (no snapshot), "checked" (before
        serving), "pending" (a child checks it, `digest_check`), "matched", "mismatch: re-read",
        "not checked" (the checking child failed). CRDT.INFO `snapshot_digest_check`."""
        self._on_refused = on_refused
        self._refused: set[str] = set()
        """Snapshots whose state did not match their digest: never booted from again."""
        self._forked: tuple[str, int] | None = None
        """(snapshot id, pid) of the checking child forked by `_read_snapshot`, until watched."""
        self._pending: PendingCheck | None = None
        self.checked = asyncio.Event()
        """Set once no digest check is pending (a snapshot may then be taken of the state)."""
        self.checked.set()

    # --- boot and reload ------------------------------------------------------------------------

    async def boot(self, timeout: float = DEFAULT_CATCH_UP_TIMEOUT_S) -> None:
        """Read the snapshot and the logs to their end; raises `CatchUpTimeout` (with how far
        each topic got) or RuntimeError (reading stopped)."""
        self._loop = asyncio.get_running_loop()
        self.checked.clear()
        try:
            booted = await self._loop.run_in_executor(None, self._read_snapshot, False)
            self.reader = self._make_reader(self.replica, booted)
            await self._catch_up(self.reader, self.replica, timeout)
        except BaseException:
            self._watch_check()  # reaped: the node does not start
            await self.stop()
            raise
        self.loading = None
        self._watch_check()

    async def reload(self, why: str, switch: Callable[[Replica], None]) -> None:
        """Read the state from the log into a fresh replica (after a failed batch, a takeover)
        while the current one serves, retrying until it succeeds; then `switch(fresh)` (the
        caller puts it in place) and stop the old reader."""
        self.reloading = why
        loop = asyncio.get_running_loop()
        if self._pending is not None:  # moot: the re-read checks its snapshot before it serves
            await loop.run_in_executor(None, self._pending.cancel)
        old = self.replica
        while True:
            fresh = Replica(old.region_id, old.mode, old.waiters)
            fresh.regions = old.regions
            reader: Reader | None = None
            self.fatal = None
            self.booted_from = "full replay of the logs"
            try:
                booted = await loop.run_in_executor(None, self._read_snapshot)
                reader = self._make_reader(fresh, booted)
                await self._catch_up(reader, fresh, DEFAULT_CATCH_UP_TIMEOUT_S)
            except asyncio.CancelledError:  # the node stops: the fresh reader must too
                if reader is not None:
                    reader.stop()
                raise
            except Exception as exc:  # whatever it was, only the log can settle it: retry
                log.warning("%s: reloading failed (%s); retrying", self.name, exc)
                if reader is not None:
                    await loop.run_in_executor(None, reader.stop)
                await asyncio.sleep(RECOVERY_RETRY_S)
                continue
            break
        self.booted_from += f" (re-read after: {why})"
        previous, self.reader, self.replica = self.reader, reader, fresh
        switch(fresh)
        self.reloading = None
        fresh.waiters.wake_all()
        if previous is not None:
            await loop.run_in_executor(None, previous.stop)
        log.warning("%s: state re-read from the log and switched over", self.name)

    async def stop(self) -> None:
        if self._pending is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._pending.cancel)
            self._pending = None
        if self.reader is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.reader.stop)

    # --- internals ------------------------------------------------------------------------------

    def _make_reader(self, replica: Replica, booted: Snapshot | None) -> Reader:
        """A reader feeding `replica`, which starts over from `booted` (a snapshot) or empty."""
        covered: dict[int, int] | None = None
        if booted is None:
            replica.reset()
            start = None
        else:
            region, positions = booted.region, booted.positions
            if not positions:  # a seed, or translated by seq: every log from its first record
                covered = region.vector
            replica.reset(region, positions)
            start = {topic: offset for (topic, _p), offset in positions.items()}
        loop = asyncio.get_running_loop()
        self._loop = loop

        def on_batch(batch: Batch) -> None:
            loop.call_soon_threadsafe(replica.feed, batch)

        return self._new_reader(
            ReaderSpec(on_batch, self._on_error, start, self._read_own(), covered)
        )

    def _on_error(self, exc: Exception) -> None:
        """In the reader's thread: reading stopped for good."""
        self.fatal = str(exc)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(log.error, "%s: reading stopped: %s", self.name, exc)

    def _read_snapshot(self, check_digest: bool = True) -> Snapshot | None:
        """The state and positions to boot from: the snapshot file given, else the newest
        complete snapshot in the store (older ones if it does not read back), else None. With
        `check_digest` False a snapshot from the store is served before its digest is checked:
        a child forked here, before anything else holds the state, checks it (`_watch_check`)."""
        self.digest_check = "none"
        if self.snapshot_file is None:
            found = self.snapshots.load_newest(skip=self._refused, check_digest=check_digest)
            if found is not None:
                self.booted_from = f"snapshot {found.id} from {self.snapshots.where}"
                self.digest_check = "checked"
                if found.unchecked_digest is not None:
                    self._forked = (found.id, fork_check(found.region, found.unchecked_digest))
                    self.digest_check = "pending"
            return found
        self.digest_check = "checked"
        with open(self.snapshot_file, "rb") as fp:
            region, positions, meta = read_snapshot(fp)
        if region.id != self.replica.region_id:
            raise ValueError(
                f"{self.snapshot_file} is a snapshot of region id {region.id}, not of "
                f"{self.name} (id {self.replica.region_id})"
            )
        self.booted_from = f"snapshot file {self.snapshot_file}"
        # Its offsets are the cluster's it was read from: on another cluster they name other
        # records, so it is translated by seq (its state; every log from its beginning).
        here, taken_on = self.snapshots.cluster_id, clusters.snapshot_cluster(meta)
        positions, origin = clusters.translate(positions, taken_on, here)
        what = f"{self.name}: snapshot file {self.snapshot_file}"
        if origin is clusters.Origin.OTHER:
            log.warning("%s", clusters.translated_note(what, taken_on, here))
            self.booted_from += f" (taken on cluster {taken_on}: every log read from its start)"
        elif origin is clusters.Origin.UNKNOWN and here and positions:
            log.warning("%s", clusters.unknown_warning(what, here))
        return Snapshot(self.snapshot_file, region, positions)

    def _watch_check(self) -> None:
        """Wait (on a thread) for the child checking the booted snapshot's digest, if any."""
        forked, self._forked = self._forked, None
        if forked is None:
            self.checked.set()
            return
        loop = asyncio.get_running_loop()
        snapshot_id, pid = forked

        def done(outcome: DigestCheck) -> None:  # on the waiting thread
            loop.call_soon_threadsafe(self._checked, snapshot_id, outcome)

        self._pending = PendingCheck(pid, done)

    def _checked(self, snapshot_id: str, outcome: DigestCheck) -> None:
        self._pending = None
        self.checked.set()
        if outcome is DigestCheck.MATCH:
            self.digest_check = "matched"
            log.info("%s: snapshot %s matches its recorded digest", self.name, snapshot_id)
        elif outcome is DigestCheck.MISMATCH:
            self.digest_check = "mismatch: re-read"
            self._refused.add(snapshot_id)
            why = f"snapshot {snapshot_id}: {DIGEST_MISMATCH}"
            log.error(
                "%s: %s; it is refused and the state re-read (an older snapshot, else every log "
                "from its start); the shard served its state until now",
                self.name,
                why,
            )
            self._on_refused(why)
        elif outcome is DigestCheck.FAILED:
            self.digest_check = "not checked"
            log.warning(
                "%s: the digest of snapshot %s could not be checked (the checking process "
                "failed); the next start checks it again",
                self.name,
                snapshot_id,
            )

    async def _catch_up(self, reader: Reader, replica: Replica, timeout: float) -> None:
        """Fold every log from the start (or from a snapshot's positions) to its end into
        `replica`. The reader reads `.local` first, so the fold knows each local op before the
        replicated ops after it and applies it on exactly the state it was made on."""
        reader.start()
        deadline = time.monotonic() + timeout
        while not reader.caught_up.is_set():
            if self.fatal:
                raise RuntimeError(self.fatal)
            if time.monotonic() > deadline:
                raise CatchUpTimeout(
                    f"{self.name}: did not catch up with the op logs within "
                    f"{timeout:g} s (--catch-up-timeout): "
                    f"{reader.records_read} records read, {reader.progress()}"
                )
            await asyncio.sleep(CATCH_UP_POLL_S)
        await asyncio.sleep(0)  # batches handed over before "caught up" was set are applied now
        replica.go_live()
        self.boot_records = reader.records_read
