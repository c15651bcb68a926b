"""The snapshot files a joining region's node boots from (issue 37, part C): a peer region's
snapshot of each shard, its local part dropped and its region id replaced
(`streams.crdt.join.joining_region`), written with no positions.

Why no positions: a snapshot's offsets are the peer's cluster's (`streams.kafka.clusters`); on the
new region's cluster the logs' copies sit at other offsets. So the new node reads every op log on
its cluster from its beginning and its fold drops every op the state already covers, by seq:
exact, at the cost of reading the copies in full. This needs the copies to reach back to the
logs' beginnings: the mirror copies each region's home log onto the new cluster from the first
record the home log still holds, so once a retention policy deleted records there
(`streams retention apply`), the copies start later and the node refuses to fold
(`streams.kafka.retention.LogTruncated`, naming the log) instead of serving a state with ops
missing. Translating the peer's positions to the new cluster's copies (by the `mirror.offset`
headers, or by seq) is not built, so a region joins a topology whose logs were truncated only
once that exists (docs/architecture.md, "Retention and new regions"). On the light stack (Tansu,
no DeleteRecords) the logs are never truncated.

The peer's snapshot is one it took after every running node counted the new region
(`topology.join`), so no tombstone the new region could still need had been collected in it.
"""

from __future__ import annotations

import io
from pathlib import Path

from streams.config import RegionConfig
from streams.crdt.join import joining_region
from streams.ids import IdMode
from streams.kafka import clusters
from streams.kafka.snapshot_chunks import read_complete
from streams.kafka.topics import snapshot_topic
from streams.snapshot import read_snapshot, write_snapshot

JOINED_FROM = "joined_from"
"""Snapshot meta: the peer region (and its snapshot id) a joining region's seed was made from."""


def write_seeds(
    peer: RegionConfig,
    taken: dict[int, str],
    region: RegionConfig,
    out_dir: Path,
    timeout: float = 60.0,
) -> list[Path]:
    """Per shard of `taken` (shard -> the id of the snapshot the peer took for the join), the
    seed file of `region`, written under `out_dir`. A snapshot newer than the one named serves
    too (the peer took it later still). ValueError when the peer's snapshot topic holds neither."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
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
        files.append(path)
    return files
