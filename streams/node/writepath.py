"""Group commit: the ops of every command dispatched while a transaction is in flight form the next
batch, appended to the op log in one Kafka transaction.

The anchor is Redis with `appendfsync always`: it applies a whole event-loop iteration's commands
in memory, writes and fsyncs the AOF once, and only then sends the replies. Here, a command is
dispatched and its ops are applied to the in-memory state at once (so the next command, from any
connection, sees them: XADD IDs, BUSYGROUP, XSETID checks), its ops join the *open* batch, and
its reply is held (`streams.resp.server.Held`) until that batch committed. One batch is in flight
at a time: while it commits, the open one fills; when it is done, the open one is sent. A reply
of a command without ops (a read) is held until the newest batch with ops committed, since the
state it read may include them: no reply ever shows an op that is not in the log.

Why apply at dispatch rather than after the commit: everything a command reads must include the
commands before it, and waiting for each commit before the next dispatch is what limited a
region to one transaction per command. Making only conflicting writers wait would not help the
common case (many clients appending to one stream). The price is the failure path: when a batch
fails, the state holds ops the log may not, and later commands built on them. Every held reply of
the failed batch and of the open one is failed, and the node reloads its state from the log
before it serves again (`streams.node.loader`), as Redis exits and reloads its AOF when an fsync
fails under `appendfsync always`. Whether the failed transaction landed is only known by reading
the log; the reload settles it. (It can land even after an abort: the embedded Tansu broker
hands aborted transactional records to read_committed readers, so on it a failed batch whose
records were produced is applied everywhere; the error therefore says "may or may not have been
applied", as for a write whose connection dropped.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from streams.crdt import ops
from streams.errors import CommandError
from streams.node.oplog import Writer
from streams.node.replica import Issued
from streams.node.writer import WriterError
from streams.ops.codec import Sealed

log = logging.getLogger(__name__)

Outcome = asyncio.Future[CommandError | None]
"""Resolves to None once the batch committed, or to the error every held reply gets instead."""


@dataclass
class WriteBatch:
    replicated: list[ops.Op] = field(default_factory=list)
    local: list[ops.LocalOp] = field(default_factory=list)
    records: list[Sealed] = field(default_factory=list)
    """`replicated` as the writer appends them (encoded when issued)."""
    local_records: list[Sealed] = field(default_factory=list)
    outcome: Outcome = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def __len__(self) -> int:
        return len(self.replicated) + len(self.local)


class WritePath:
    """The open batch, the batch in flight, and the task that commits them in order."""

    def __init__(
        self,
        writer: Writer,
        on_committed: Callable[[WriteBatch], None],
        on_failed: Callable[[WriterError], None],
    ) -> None:
        self.writer = writer
        self._on_committed = on_committed
        self._on_failed = on_failed
        self._open: WriteBatch | None = None
        self._in_flight: WriteBatch | None = None
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        self.ops = 0
        self.observe: Callable[[float, int], None] | None = None
        """Told each committed batch's commit time (seconds) and op count (`streams.node.metrics`
        sets it when the node exports metrics): once per transaction, never per op."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._commit_loop())

    async def stop(self) -> None:
        """Commit what is pending, then stop the committing task."""
        await self.settled()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def add(self, issued: Issued) -> Outcome:
        """Put one command's ops (already applied to the state) into the open batch; the
        returned outcome resolves when that batch is committed (or failed)."""
        batch = self._open
        if batch is None:
            batch = self._open = WriteBatch()
        batch.replicated.extend(issued.replicated)
        batch.local.extend(issued.local)
        batch.records.extend(issued.records)
        batch.local_records.extend(issued.local_records)
        self._ready.set()
        return batch.outcome

    def pending(self) -> Outcome | None:
        """The outcome a reply must wait for: the newest batch with ops not yet committed."""
        if self._open is not None:
            return self._open.outcome
        if self._in_flight is not None:
            return self._in_flight.outcome
        return None

    async def settled(self) -> CommandError | None:
        """Wait until everything added so far is committed; the failure, if any."""
        outcome = self.pending()
        if outcome is None:
            return None
        return await asyncio.shield(outcome)

    async def _commit_loop(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            batch, self._open = self._open, None
            if batch is None or not batch:
                continue
            self._in_flight = batch
            started = time.perf_counter()
            try:
                await self.writer.append(batch.records, batch.local_records)
            except WriterError as exc:
                self._fail(batch, exc)
                continue
            except Exception as exc:  # a bug in encoding, say: fail the batch, never hang it
                log.exception("appending a batch of %d ops failed", len(batch))
                self._fail(batch, WriterError(f"internal error while appending: {exc}"))
                continue
            self._in_flight = None
            self.batches += 1
            self.ops += len(batch)
            batch.outcome.set_result(None)
            self._on_committed(batch)
            if self.observe is not None:
                self.observe(time.perf_counter() - started, len(batch))

    def _fail(self, batch: WriteBatch, exc: WriterError) -> None:
        """The batch in flight failed: it and the open batch (built on its state) fail."""
        error = CommandError(
            f"ERR the op log did not confirm the write ({exc}); it may or may not have been "
            "applied: the node reloads its state from the log before it serves again"
        )
        self._in_flight = None
        doomed = [batch] + ([self._open] if self._open is not None else [])
        self._open = None
        for each in doomed:
            if not each.outcome.done():
                each.outcome.set_result(error)
        self._on_failed(exc)
