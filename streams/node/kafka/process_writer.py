"""One transactional producer per node process, shared by the shards the process owns.

Why: each shard used to append through a transactional producer of its own, so a process of S
shards ran S transactions at once, and a transaction costs librdkafka ~0.5 ms of client CPU plus
the broker's work whatever it holds: four shards in one process wrote slower than one
(docs/benchmarks.md). A Kafka transaction spans partitions, so the process's shards share one:
`ProcessWriter` commits, in one transaction, every shard batch handed in while the previous
transaction was in flight (group commit across shards). A handed batch stays open until its
transaction begins (`Writer.append`'s `seal`): the ops its shard takes meanwhile join it, not the
transaction after. With two shards or more the process, not each shard, holds the next
transaction for the writers the last one answered (`_gather`). Each shard keeps the interface
it had (`ShardWriter`: append / start / recover / close / fenced / next_offsets / fail_next), so
the shard and its snapshotter do not change.

Failure is shared like the transaction: when it fails, every shard batch in it fails, and each
shard runs its own failure path (write path down, `recover`, re-read of its log). The producer is
renewed once for the process (the first `recover` renews it, the next ones find it renewed) and
each shard settles its own partitions (`streams.node.kafka.settle`). A record reported delivered
without an offset fails only the batch of its partition's shard (the others' records were
confirmed and their transaction committed).

Fencing belongs to the process: the transactional id names the region and the process's shard
set (`process_transactional_id`: a region of one shard keeps `streams-writer-{region}`, a process
of one shard keeps `streams-writer-{region}-s{shard}`, so today's layouts of one shard per process
keep their ids). A shard moved to another process would then be written under two ids by two
live producers, neither fencing the other. So the node announces in `<region>.writers` the id it
registers (`streams.node.kafka.presence`), and a node starting on shards whose newest announced
writer used another id first registers that id (`fence_first`: init_transactions on a throwaway
producer, which makes the coordinator finish the old holder's open transaction and fences it) and
only then its own. The price: fencing a moved shard fences the old process's whole producer, so
its other shards turn read-only too (their next append reports WriterFenced) until it restarts
with the new layout; a move is an operator's act that restarts both processes anyway.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from streams.kafka.gate import signed
from streams.node.kafka.settle import SettleError, settle
from streams.node.kafka.writer import PACK_LIMIT, _is_fenced, _left, writer_config
from streams.node.runtime.oplog import WriterError, WriterFenced
from streams.ops.codec import Sealed
from streams.ops.pack import sealed_records

log = logging.getLogger(__name__)


def process_transactional_id(region_name: str, owned: Iterable[int], shards: int) -> str:
    """The id of a process's producer: the region's and its shard set's (stable across runs, the
    same in every process that derives it; never a clock or a hash)."""
    owned = sorted(set(owned))
    if shards == 1:
        return f"streams-writer-{region_name}"
    return f"streams-writer-{region_name}-s" + "+".join(str(s) for s in owned)


@dataclass
class _Batch:
    handle: ShardWriter
    replicated: Sequence[Sealed]
    local: Sequence[Sealed]
    deadline: float
    future: asyncio.Future[None]
    seal: Callable[[], None] | None
    error: BaseException | None = None

    def __len__(self) -> int:
        """Its records (one per op) so far: the lists grow until it is sealed."""
        return len(self.replicated) + len(self.local)


@dataclass
class _Txn:
    """What the delivery reports of one transaction said, per (topic, partition)."""

    ends: dict[tuple[str, int], int] = field(default_factory=dict)
    unconfirmed: set[int] = field(default_factory=set)


class ProcessWriter:
    """The process's producer, its worker thread and the group commit across its shards."""

    def __init__(
        self,
        bootstrap: str,
        region_name: str,
        oplog_topic: str,
        local_topic: str,
        owned: Iterable[int],
        shards: int,
        timeout_s: float = 10.0,
        signing_key: bytes | None = None,
        linger: float = 0.0,
    ) -> None:
        self.region_name = region_name
        self.linger = linger
        """How long the next transaction waits, once one committed, for the writers it answered
        (`_gather`); 0: it takes what is pending at once."""
        self.owned = tuple(sorted(set(owned)))
        self.gathers = len(self.owned) > 1
        """The process holds its transactions for the writers of all its shards (`_gather`), so
        the shards' write paths do not linger (`Writer.gathers`); one shard's write path
        lingers itself, as on any other writer."""
        self.shards = shards
        self.oplog_topic = oplog_topic
        self.local_topic = local_topic
        self.timeout_s = timeout_s
        self.signing_key = signing_key
        self.bootstrap = bootstrap
        self.transactional_id = process_transactional_id(region_name, self.owned, shards)
        self.fenced = False
        self.fence_first: tuple[str, ...] = ()
        """Transactional ids to register (and so fence) before the own one: other processes'
        that wrote these shards last (`streams.node.kafka.presence`, set by the node)."""
        self.transactions = 0
        """Transactions committed (a test and CRDT.INFO figure: fewer than `batches` when
        shards shared them)."""
        self.batches = 0
        """Shard batches committed."""
        self._config = writer_config(bootstrap, self.transactional_id, timeout_s)
        self._producer = Producer(self._config)
        self._renew_needed = False
        self._started = False
        self._open = len(self.owned)
        self._lock = threading.Lock()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"writer-{region_name}")
        self._pending: list[_Batch] = []
        self._flusher: asyncio.Task[None] | None = None
        self._want = 0
        """The records `_gather` waits for in the handed batches."""
        self._gathered: asyncio.Future[None] | None = None
        """Resolved when the handed batches hold `_want` records (`_gather` waits for it)."""
        self.handles = {s: ShardWriter(self, s) for s in self.owned}

    # --- start ----------------------------------------------------------------------------------

    def start_shard(self, handle: ShardWriter) -> None:
        """Register the ids (once per process), then settle the shard's partitions."""
        self._thread.submit(self._start_sync, handle).result()

    def _start_sync(self, handle: ShardWriter) -> None:
        if not self._started:
            for other in self.fence_first:
                if other == self.transactional_id:
                    continue
                try:  # registering the old id completes or aborts its open transaction
                    Producer({**self._config, "transactional.id": other}).init_transactions(
                        self.timeout_s
                    )
                    log.warning("%s: fenced the former writer %s", self.region_name, other)
                except KafkaException as exc:
                    raise WriterError(f"cannot fence the former writer {other}: {exc}") from exc
            try:
                self._producer.init_transactions(self.timeout_s)
            except KafkaException as exc:
                raise WriterError(f"cannot start the writer of {handle.name}: {exc}") from exc
            self._started = True
        self._settle(handle)

    # --- appends --------------------------------------------------------------------------------

    async def append(
        self,
        handle: ShardWriter,
        replicated: Sequence[Sealed],
        local: Sequence[Sealed],
        deadline: float,
        seal: Callable[[], None] | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        batch = _Batch(handle, replicated, local, deadline, loop.create_future(), seal)
        self._pending.append(batch)
        self.grew()
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush())
        await batch.future

    def grew(self) -> None:
        """A batch was handed in, or a handed one took ops: has `_gather` waited enough?"""
        gathered = self._gathered
        if gathered is not None and not gathered.done() and self._pending_records() >= self._want:
            gathered.set_result(None)

    def _pending_records(self) -> int:
        return sum(len(batch) for batch in self._pending)

    async def _flush(self) -> None:
        """Commit what is pending, one transaction at a time, until nothing is."""
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                group, self._pending = self._pending, []
                for batch in group:  # the transaction begins: the shards open new batches
                    if batch.seal is not None:
                        batch.seal()
                answered = sum(len(batch) for batch in group)
                try:
                    await loop.run_in_executor(self._thread, self._commit_sync, group)
                except asyncio.CancelledError:
                    for batch in group:
                        batch.future.cancel()
                    raise
                except Exception as exc:  # every batch learns it (say the thread was shut down)
                    for batch in group:
                        batch.error = batch.error or exc
                for batch in group:
                    if batch.future.done():
                        continue
                    if batch.error is None:
                        batch.future.set_result(None)
                    else:
                        batch.future.set_exception(batch.error)
                # Let the shards just answered hand in their open batches (their tasks run
                # before this one resumes), so that `_gather` counts them.
                await asyncio.sleep(0)
                await self._gather(answered)
        finally:
            self._flusher = None

    async def _gather(self, answered: int) -> None:
        """Hold the next transaction up to `linger` until the handed batches hold what they
        held right after the last commit plus the `answered` records it committed (its writers
        are about to send their next ones), counted over every shard of the process.

        Why: with many clients sending one request at a time, the ones a commit answers send
        their next request a moment later (`WritePath._linger`, which does the same for one
        shard). With random keys those requests go to any shard, so a mark per shard is met
        only by chance: each shard's linger ran out, the shards handed in one by one, and the
        transaction started without the ops that came a moment late, which then waited a whole
        transaction more (four shards in one process wrote at 0.63x the rate of one at c50 P1
        on Apache Kafka, docs/benchmarks.md). One mark for the process, and batches that stay
        open until the transaction begins, keep the answered clients together. A lone client
        meets the mark with its own next write; clients that went away cost one linger."""
        if self.linger <= 0 or not self.gathers or answered <= 0:
            return
        want = self._pending_records() + answered
        loop = asyncio.get_running_loop()
        self._want, self._gathered = want, loop.create_future()
        timer = loop.call_later(self.linger, _resolve, self._gathered)
        try:
            await self._gathered
        finally:
            timer.cancel()
            self._gathered = None

    def _commit_sync(self, group: list[_Batch]) -> None:
        """One transaction for every batch of `group` whose shard may write; sets each batch's
        error (a failure fails them all)."""
        live: list[_Batch] = []
        for batch in group:
            if batch.handle.fenced:
                batch.error = WriterFenced(batch.handle.fenced_text())
            elif self._renew_needed:
                batch.error = WriterError("the writer must be renewed first (a transaction failed)")
            else:
                live.append(batch)
        if not live:
            return
        txn = _Txn()
        deadline = min(b.deadline for b in live)
        try:
            self._transaction(live, txn, deadline)
        except WriterError as exc:
            for batch in live:
                batch.error = exc
            return
        self.transactions += 1
        self.batches += len(live)
        for (topic, partition), end in txn.ends.items():
            handle = self.handles.get(partition)
            if handle is not None:
                handle.next_offsets[topic] = max(handle.next_offsets.get(topic, 0), end)
        for batch in live:
            if batch.handle.partition in txn.unconfirmed:
                batch.error = WriterError(
                    "the op log committed the write without confirming its records (a retried "
                    "produce the broker took for a duplicate)"
                )

    def _transaction(self, live: list[_Batch], txn: _Txn, deadline: float) -> None:
        def delivered(error: KafkaError | None, message: Message[Any, Any]) -> None:
            offset = message.offset()
            partition = message.partition() or 0
            if error is None and offset is not None and offset >= 0:
                part = (message.topic() or "", partition)
                txn.ends[part] = max(txn.ends.get(part, 0), offset + 1)
            elif error is None:  # delivered without an offset (writer.py's docstring)
                txn.unconfirmed.add(partition)

        producer = self._producer
        key = self.signing_key
        try:
            producer.begin_transaction()
            for batch in live:
                for topic, records in (
                    (self.oplog_topic, batch.replicated),
                    (self.local_topic, batch.local),
                ):
                    for record in sealed_records(records, PACK_LIMIT) if records else ():
                        producer.produce(
                            topic,
                            partition=batch.handle.partition,
                            key=record.key,
                            value=record.value,
                            headers=record.headers
                            if key is None
                            else signed(record.headers, key, record.value),
                            on_delivery=delivered,
                        )
            injected = [b.handle for b in live if b.handle.fail_next > 0]
            if injected:
                for handle in injected:
                    handle.fail_next -= 1
                self._abort(deadline)
                raise WriterError("the op log did not acknowledge the write: injected fault")
            producer.commit_transaction(_left(deadline))
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if _is_fenced(exc):
                self.fenced = True
                raise WriterFenced(live[0].handle.fenced_text()) from exc
            if error.code() == KafkaError._TIMED_OUT:
                self._renew_needed = True  # librdkafka refuses to abort a commit in progress
                raise WriterError(
                    f"the op log did not acknowledge the write within the write timeout: "
                    f"{error.str()}"
                ) from exc
            self._abort(deadline)
            raise WriterError(f"the op log did not acknowledge the write: {error.str()}") from exc
        except BufferError as exc:
            self._abort(deadline)
            raise WriterError(f"the producer queue is full: {exc}") from exc

    def _abort(self, deadline: float) -> None:
        try:
            self._producer.abort_transaction(_left(deadline))
        except KafkaException as exc:
            log.warning("abort_transaction failed (%s): the producer will be renewed", exc)
            self._renew_needed = True

    # --- recovery -------------------------------------------------------------------------------

    async def recover(self, handle: ShardWriter, superseded: Callable[[], str | None]) -> None:
        handle.superseded = superseded
        await asyncio.get_running_loop().run_in_executor(self._thread, self._recover, handle)

    def _recover(self, handle: ShardWriter) -> None:
        if handle.fenced:
            raise WriterFenced(handle.fenced_text())
        if self._renew_needed:
            # A renewal fences whoever holds the id; never renew under a shard another node
            # announced itself the writer of since: mark each such shard fenced first (the
            # renewed producer must never write its partition again).
            for other in self.handles.values():
                newer = other.superseded() if other.superseded is not None else None
                if newer is not None:
                    other.own_fenced = True
            if handle.fenced:
                raise WriterFenced(handle.fenced_text())
            self._renew()
        self._settle(handle)

    def _settle(self, handle: ShardWriter) -> None:
        try:
            settle(
                self._producer,
                self.bootstrap,
                (self.oplog_topic, self.local_topic),
                handle.partition,
                handle.name,
                _is_fenced,
            )
        except KafkaException as exc:  # `settle` raises only a fencing one
            self.fenced = True
            raise WriterFenced(handle.fenced_text()) from exc
        except SettleError as exc:
            self._renew_needed = True  # a barrier may be half-done: never reuse this producer
            raise WriterError(str(exc)) from exc

    def _renew(self) -> None:
        """A new producer under the process's id (`streams.node.kafka.writer`'s docstring: why)."""
        self._producer.purge()
        fresh = Producer(self._config)
        try:
            fresh.init_transactions(self.timeout_s)
        except KafkaException as exc:
            raise WriterError(
                f"the op log is unreachable: cannot renew the writer of {self.region_name}: "
                f"{exc.args[0].str() if exc.args else exc}"
            ) from exc
        self._producer = fresh
        self._renew_needed = False
        log.warning("%s: writer renewed after a transaction that failed", self.transactional_id)

    # --- close ----------------------------------------------------------------------------------

    def close_shard(self, handle: ShardWriter) -> None:
        """The last shard to close stops the thread and flushes (unless it may not)."""
        with self._lock:
            self._open -= 1
            last = self._open == 0
        if not last:
            return
        if self._renew_needed:
            self.fenced = True
        self._thread.shutdown(wait=True)
        if not self.fenced:
            self._producer.flush(1.0)


class ShardWriter:
    """A shard's view of the process's writer (`streams.node.runtime.oplog.Writer`)."""

    def __init__(self, process: ProcessWriter, shard: int) -> None:
        self.process = process
        self.partition = shard
        self.name = (
            process.region_name if process.shards == 1 else f"{process.region_name} shard {shard}"
        )
        self.own_fenced = False
        """This shard was taken over (the node's presence watcher, or a renewal that found it
        superseded); the process's other shards may still write."""
        self.fail_next = 0
        """Test hook (CRDT.FAULT): fail this many upcoming transactions holding this shard's
        batches (each fails every shard batch it holds)."""
        self.next_offsets: dict[str, int] = {}
        """Per own topic: one past the last record of this shard's partition that a committed
        transaction wrote."""
        self.superseded: Callable[[], str | None] | None = None

    @property
    def fenced(self) -> bool:
        return self.own_fenced or self.process.fenced

    @fenced.setter
    def fenced(self, value: bool) -> None:
        self.own_fenced = value

    def fenced_text(self) -> str:
        return (
            f"another writer took over region {self.name} "
            "(fenced); this node no longer accepts writes"
        )

    def start(self) -> None:
        self.process.start_shard(self)

    @property
    def gathers(self) -> bool:
        return self.process.gathers

    async def append(
        self,
        replicated: Sequence[Sealed],
        local: Sequence[Sealed],
        deadline: float | None = None,
        seal: Callable[[], None] | None = None,
    ) -> None:
        if not replicated and not local:
            if seal is not None:
                seal()
            return
        if deadline is None:
            deadline = time.monotonic() + self.process.timeout_s
        await self.process.append(self, replicated, local, deadline, seal)

    def grew(self) -> None:
        self.process.grew()

    async def recover(self, superseded: Callable[[], str | None]) -> None:
        await self.process.recover(self, superseded)

    def close(self) -> None:
        self.process.close_shard(self)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
