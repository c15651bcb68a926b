"""Applying the retention policy (`[retention]`, `streams.config.retention`) to every op log of a
topology: `streams retention apply`, `LocalTopology.apply_retention()`.

For each region's cluster and shard it reads the region's kept snapshots (`<region>.snapshot`,
partition s: the newest `snapshots` complete ones; only the oldest one's header matters), then
for every op log on that cluster (`*.oplog`, copies included, and the region's `.local`)
computes how far records may go with the pure rule (`streams.kafka.retention`) and deletes them
with Kafka's DeleteRecords. The home `.oplog` is also held back by the other regions' kept
snapshots (what they applied of it, by seq: read from the log's start up to the cut).

Why a command rather than a broker setting: Kafka's `retention.ms` / `retention.bytes` know
nothing of snapshots and would delete records no snapshot covers. Why DeleteRecords: it moves
the partition's start (log start offset) exactly where asked, and a reader asking for an offset
before it fails loudly (`streams.kafka.retention.reaches`) instead of reading a gap.

A broker that does not implement DeleteRecords (the embedded Tansu) is reported once per run
and keeps everything.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.config import RegionConfig, Topology
from streams.config.retention import RetentionPolicy
from streams.crdt.ops import Op
from streams.kafka import clusters, retention
from streams.kafka.reading import consumer_config
from streams.kafka.snapshot_chunks import read_complete
from streams.kafka.topics import (
    cluster_id_of,
    is_oplog_topic,
    local_topic,
    oplog_topic,
    snapshot_topic,
)
from streams.ops.codec import DecodeError
from streams.ops.pack import decode_all
from streams.snapshot import SnapshotError, SnapshotHeader, read_header

log = logging.getLogger(__name__)

TIMEOUT_S = 15.0
UNKNOWN_SEQ = 2**63
"""The seq taken for a record that does not decode: higher than any, so it is kept."""


@dataclass
class Trim:
    """One partition's outcome: `cut` is the new start (None: nothing deleted) and `why` what
    held it (or why nothing went)."""

    region: str
    topic: str
    partition: int
    low: int
    high: int
    cut: int | None
    why: str

    def text(self) -> str:
        where = f"{self.region}: {self.topic}[{self.partition}]"
        if self.cut is None:
            return f"{where} kept from {self.low} (end {self.high}): {self.why}"
        return f"{where} records {self.low}..{self.cut - 1} deleted (end {self.high}): {self.why}"


@dataclass
class Report:
    trims: list[Trim] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    """Regions whose broker does not implement DeleteRecords (nothing deleted there)."""

    @property
    def deleted(self) -> int:
        return sum(t.cut - t.low for t in self.trims if t.cut is not None)


def anchors(topology: Topology, policy: RetentionPolicy) -> dict[tuple[str, int], SnapshotHeader]:
    """Per (region, shard): the header of the oldest snapshot the policy keeps, if it is usable
    (of this region, its positions of this cluster)."""
    out: dict[tuple[str, int], SnapshotHeader] = {}
    for region in topology.regions:
        here = cluster_id_of(region.bootstrap, timeout=5.0)
        for shard in range(topology.shards):
            kept = read_complete(
                region.bootstrap,
                snapshot_topic(region.name),
                keep=policy.snapshots,
                partition=shard,
                timeout=60.0,
            )
            if not kept:
                continue
            snapshot_id, data = kept[-1]  # newest first: the last is the oldest kept
            try:
                header = read_header(io.BytesIO(data))
            except SnapshotError as exc:
                log.warning("%s shard %d: snapshot %s: %s", region.name, shard, snapshot_id, exc)
                continue
            taken_on = clusters.snapshot_cluster(header.meta)
            if header.region_id != region.id:
                continue
            if clusters.compare(taken_on, here) is clusters.Origin.OTHER:
                log.warning(
                    "%s shard %d: snapshot %s was taken on cluster %s: its positions are not"
                    " this cluster's; the logs are kept until a snapshot taken here is kept",
                    region.name,
                    shard,
                    snapshot_id,
                    taken_on,
                )
                continue
            out[(region.name, shard)] = header
    return out


def apply(topology: Topology, now_ms: int | None = None) -> Report:
    """Delete what the topology's retention policy lets go on every cluster (see the module
    docstring); raises ValueError when the topology has no `[retention]` table."""
    policy = topology.retention
    if policy is None:
        raise ValueError(
            "the topology has no [retention] table: nothing may be deleted from the op logs"
            " (add e.g. `[retention]` `snapshots = 3` `tail_seconds = 3600`)"
        )
    now = int(time.time() * 1000) if now_ms is None else now_ms
    kept = anchors(topology, policy)
    report = Report()
    for region in topology.regions:
        _apply_region(topology, region, policy, kept, now, report)
    return report


def _apply_region(
    topology: Topology,
    region: RegionConfig,
    policy: RetentionPolicy,
    kept: dict[tuple[str, int], SnapshotHeader],
    now_ms: int,
    report: Report,
) -> None:
    admin = AdminClient({"bootstrap.servers": region.bootstrap, "log_level": 3})
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    topics = sorted(
        name for name in metadata.topics if is_oplog_topic(name) or name == local_topic(region.name)
    )
    consumer = Consumer(consumer_config(region.bootstrap, "streams-retention", 100))
    others = [r for r in topology.regions if r.name != region.name]
    home = oplog_topic(region.name)
    cuts: dict[TopicPartition, Trim] = {}
    try:
        for topic in topics:
            for shard in sorted(metadata.topics[topic].partitions):
                tp = TopicPartition(topic, shard)
                low, high = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S, cached=False)
                header = kept.get((region.name, shard))
                trim = Trim(region.name, topic, shard, low, high, None, "")
                anchor = header.positions.get((topic, shard)) if header is not None else None
                if anchor is None:
                    trim.why = (
                        "no kept snapshot of this shard"
                        if header is None
                        else "the oldest kept snapshot does not cover this log"
                    )
                    report.trims.append(trim)
                    continue
                bounds: list[int | None] = [anchor]
                why = f"oldest kept snapshot covers to {anchor}"
                if policy.tail_seconds > 0:
                    tail = _tail_start(consumer, tp, now_ms - policy.tail_seconds * 1000, high)
                    bounds.append(tail)
                    why += f", {policy.tail_seconds} s tail starts at {tail}"
                if topic == home and others:
                    vectors = [
                        h.vector if (h := kept.get((o.name, shard))) is not None else None
                        for o in others
                    ]
                    seq = retention.copied_seq(vectors, region.id)
                    limit = min(b for b in bounds if b is not None)
                    past = retention.first_offset_past(
                        _highest_seqs(consumer, tp, low, limit, region.id), seq
                    )
                    bounds.append(limit if past is None else past)
                    why += f", every other region's kept snapshot applied seq {seq}"
                trim.cut = retention.cut(low, bounds)
                trim.why = why
                report.trims.append(trim)
                if trim.cut is not None:
                    cuts[TopicPartition(topic, shard, trim.cut)] = trim
    finally:
        consumer.close()
    if cuts:
        _delete(admin, region.name, cuts, report)


def _tail_start(consumer: Consumer, tp: TopicPartition, since_ms: int, high: int) -> int:
    """The first offset written at or after `since_ms` (the end when none is)."""
    found = consumer.offsets_for_times(
        [TopicPartition(tp.topic, tp.partition, since_ms)], timeout=TIMEOUT_S
    )
    offset = found[0].offset
    return high if offset < 0 else offset


def _highest_seqs(
    consumer: Consumer, tp: TopicPartition, start: int, stop: int, origin: int
) -> Iterator[tuple[int, int]]:
    """(offset, highest seq of `origin` in the record) for the records of `tp` in
    [start, stop), in order (transaction markers have no record)."""
    if start >= stop:
        return
    consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
    deadline = time.monotonic() + 60.0
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return
                continue
            offset = msg.offset() or 0
            if offset >= stop:
                return
            try:
                seqs = [r.seq for r in decode_all(msg.value()) if isinstance(r, Op)]
            except DecodeError:  # what it holds is unknown: nothing from here on may go
                yield offset, UNKNOWN_SEQ
                return
            yield offset, max(seqs, default=0)
        raise TimeoutError(f"reading {tp.topic}[{tp.partition}] from {start} to {stop} timed out")
    finally:
        consumer.unassign()


def _delete(
    admin: AdminClient, region: str, cuts: dict[TopicPartition, Trim], report: Report
) -> None:
    try:
        futures = admin.delete_records(list(cuts), request_timeout=TIMEOUT_S)
        for future in futures.values():
            future.result(timeout=TIMEOUT_S)
    except (KafkaException, TimeoutError) as exc:
        error = exc.args[0] if exc.args else None
        code = error.code() if isinstance(error, KafkaError) else None
        unsupported = code in (
            KafkaError._TRANSPORT,
            KafkaError.UNSUPPORTED_VERSION,
            KafkaError.INVALID_REQUEST,
        )
        for trim in cuts.values():
            trim.why += f"; not deleted: {exc}"
            trim.cut = None
        if unsupported:
            report.unsupported.append(region)
            log.warning(
                "%s: the broker does not support DeleteRecords (%s): its op logs keep every record",
                region,
                exc,
            )
            return
        raise
