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
fails, the state holds ops the log may not, and later commands built on them. Every held write
reply of the failed batch and of the open one is failed, and the ops of both are undone in
memory (each batch keeps a `streams.node.runtime.undo.Journal`), so the state is again one the log
holds and reads go on being answered from it; a read held on a failed batch is run again on
that state (`streams.node.pipeline.dispatch`), never answered with the write's error. Whether the
failed transaction landed is only known by reading the log: the shard re-reads it in the background
once the broker answers (`streams.node.runtime.loader`) and switches over to the state read,
refusing writes until then. (It can land even after an abort: the embedded Tansu broker hands
aborted transactional records to read_committed readers, so on it a failed batch whose records were
produced is applied everywhere; the error therefore says "may or may not have been applied",
as for a write whose connection dropped.)

A write is answered within `write_timeout` (`--write-timeout`) of its arrival: a batch must
commit by the deadline of its oldest write, which is the commit's timeout. Once one failed, the
write path is `down`: every batch is failed at once, without asking the broker, until the shard
re-read its log and renewed its writer (`up`), so no later client waits out the timeout again.

A writer shared by several shards (`Writer.gathers`: one transaction per node process) takes the
open batch when its next transaction begins, not when the shard hands it in: the batch stays
open, taking ops, while it waits for the transaction of the process's other shards in flight,
until the writer seals it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from streams.crdt import ops
from streams.errors import CommandError
from streams.node.runtime import refusals
from streams.node.runtime.backend import Outcome
from streams.node.runtime.oplog import Writer, WriterError
from streams.node.runtime.replica import Issued
from streams.node.runtime.undo import Journal
from streams.ops.codec import Sealed

log = logging.getLogger(__name__)

DEFAULT_WRITE_TIMEOUT_S = 10.0
"""`--write-timeout`: how long a write may wait for the op log before it is refused."""

DEFAULT_COMMIT_LINGER_S = 0.002
"""`--commit-linger-ms`: how long a batch may wait for the writers the last commit answered."""


@dataclass
class WriteBatch:
    replicated: list[ops.Op] = field(default_factory=list)
    local: list[ops.LocalOp] = field(default_factory=list)
    records: list[Sealed] = field(default_factory=list)
    """`replicated` as the writer appends them (encoded when issued)."""
    local_records: list[Sealed] = field(default_factory=list)
    outcome: Outcome = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    journal: Journal | None = None
    """How to undo the batch's ops in memory (`streams.node.runtime.undo`)."""
    deadline: float = 0.0
    """time.monotonic() by which the batch must have committed: its first write's arrival plus
    the write timeout."""
    viewed: bool = False
    """Reads were answered without its ops while it was pending (`Shard.committed_view`): its
    keys' blocked readers must look again once it committed."""

    def __len__(self) -> int:
        return len(self.replicated) + len(self.local)


class WritePath:
    """The open batch, the batch in flight, and the task that commits them in order."""

    def __init__(
        self,
        writer: Writer,
        on_committed: Callable[[WriteBatch], None],
        on_failed: Callable[[WriterError, list[WriteBatch]], None],
        new_journal: Callable[[], Journal],
        write_timeout: float = DEFAULT_WRITE_TIMEOUT_S,
        linger: float = DEFAULT_COMMIT_LINGER_S,
    ) -> None:
        """`on_failed(error, batches)`: the batches (oldest first) failed; their ops must be
        undone before anything else runs. `new_journal`: an empty journal for a new batch.
        `linger`: see `_linger`."""
        self.writer = writer
        self._on_committed = on_committed
        self._on_failed = on_failed
        self._new_journal = new_journal
        self.write_timeout = write_timeout
        self.down: str | None = None
        """Why batches fail at once (a batch failed; the shard has not recovered yet)."""
        self.in_flight_since: float | None = None
        """time.monotonic() when the batch in flight was sent (None: none is)."""
        self._open: WriteBatch | None = None
        self._handed: WriteBatch | None = None
        """The open batch once handed to a gathering writer (`Writer.gathers`), until it seals it:
        ops still join it, and the writer hears of them (`Writer.grew`)."""
        self._in_flight: WriteBatch | None = None
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.linger = linger
        self._mark = 0
        """Set when a batch commits: the ops then open plus the ops of the batch just committed
        (its writers are about to send their next ones); `_linger` holds the next batch until it
        is that full again. 0: nothing to wait for."""
        self._want = 0
        self._grown: asyncio.Future[None] | None = None
        """Resolved when the open batch holds `_want` ops (`_linger` waits for it)."""
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

    def journal(self) -> Journal:
        """The open batch's journal (opening the batch): where a command about to be applied
        notes how to undo it."""
        batch = self._open
        if batch is None:
            batch = self._open = WriteBatch(
                journal=self._new_journal(), deadline=time.monotonic() + self.write_timeout
            )
        assert batch.journal is not None
        return batch.journal

    def add(self, issued: Issued) -> Outcome:
        """Put one command's ops (already applied to the state, noted in `journal()`) into the
        open batch; the returned outcome resolves when that batch is committed (or failed)."""
        batch = self._open
        if batch is None:
            self.journal()
            batch = self._open
            assert batch is not None
        batch.replicated.extend(issued.replicated)
        batch.local.extend(issued.local)
        batch.records.extend(issued.records)
        batch.local_records.extend(issued.local_records)
        self._ready.set()
        if batch is self._handed:
            self.writer.grew()
        grown = self._grown
        if grown is not None and len(batch) >= self._want and not grown.done():
            grown.set_result(None)
        return batch.outcome

    def pending(self) -> Outcome | None:
        """The outcome a reply must wait for: the newest batch with ops not yet committed."""
        if self._open is not None:
            return self._open.outcome
        if self._in_flight is not None:
            return self._in_flight.outcome
        return None

    def pending_batches(self) -> list[WriteBatch]:
        """The batches not yet committed, oldest first."""
        return [b for b in (self._in_flight, self._open) if b is not None]

    async def settled(self) -> CommandError | None:
        """Wait until everything added so far is committed; the failure, if any."""
        outcome = self.pending()
        if outcome is None:
            return None
        return await asyncio.shield(outcome)

    def _open_ops(self) -> int:
        """Ops in the open batch. A method, not an expression in `_commit_loop`: there mypy
        narrows `self._open` to None after `self._open = None` even across an `await` (while
        `add` opens a new batch), and the compiled core checks that narrowed type at run time
        (TypeError: None object expected; got WriteBatch), which killed the commit task."""
        return 0 if self._open is None else len(self._open)

    async def _linger(self) -> None:
        """Hold the open batch up to `linger` seconds for the writers the last commit answered.

        Why: with many clients sending one request at a time, the ones a commit answers send
        their next request a moment after it, while the others' requests already fill the open
        batch. Sent at once, that batch leaves the answered clients to the next one, and the
        clients settle into two halves committing in turn: twice the transactions (each costs
        the broker milliseconds of CPU) for the same writes. Waiting until the open batch holds
        what it held when the commit came plus as many ops as that commit answered (its writers
        have come back), or the linger is over, merges the halves. A lone client is never held:
        its next write alone reaches the mark. 0 turns it off; a gathering writer holds its
        transactions over all its shards instead (`Writer.gathers`)."""
        batch, want, self._mark = self._open, self._mark, 0
        if self.linger <= 0 or self.writer.gathers or batch is None or len(batch) >= want:
            return
        loop = asyncio.get_running_loop()
        self._want, self._grown = want, loop.create_future()
        timer = loop.call_later(self.linger, _resolve, self._grown)
        try:
            await self._grown
        finally:
            timer.cancel()
            self._grown = None

    async def _commit_loop(self) -> None:
        while True:
            await self._ready.wait()
            await self._linger()
            self._ready.clear()
            batch = self._open
            if batch is None or not batch:
                self._open = None
                continue
            self.in_flight_since = time.monotonic()
            started = time.perf_counter()
            if self.down is not None:
                self._seal(batch)
                self._fail(batch, WriterError(self.down), fast=True)
                continue
            if self.writer.gathers:
                self._handed = batch  # open until the writer's transaction begins
            else:
                self._seal(batch)
            try:
                await self.writer.append(
                    batch.records, batch.local_records, batch.deadline, partial(self._seal, batch)
                )
            except WriterError as exc:
                self._fail(batch, exc)
                continue
            except Exception as exc:  # a bug in encoding, say: fail the batch, never hang it
                log.exception("appending a batch of %d ops failed", len(batch))
                self._fail(batch, WriterError(f"internal error while appending: {exc}"))
                continue
            if self._unsealed(batch):  # ops that joined it were never written: re-read the log
                self._fail(batch, WriterError("internal error: the writer did not seal a batch"))
                continue
            self._in_flight = self.in_flight_since = None
            self.batches += 1
            self.ops += len(batch)
            self._mark = len(batch) + self._open_ops()
            batch.outcome.set_result(None)
            self._on_committed(batch)
            if self.observe is not None:
                self.observe(time.perf_counter() - started, len(batch))

    def _unsealed(self, batch: WriteBatch) -> bool:
        """A method for the reason `_open_ops` gives (mypy's narrowing across an await)."""
        return self._handed is batch

    def _seal(self, batch: WriteBatch) -> None:
        """`batch` takes no more ops: the next ones open a new batch."""
        if self._open is batch:
            self._open = None
        if self._handed is batch:
            self._handed = None
        self._in_flight = batch

    def up(self) -> None:
        """The shard recovered (its log re-read, its writer renewed): commit batches again."""
        self.down = None

    def _fail(self, batch: WriteBatch, exc: WriterError, fast: bool = False) -> None:
        """The batch in flight failed: it and the open batch (built on its state) fail, their
        ops are undone, and batches fail at once from now on (`down`) until `up`."""
        if fast:  # never sent: it was certainly not applied
            error = refusals.writes_refused(str(exc))
        else:
            error = refusals.not_confirmed(str(exc))
            self.down = (
                f"the op log did not confirm a write ({exc}); writes are refused until the node "
                "has re-read its log (reads go on)"
            )
        self._seal(batch)  # a writer that failed it before its transaction began
        self._in_flight = self.in_flight_since = None
        doomed = [batch] + ([self._open] if self._open is not None else [])
        self._open = None
        self._on_failed(exc, doomed)
        for each in doomed:
            if not each.outcome.done():
                each.outcome.set_result(error)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
