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
previous one is tried, then a full replay: never a wrong state.
"""

from __future__ import annotations

import hashlib
import io
import logging
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.crdt.region import Region
from streams.kafka import clusters, security
from streams.kafka.headers import as_dict, headers_of
from streams.kafka.reading import EndNotReached, ReadToEnd, consumer_config
from streams.snapshot import Positions, SnapshotError, read_snapshot

log = logging.getLogger(__name__)

CHUNK_BYTES = 512 * 1024
"""Value bytes per chunk record: well under a stock broker's 1 MiB record limit."""
KEEP = 2
"""Complete snapshots kept per partition (the reader tries the newest, then the one before)."""
H_ID, H_CHUNK, H_CHUNKS, H_SHA = (
    "snapshot.id",
    "snapshot.chunk",
    "snapshot.chunks",
    "snapshot.sha256",
)


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


class _NoTopic(Exception):
    pass


@dataclass
class _Assembly:
    snapshot_id: str
    chunks: int
    sha: bytes
    first_offset: int
    parts: dict[int, bytes] = field(default_factory=dict)

    def complete(self) -> bool:
        return len(self.parts) == self.chunks

    def data(self) -> bytes:
        return b"".join(self.parts[i] for i in range(self.chunks))


def _headers(msg: Message[Any, Any]) -> dict[str, bytes]:
    return as_dict(headers_of(msg))


def read_complete(
    bootstrap: str,
    topic: str,
    keep: int = KEEP,
    timeout: float = 120.0,
    partition: int = 0,
    retention: Retention | None = None,
) -> list[tuple[str, bytes]]:
    """The newest `keep` complete snapshots in a partition of the topic, newest first, as
    (id, file bytes); `retention` is told where every complete one starts."""
    # Few, large records: the broker finds them fast, and an empty topic answers after one wait.
    consumer = Consumer(consumer_config(bootstrap, f"streams-snapshot-reader-{topic}", 20))
    partial: dict[str, _Assembly] = {}
    done: list[_Assembly] = []

    def on_error(msg: Message[Any, Any]) -> None:
        err = msg.error()
        if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise _NoTopic()  # anything else: the client retries

    reading = ReadToEnd(
        consumer,
        {(topic, partition): 0},
        doing=f"reading the snapshots in {topic} partition {partition}",
        timeout=timeout,
        wait_s=0.2,
        on_error=on_error,
    )
    try:
        for msg in reading:
            h = _headers(msg)
            try:
                sid = h[H_ID].decode()
                index, count = int(h[H_CHUNK]), int(h[H_CHUNKS])
            except (KeyError, ValueError):
                log.warning("%s offset %s: not a snapshot chunk; ignored", topic, msg.offset())
                continue
            asm = partial.get(sid)
            if asm is None:
                asm = partial[sid] = _Assembly(sid, count, h.get(H_SHA, b""), msg.offset() or 0)
            asm.parts[index] = msg.value() or b""
            if asm.complete():
                del partial[sid]
                if retention is not None:
                    retention.note(asm.first_offset)
                done.append(asm)
                done = done[-keep:]
            if len(partial) > keep:  # incomplete leftovers of older attempts
                for old in list(partial)[:-keep]:
                    del partial[old]
    except _NoTopic:
        return []
    except EndNotReached as exc:  # the complete ones read so far are still usable
        log.warning("%s; using the complete snapshots read so far", exc)
    finally:
        consumer.close()
    return [(a.snapshot_id, a.data()) for a in reversed(done) if _sha_ok(a)]


def _sha_ok(asm: _Assembly) -> bool:
    ok = hashlib.sha256(asm.data()).hexdigest().encode() == asm.sha
    if not ok:
        log.error("snapshot %s: its chunks do not match their SHA-256; not used", asm.snapshot_id)
    return ok


def load_newest(
    bootstrap: str,
    topic: str,
    region_id: int,
    partition: int = 0,
    retention: Retention | None = None,
    cluster_id: str | None = None,
) -> tuple[str, Region, Positions] | None:
    """The newest snapshot in a partition of the topic that reads back whole, falling back to
    older ones. Its positions are for cluster `cluster_id` (this one): a snapshot that says it
    was taken on another cluster (the topic was copied, the cluster rebuilt under a new id) is
    translated by seq (`streams.kafka.clusters`: no positions, every log read from its start,
    the ops its state covers dropped)."""
    for snapshot_id, data in read_complete(
        bootstrap, topic, partition=partition, retention=retention
    ):
        try:
            region, positions, meta = read_snapshot(io.BytesIO(data))
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
        return snapshot_id, region, positions
    return None
