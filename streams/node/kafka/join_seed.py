"""The snapshot files a joining region's node boots from (issue 37, part C): a peer region's
snapshot of each shard, its local part dropped and its region id replaced
(`streams.crdt.join.joining_region`), written with no positions.

Why no positions: a snapshot's offsets are the peer's cluster's (`streams.kafka.clusters`); on the
new region's cluster the logs' copies sit at other offsets. So the new node reads every op log on
its cluster from its first record held and its fold drops every op the state already covers, by
seq: exact, at the cost of reading the copies in full.

Logs a retention policy truncated (`streams retention apply`): the embedded mirror copies a home
log onto an empty cluster from source offset 0, which a truncated log no longer has (the flow
fails: OFFSET_OUT_OF_RANGE). For a joining cluster it starts at each home log's first record
held instead (`topology.mirror.clients.Route.from_log_start`). That is exact: the retention rule
deletes a home-log record only once every other region's oldest kept snapshot applied it, and
the origin's own log only below its own oldest kept snapshot's position, so the peer's snapshot
taken for the join covers every op deleted. The new node checks it anyway: the first op of each
log it reads from the first record held must follow on from the seed's vector, else it stops,
naming the log (`streams.node.kafka.materializer.Materializer._check_follows`). Over MirrorMaker
2 (whose start on a truncated log was not tried) and through `streams region add` (the operator
starts the mirrors) the join is refused while any home log is truncated (`truncated_logs`).

The peer's snapshot is one it took after every running node counted the new region
(`topology.join`), so no tombstone the new region could still need had been collected in it.
"""

from __future__ import annotations

import io
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams.config import RegionConfig
from streams.crdt.join import joining_region
from streams.ids import IdMode
from streams.kafka import clusters
from streams.kafka.reading import consumer_config
from streams.kafka.snapshot_chunks import read_complete
from streams.kafka.topics import oplog_topic, snapshot_topic
from streams.snapshot import read_snapshot, write_snapshot

JOINED_FROM = "joined_from"
"""Snapshot meta: the peer region (and its snapshot id) a joining region's seed was made from."""


def write_seeds(
    peer: RegionConfig,
    taken: dict[int, str],
    region: RegionConfig,
    out_dir: Path,
    timeout: float = 60.0,
) -> dict[int, Path]:
    """Per shard of `taken` (shard -> the id of the snapshot the peer took for the join), the
    seed file of `region`, written under `out_dir`. A snapshot newer than the one named serves
    too (the peer took it later still). ValueError when the peer's snapshot topic holds neither."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[int, Path] = {}
    for shard, wanted in sorted(taken.items()):
        found = read_complete(
            peer.bootstrap, snapshot_topic(peer.name), partition=shard, timeout=timeout
        )
        if not found:
            raise ValueError(
                f"{snapshot_topic(peer.name)} partition {shard} holds no complete snapshot (the"
                f" one taken for the join was {wanted})"
            )
        chosen = next(((i, d) for i, d in found if i == wanted), found[0])
        state, _positions, meta = read_snapshot(io.BytesIO(chosen[1]))
        seed = joining_region(state, region.id, IdMode.parse(region.id_mode))
        kept = {k: v for k, v in meta.items() if k != clusters.SNAPSHOT_META}
        kept[JOINED_FROM] = f"{peer.name} {chosen[0]}"
        kept["shard"] = str(shard)
        path = out_dir / f"{region.name}-join-shard{shard}.snapshot"
        with open(path, "wb") as fp:
            write_snapshot(seed, {}, fp, region_name=region.name, meta=kept)
        files[shard] = path
    return files


def truncated_logs(regions: list[RegionConfig], shards: int, timeout: float = 10.0) -> list[str]:
    """The home op logs (on their own clusters: the one place mirrors copy from) whose start a
    retention policy moved past offset 0, described; a region cannot join while any is (see the
    module docstring): the mirror copies a log onto the new cluster from offset 0.
    ConnectionError when a cluster does not answer."""
    found = []
    for region in regions:
        topic = oplog_topic(region.name)
        consumer = Consumer(consumer_config(region.bootstrap, "streams-join-check", 100))
        try:
            for p in range(shards):
                try:
                    low, _high = consumer.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=timeout, cached=False
                    )
                except KafkaException as exc:
                    raise ConnectionError(f"{topic} on {region.bootstrap}: {exc}") from None
                if low > 0:
                    found.append(f"{topic} partition {p} starts at offset {low}")
        finally:
            consumer.close()
    return found


def truncation_refusal(found: list[str], here: str) -> str:
    return (
        "the retention policy deleted records from home op logs: "
        + "; ".join(found)
        + " (a region joins over truncated logs only by LocalTopology.add_region with the"
        f" embedded mirror, which fills the new cluster from each log's first record held; not"
        f" {here})"
    )
