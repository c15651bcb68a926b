"""A shard's writer: the only process that appends to its partition of `<region>.oplog` and
`<region>.local`.

It uses a transactional producer (acks=all, idempotent) whose transactional.id is the region's
and shard's, so starting a second writer for the same shard fences the first: the old one gets
`_FENCED` on its next append and stops writing, and the log never holds interleaved or forked
sequences. Fencing is per shard: each shard of a region has its own writer.

Appends run in one worker thread (confluent-kafka calls block); the node awaits them. A write is
acknowledged to its client only after the transaction holding its ops committed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from streams.ops.codec import Sealed
from topology import kafka

log = logging.getLogger(__name__)


class WriterError(RuntimeError):
    """An append did not commit; the node refuses writes until it has re-read its log."""


class WriterFenced(WriterError):
    """Another writer took over this region; this one must never write again."""


MAX_RECORD_BYTES = int(os.environ.get("STREAMS_MAX_RECORD_BYTES", kafka.MAX_RECORD_BYTES))
"""The largest op record the writer sends (`topology.kafka.MAX_RECORD_BYTES`, which brokers,
mirrors and readers accept; the environment variable lowers it for tests)."""


def transactional_id(region_name: str, shard: int = 0, shards: int = 1) -> str:
    """One per region and shard; a region of one shard keeps the id it always had."""
    if shards == 1:
        return f"streams-writer-{region_name}"
    return f"streams-writer-{region_name}-s{shard}"


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
    ) -> None:
        self.region_name = region_name
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
        self._config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id(region_name, shard, shards),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            # Redis takes values up to 512 MB; Kafka's default record limit is 1 MB. The node
            # refuses bigger ops itself (topology.kafka.batch_bytes against the topics' limit);
            # this takes every record that check lets through, with the batch framing.
            "message.max.bytes": MAX_RECORD_BYTES + kafka.FRAMING_ALLOWANCE,
            "transaction.timeout.ms": 60000,
            "message.timeout.ms": int(timeout_s * 1000),
            "log_level": 3,
        }
        self._producer = Producer(self._config)
        self._renew_needed = False
        """A failed transaction could not be aborted (librdkafka refuses to abort while a timed
        out commit is still in progress): the producer must be replaced before the next one."""
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"writer-{region_name}-s{shard}")

    def start(self) -> None:
        """Register the transactional id; this is what fences any older writer of the region."""
        try:
            self._producer.init_transactions(self.timeout_s)
        except KafkaException as exc:
            raise WriterError(f"cannot start the writer of {self.name}: {exc}") from exc

    async def append(self, replicated: Sequence[Sealed], local: Sequence[Sealed]) -> None:
        """Append one batch in one transaction. The ops were encoded when they were issued
        (`streams.ops.codec.seal`), so this thread runs little Python and holds the GIL little:
        it competes with the event loop for it."""
        if not replicated and not local:
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._append_sync, replicated, local)

    def _append_sync(self, replicated: Sequence[Sealed], local: Sequence[Sealed]) -> None:
        if self.fenced:
            raise WriterFenced(self._fenced_text())
        if self._renew_needed:
            self._renew()
        producer = self._producer
        try:
            producer.begin_transaction()
            for topic, records in ((self.oplog_topic, replicated), (self.local_topic, local)):
                last = len(records) - 1
                for i, record in enumerate(records):
                    producer.produce(
                        topic,
                        partition=self.partition,
                        key=record.key,
                        value=record.value,
                        headers=record.headers,
                        on_delivery=self._delivered if i == last else None,
                    )
            if self.fail_next > 0:
                self.fail_next -= 1
                self._abort()
                raise WriterError("the op log did not acknowledge the write: injected fault")
            producer.commit_transaction(self.timeout_s)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if (
                error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
                or "fenced" in str(error).lower()
            ):
                self.fenced = True
                raise WriterFenced(self._fenced_text()) from exc
            self._abort()
            raise WriterError(f"the op log did not acknowledge the write: {error.str()}") from exc
        except BufferError as exc:
            self._abort()
            raise WriterError(f"the producer queue is full: {exc}") from exc

    def _delivered(self, error: KafkaError | None, message: Message[Any, Any]) -> None:
        """The last record of a topic in a transaction landed: what follows it in that topic is
        where a snapshot taken now resumes reading (control records are skipped by readers)."""
        offset = message.offset()
        if error is None and offset is not None and offset >= 0:
            topic = message.topic() or ""
            self.next_offsets[topic] = max(self.next_offsets.get(topic, 0), offset + 1)

    def _abort(self) -> None:
        """Abort the open transaction; when librdkafka cannot (a commit that timed out is still
        in progress, the broker is unreachable), replace the producer instead."""
        try:
            self._producer.abort_transaction(self.timeout_s)
        except KafkaException as exc:
            log.warning("abort_transaction failed (%s): replacing the producer", exc)
            self._renew_needed = True
            try:
                self._renew()
            except WriterError as renew_exc:  # retried before the next transaction
                log.warning("%s", renew_exc)

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
        self._thread.shutdown(wait=True)
        if not self.fenced:
            self._producer.flush(1.0)
