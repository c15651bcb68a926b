"""The settings and helpers of the node's transactional writer
(`streams.node.kafka.process_writer`: one producer per node process, or per shard with
`STREAMS_WRITER_PER_SHARD=1`).

The producer is transactional (acks=all, idempotent) with a transactional.id per region and shard
set, so starting a second writer under the same id fences the first: the old one gets `_FENCED`
on its next append and stops writing, and the log never holds interleaved or forked sequences.

Each append has a deadline (its batch's, `streams.node.runtime.writepath`): the commit waits at
most until then, and a failed transaction is not repaired on the failure path (an abort after a
timed-out commit is refused by librdkafka, and renewing the producer waits for the broker as long
again). The producer is instead renewed by `recover`, which the shard calls before it re-reads its
log, once the broker answers again. A renewal (init_transactions under the same transactional.id)
makes the coordinator finish the old producer's transaction (commit if it was being committed,
abort otherwise) and fences whoever holds the id, so `recover` first asks whether another node
announced itself as the writer since this one started (`superseded`, from
`streams.node.kafka.presence`): if so it does not renew, and the shard stays fenced (read-only).
After `start` and after each `recover` the writer makes the end of its own logs readable
(`streams.node.kafka.settle`: on Tansu's S3 storage a crash or an outage can leave a transaction
prepared or a watermark past the last record). A record reported delivered without an offset (a
produce the broker took for a duplicate: on Tansu its batch may never have been stored) fails its
batch although the transaction committed.
"""

from __future__ import annotations

import logging
import os
import time

from confluent_kafka import KafkaError, KafkaException

from streams.kafka import security, sizes
from streams.ops.pack import PACK_BYTES

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
    """The transactional producer's settings (`streams.node.kafka.process_writer`)."""
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
