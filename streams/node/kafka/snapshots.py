"""Snapshots of a region's state kept in Kafka (`<region>.snapshot`), so a restarted node, or a node
on a fresh machine, reads only the tails of the op logs.

Taking one (`take`): Redis's BGSAVE, with the same reason. The node waits until nothing it holds is
uncommitted (a few milliseconds: the batch in flight commits) and its causal buffer holds nothing,
notes the exact log positions its state covers, and forks. The child writes the state from its
copy-on-write image of memory in the `streams.snapshot` format and exits; the parent serves on at
once and publishes the file when the child is done. Service stops only for the settle and the
fork, never for the serialization.

Storing one: the file is cut into records of at most `CHUNK_BYTES` under one snapshot id (the
record key), each carrying the chunk's index, the chunk count and the whole file's SHA-256 in
headers. A snapshot is complete when every chunk is there and the digest matches. Chunks are half
a MiB, so every record fits a stock broker's `max.message.bytes` (1,048,588) and MirrorMaker's or
any tool's default producer and fetch sizes, with room for key, headers and batch framing.

Keeping them bounded (`Retention`): after storing a snapshot, the records before the oldest of
the newest `KEEP` complete snapshots are deleted (DeleteRecords), so CRDT.SNAPSHOT called again
and again does not grow the topic without end. The topic itself keeps everything
(`retention.ms=-1`, `streams.kafka.topics`): time- or size-based retention could delete the newest
snapshot, and compaction by key would keep one chunk per snapshot. A broker without DeleteRecords
(the embedded Tansu) keeps every snapshot; that is logged once.

Finding one (`load_newest`): read the topic, keep the newest two complete snapshots, try the newest:
an unreadable one (`SnapshotError`, a digest mismatch, another region's) is reported and the
previous one is tried, then a full replay: never a wrong state. A booting node asks for the
digest unchecked (`check_digest=False`) and checks it after it serves; one that failed that check
is passed in `skip` when the node re-reads (`streams.node.runtime.digest_check` says why).
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Collection
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.kafka import clusters, security
from streams.kafka.snapshot_chunks import H_CHUNK, H_CHUNKS, H_ID, H_SHA, KEEP, read_complete
from streams.node.runtime.oplog import Snapshot
from streams.snapshot import SnapshotError, read_snapshot, read_snapshot_unchecked

__all__ = [
    "CHUNK_BYTES",
    "H_CHUNK",
    "H_CHUNKS",
    "H_ID",
    "H_SHA",
    "KEEP",
    "Retention",
    "load_newest",
    "publish",
    "read_complete",
]

log = logging.getLogger(__name__)

CHUNK_BYTES = 512 * 1024
"""Value bytes per chunk record: well under a stock broker's 1 MiB record limit."""


def publish(
    bootstrap: str,
    topic: str,
    snapshot_id: str,
    data: bytes,
    timeout: float = 60.0,
    partition: int = 0,
) -> int:
    """Append one snapshot file to the snapshot topic as chunks (a shard's snapshots go to its
    own partition); returns the offset of its first chunk; raises on a failed delivery."""
    digest = hashlib.sha256(data).hexdigest().encode()
    chunks = [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]
    errors: list[str] = []
    first: list[int] = []

    def delivered(err: KafkaError | None, msg: Message[Any, Any]) -> None:
        if err is not None:
            errors.append(str(err))
        elif not first:  # delivered in order: the first report is chunk 0's
            first.append(msg.offset() or 0)

    producer = Producer(
        {
            **security.client_settings(bootstrap),
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "message.max.bytes": CHUNK_BYTES + 64 * 1024,
            "log_level": 3,
        }
    )
    for index, chunk in enumerate(chunks):
        producer.produce(
            topic,
            partition=partition,
            key=snapshot_id.encode(),
            value=chunk,
            headers=[
                (H_ID, snapshot_id.encode()),
                (H_CHUNK, str(index).encode()),
                (H_CHUNKS, str(len(chunks)).encode()),
                (H_SHA, digest),
            ],
            on_delivery=delivered,
        )
        producer.poll(0)
    left = producer.flush(timeout)
    if left or errors or not first:
        raise RuntimeError(f"snapshot {snapshot_id} not stored in {topic}: {errors or left}")
    return first[0]


class Retention:
    """Where each complete snapshot of one partition starts, oldest first, and the deletion of
    everything before the oldest of the newest `keep` (pure bookkeeping in `note`/`cut`; the
    DeleteRecords call in `trim`)."""

    def __init__(self, keep: int = KEEP) -> None:
        if keep < 1:
            raise ValueError(f"keep at least one snapshot, not {keep}")
        self.keep = keep
        self.starts: list[int] = []
        self.unsupported = False
        """The broker does not implement DeleteRecords: not asked again."""

    def note(self, first_offset: int) -> None:
        """A complete snapshot starts at `first_offset` (read at boot, or just stored)."""
        if first_offset not in self.starts:
            self.starts.append(first_offset)
            self.starts.sort()

    def cut(self) -> int | None:
        """The offset before which records may go: the first chunk of the oldest snapshot kept;
        None while no more than `keep` snapshots are known."""
        if len(self.starts) <= self.keep:
            return None
        return self.starts[-self.keep]

    def trim(self, bootstrap: str, topic: str, partition: int, timeout: float = 15.0) -> int | None:
        """Delete the records before `cut()`; returns the new start of the partition, or None when
        nothing was deleted (nothing to, or the broker cannot)."""
        cut = self.cut()
        if cut is None or self.unsupported:
            return None
        admin = AdminClient(
            {**security.client_settings(bootstrap), "bootstrap.servers": bootstrap, "log_level": 3}
        )
        where = topic if partition == 0 else f"{topic} partition {partition}"
        try:
            futures = admin.delete_records(
                [TopicPartition(topic, partition, cut)], request_timeout=timeout
            )
            for future in futures.values():
                future.result(timeout=timeout)
        except (KafkaException, TimeoutError) as exc:
            error = exc.args[0] if exc.args else None
            code = error.code() if isinstance(error, KafkaError) else None
            # Tansu closes the connection on a request it does not know; Kafka before 0.11 says
            # so (a connection lost at that moment is taken for it too, until the node restarts).
            # Anything else (a timeout, a leader moving) is tried again after the next snapshot.
            self.unsupported = code in (
                KafkaError._TRANSPORT,
                KafkaError.UNSUPPORTED_VERSION,
                KafkaError.INVALID_REQUEST,
            )
            log.warning(
                "%s: older snapshots not deleted (DeleteRecords before offset %d: %s)%s",
                where,
                cut,
                exc,
                "; the broker keeps every snapshot stored" if self.unsupported else "",
            )
            return None
        self.starts = [s for s in self.starts if s >= cut]
        log.info("%s: snapshots before offset %d deleted, %d kept", where, cut, len(self.starts))
        return cut


def load_newest(
    bootstrap: str,
    topic: str,
    region_id: int,
    partition: int = 0,
    retention: Retention | None = None,
    cluster_id: str | None = None,
    skip: Collection[str] = (),
    check_digest: bool = True,
) -> Snapshot | None:
    """The newest snapshot in a partition of the topic that reads back whole, falling back to
    older ones, never one in `skip`. Its positions are for cluster `cluster_id` (this one): a
    snapshot that says it was taken on another cluster (the topic was copied, the cluster rebuilt
    under a new id) is translated by seq (`streams.kafka.clusters`: no positions, every log read
    from its start, the ops its state covers dropped). `check_digest=False`: every check but the
    state's digest, which is returned unchecked (`Snapshot.unchecked_digest`)."""
    for snapshot_id, data in read_complete(
        bootstrap,
        topic,
        partition=partition,
        on_complete=None if retention is None else retention.note,
    ):
        if snapshot_id in skip:
            log.warning(
                "snapshot %s in %s was refused before; trying an older one", snapshot_id, topic
            )
            continue
        try:
            if check_digest:
                region, positions, meta = read_snapshot(io.BytesIO(data))
                digest = None
            else:
                region, positions, meta, digest = read_snapshot_unchecked(io.BytesIO(data))
        except SnapshotError as exc:
            log.error(
                "snapshot %s in %s is unreadable (%s); trying an older one", snapshot_id, topic, exc
            )
            continue
        if region.id != region_id:
            log.error(
                "snapshot %s in %s is of region id %d, not %d; ignored",
                snapshot_id,
                topic,
                region.id,
                region_id,
            )
            continue
        taken_on = clusters.snapshot_cluster(meta)
        positions, origin = clusters.translate(positions, taken_on, cluster_id)
        if origin is clusters.Origin.OTHER:
            log.warning(
                "%s", clusters.translated_note(f"snapshot {snapshot_id}", taken_on, cluster_id)
            )
        return Snapshot(snapshot_id, region, positions, digest)
    return None
