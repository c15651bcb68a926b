"""A shard's writer: the only process that appends to its partition of `<region>.oplog` and
`<region>.local`.

It uses a transactional producer (acks=all, idempotent) whose transactional.id is the region's
and shard's, so starting a second writer for the same shard fences the first: the old one gets
`_FENCED` on its next append and stops writing, and the log never holds interleaved or forked
sequences. Fencing is per shard: each shard of a region has its own writer. A node process
shares one producer between its shards instead (`streams.node.kafka.process_writer`, which takes
this module's settings and helpers); this writer serves `STREAMS_WRITER_PER_SHARD=1` and tools.

Appends run in one worker thread (confluent-kafka calls block); the node awaits them. A write is
acknowledged to its client only after the transaction holding its ops committed.

Each append has a deadline (its batch's, `streams.node.runtime.writepath`): the commit waits at
most until then, and a failed transaction is not repaired on the failure path (an abort after a
timed-out commit is refused by librdkafka, and renewing the producer waits for the broker as long
again). The producer is instead renewed by `recover`, which the shard calls before it re-reads its
log, once the broker answers again. A renewal (init_transactions under the same transactional.id)
fences whoever holds the id, so `recover` first asks whether another node announced itself as
the writer since this one started (`superseded`, from `streams.node.kafka.presence`): if so it does
not renew, and the writer stays fenced (read-only). After `start` and after each `recover` the
writer makes the end of its own logs readable (`streams.node.kafka.settle`: on Tansu's S3 storage a
crash or an outage can leave a transaction prepared or a watermark past the last record).
A record reported delivered without an offset (a produce the broker took for a duplicate: on
Tansu its batch may never have been stored) fails its batch although the transaction committed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from streams.kafka import security, sizes
from streams.kafka.gate import signed
from streams.node.kafka.settle import SettleError, settle
from streams.node.runtime.oplog import WriterError, WriterFenced
from streams.ops.codec import Sealed
from streams.ops.pack import PACK_BYTES, sealed_records

log = logging.getLogger(__name__)


MAX_RECORD_BYTES = int(os.environ.get("STREAMS_MAX_RECORD_BYTES", sizes.MAX_RECORD_BYTES))
"""The largest op record the writer sends (`streams.kafka.sizes.MAX_RECORD_BYTES`, which brokers,
mirrors and readers accept; the environment variable lowers it for tests)."""


PACK_LIMIT = min(PACK_BYTES, MAX_RECORD_BYTES // 2)
"""Packs of ops stay well under every record limit on the path (`streams.ops.pack`)."""


def transactional_id(region_name: str, shard: int = 0, shards: int = 1) -> str:
    """One per region and shard; a region of one shard keeps the id it always had."""
    if shards == 1:
        return f"streams-writer-{region_name}"
    return f"streams-writer-{region_name}-s{shard}"


def writer_config(bootstrap: str, txn_id: str, timeout_s: float) -> dict[str, object]:
    """The transactional producer's settings (a shard's `RegionWriter`, a process's
    `streams.node.kafka.process_writer.ProcessWriter`)."""
    return {
        **security.producer_settings(bootstrap),
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 0,
        # Right after a commit, Apache Kafka often answers the next transaction's
        # AddPartitionsToTxn with CONCURRENT_TRANSACTIONS, and librdkafka retries after
        # retry.backoff.ms (100 ms by default): a commit's p50 was 5-6 ms at 100 ms and
        # 2.7-5 ms at 5 ms (scripts/kafka_probe.py commit).
        "retry.backoff.ms": 5,
        # Redis takes values up to 512 MB; Kafka's default record limit is 1 MB. The node
        # refuses bigger ops itself (streams.kafka.sizes.batch_bytes against the topics' limit);
        # this takes every record that check lets through, with the batch framing.
        "message.max.bytes": MAX_RECORD_BYTES + sizes.FRAMING_ALLOWANCE,
        "transaction.timeout.ms": 60000,
        "message.timeout.ms": int(timeout_s * 1000),
        "log_level": 3,
    }


class RegionWriter:
    def __init__(
        self,
        bootstrap: str,
        region_name: str,
        oplog_topic: str,
        local_topic: str,
        timeout_s: float = 10.0,
        *,
        shard: int = 0,
        shards: int = 1,
        signing_key: bytes | None = None,
    ) -> None:
        """`signing_key`: the region's key (topology `signing_key`); each record then carries
        its HMAC in a header, and readers refuse the region's records without it
        (`streams.kafka.gate`)."""
        self.region_name = region_name
        self.signing_key = signing_key
        self.partition = shard
        self.name = region_name if shards == 1 else f"{region_name} shard {shard}"
        self.oplog_topic = oplog_topic
        self.local_topic = local_topic
        self.timeout_s = timeout_s
        self.fenced = False
        self.fail_next = 0
        """Test hook (CRDT.FAULT): abort this many upcoming transactions as failed."""
        self.next_offsets: dict[str, int] = {}
        """Per own topic: one past the last record a committed transaction wrote."""
        self._config = writer_config(
            bootstrap, transactional_id(region_name, shard, shards), timeout_s
        )
        self._producer = Producer(self._config)
        self._unconfirmed = False
        """A record of the last append was reported delivered without an offset (`_delivered`)."""
        self._renew_needed = False
        """A failed transaction could not be aborted (librdkafka refuses to abort while a timed
        out commit is still in progress): the producer must be replaced before the next one."""
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"writer-{region_name}-s{shard}")

    def start(self) -> None:
        """Register the transactional id; this is what fences any older writer of the region.
        Then make sure the node can read its own logs to their end (`_settle`)."""
        try:
            self._producer.init_transactions(self.timeout_s)
        except KafkaException as exc:
            raise WriterError(f"cannot start the writer of {self.name}: {exc}") from exc
        self._settle()

    async def append(
        self, replicated: Sequence[Sealed], local: Sequence[Sealed], deadline: float | None = None
    ) -> None:
        """Append one batch in one transaction, committed by `deadline` (time.monotonic(); else
        within the writer's timeout) or failed. The ops were encoded when they were issued
        (`streams.ops.codec.seal`), so this thread runs little Python and holds the GIL little:
        it competes with the event loop for it. Each topic's ops go as few records as
        `streams.ops.pack` allows (packs of many ops; a lone op as a plain record)."""
        if not replicated and not local:
            return
        if deadline is None:
            deadline = time.monotonic() + self.timeout_s
        loop = asyncio.get_running_loop()
        self._unconfirmed = False
        await loop.run_in_executor(self._thread, self._append_sync, replicated, local, deadline)
        if self._unconfirmed:
            self._unconfirmed = False
            raise WriterError(
                "the op log committed the write without confirming its records (a retried "
                "produce the broker took for a duplicate)"
            )

    def _append_sync(
        self, replicated: Sequence[Sealed], local: Sequence[Sealed], deadline: float
    ) -> None:
        if self.fenced:
            raise WriterFenced(self._fenced_text())
        if self._renew_needed:
            raise WriterError("the writer must be renewed first (a transaction failed)")
        producer = self._producer
        try:
            producer.begin_transaction()
            key = self.signing_key
            for topic, records in ((self.oplog_topic, replicated), (self.local_topic, local)):
                for record in sealed_records(records, PACK_LIMIT) if records else ():
                    producer.produce(
                        topic,
                        partition=self.partition,
                        key=record.key,
                        value=record.value,
                        headers=record.headers
                        if key is None
                        else signed(record.headers, key, record.value),
                        on_delivery=self._delivered,
                    )
            if self.fail_next > 0:
                self.fail_next -= 1
                self._abort(deadline)
                raise WriterError("the op log did not acknowledge the write: injected fault")
            producer.commit_transaction(_left(deadline))
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if (
                error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
                or "fenced" in str(error).lower()
            ):
                self.fenced = True
                raise WriterFenced(self._fenced_text()) from exc
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

    def _delivered(self, error: KafkaError | None, message: Message[Any, Any]) -> None:
        """A record of the transaction landed (every record is reported: with op packs a
        transaction has few): what follows it in its topic is where a snapshot taken now resumes
        reading (control records are skipped by readers), and one reported without an offset
        makes the batch unconfirmed."""
        offset = message.offset()
        if error is None and offset is not None and offset >= 0:
            topic = message.topic() or ""
            self.next_offsets[topic] = max(self.next_offsets.get(topic, 0), offset + 1)
        elif error is None:
            # "Delivered" without an offset: librdkafka's answer to a retried produce that the
            # broker refuses as a duplicate sequence. Tansu's S3 storage records the sequence
            # before it writes the batch, so after a broker or store failure in between the
            # records may be missing although the transaction commits (`append` fails the batch).
            self._unconfirmed = True

    def _abort(self, deadline: float) -> None:
        """Abort the open transaction by `deadline`; when librdkafka cannot (a commit that timed
        out is still in progress, the broker is unreachable), the producer must be renewed
        (`recover`) before the next transaction."""
        try:
            self._producer.abort_transaction(_left(deadline))
        except KafkaException as exc:
            log.warning("abort_transaction failed (%s): the producer will be renewed", exc)
            self._renew_needed = True

    async def recover(self, superseded: Callable[[], str | None]) -> None:
        """Make the writer usable again after a failed transaction, once the broker answers:
        renew the producer if it must be, unless `superseded()` names a newer writer of this
        shard (then this writer is fenced and raises WriterFenced). Raises WriterError while the
        broker cannot be reached."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self._recover, superseded)

    def _recover(self, superseded: Callable[[], str | None]) -> None:
        if self.fenced:
            raise WriterFenced(self._fenced_text())
        if self._renew_needed:
            newer = superseded()
            if newer is not None:
                self.fenced = True
                raise WriterFenced(newer)
            self._renew()
        # Even an aborted transaction can leave the end of an own log unreadable (Tansu: a
        # watermark past the last batch), and the shard reads its log next.
        self._settle()

    def _settle(self) -> None:
        """Make the end of the own logs readable before the node reads them
        (`streams.node.kafka.settle`: on Tansu a prepared transaction or a watermark past the last
        record can hide it); writes an aborted barrier transaction when it must. Raises
        WriterFenced or WriterError."""
        try:
            settle(
                self._producer,
                str(self._config["bootstrap.servers"]),
                (self.oplog_topic, self.local_topic),
                self.partition,
                self.name,
                _is_fenced,
            )
        except KafkaException as exc:  # `settle` raises only a fencing one
            self.fenced = True
            raise WriterFenced(self._fenced_text()) from exc
        except SettleError as exc:
            self._renew_needed = True  # a barrier may be half-done: never reuse this producer
            raise WriterError(str(exc)) from exc

    def _renew(self) -> None:
        """A new producer with the same transactional id: its init_transactions makes the
        coordinator finish the old producer's transaction (commit if it was being committed,
        abort otherwise) and fences the old producer; whichever it was, the node's reload reads
        the log to learn it. Raises WriterError while the broker cannot be reached."""
        old = self._producer
        old.purge()
        fresh = Producer(self._config)
        try:
            fresh.init_transactions(self.timeout_s)
        except KafkaException as exc:
            raise WriterError(
                f"the op log is unreachable: cannot renew the writer of {self.name}: "
                f"{exc.args[0].str() if exc.args else exc}"
            ) from exc
        self._producer = fresh
        self._renew_needed = False
        log.warning("%s: writer renewed after a transaction that could not be aborted", self.name)

    def _fenced_text(self) -> str:
        return (
            f"another writer took over region {self.name} "
            "(fenced); this node no longer accepts writes"
        )

    def close(self) -> None:
        if self._renew_needed:  # a transaction may be half-done: never flush into it
            self.fenced = True
        self._thread.shutdown(wait=True)
        if not self.fenced:
            self._producer.flush(1.0)


def _is_fenced(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError):
        return False
    return (
        error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
        or "fenced" in str(error).lower()
    )


def _left(deadline: float) -> float:
    """Seconds until `deadline`, at least a little (a call with 0 fails without trying)."""
    return max(0.05, deadline - time.monotonic())
