"""Which logs a region has on a cluster: its `.local` topic, every op-log topic, the number of
shards, the origins' names and the region's id. What every verb finds out before it reads.

The shard count is the partition count of the region's `.local` topic: a database of S shards
creates every log with S partitions (shard s writes partition s) and the mirror copies partition
s to partition s, so every op-log topic on the cluster must have as many; one that does not is
refused (exit 3) rather than folded into the wrong shards.

Origins get their names from the topic their ops are read from (`r1.oplog`, MirrorMaker 2's
`A.r1.oplog`): the first record of each partition says which origin id writes it
(`streams.kafka.records.origin_names`). Without a topology file, these names are also what the
readers' record gate checks each op against (`Logs.trust`). The region's
own id comes from its `.local` records, else from its ops, else from a name of the form `r<N>`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.crdt import ops
from streams.kafka.records import Trust, origin_names
from streams.kafka.topics import LOCAL_SUFFIX
from streams.ops.codec import DecodeError
from streams.ops.pack import decode_all
from streams.replay import reader
from streams.replay.positions import PositionError
from streams.slots import shard_of

Partition = tuple[str, int]


@dataclass(frozen=True)
class Logs:
    bootstrap: str
    region_name: str
    region_id: int
    local: str
    """The region's `.local` topic."""
    oplogs: list[str]
    """Every op-log topic on the cluster (the region's own and the mirrored ones)."""
    shards: int
    names: dict[int, str] = field(default_factory=dict)
    """origin id -> region name, for every origin whose ops these logs hold."""
    cluster_id: str | None = None
    """The cluster's id (`streams.kafka.clusters`): the positions read here are its offsets."""

    def trust(self, topology: Trust | None = None) -> Trust:
        """What the readers check records against: the topology file's regions and keys when
        one was given, else the regions learned from the logs (`streams.kafka.records`)."""
        return topology if topology is not None else Trust(dict(self.names), learned=True)

    @property
    def topics(self) -> list[str]:
        """What a replay reads, in the order it reads them: `.local` first."""
        return [self.local, *self.oplogs]

    @property
    def ids(self) -> dict[str, int]:
        return {name: rid for rid, name in self.names.items()}

    def shards_for(self, shard: int | None = None, key: bytes | None = None) -> list[int]:
        """The shards a verb reads: `shard` (`--shard N`), else the shard holding `key`, else
        all of them."""
        if shard is not None:
            if not 0 <= shard < self.shards:
                raise PositionError(
                    f"--shard {shard}: region {self.region_name} has {self.shards} shard(s) "
                    f"(0..{self.shards - 1})"
                )
            if key is not None and shard_of(key, self.shards) != shard:
                raise PositionError(
                    f"--shard {shard}: key {key.decode('utf-8', 'replace')!r} lives in shard "
                    f"{shard_of(key, self.shards)}"
                )
            return [shard]
        if key is not None:
            return [shard_of(key, self.shards)]
        return list(range(self.shards))


def find_local(bootstrap: str, topics: list[str], region: str | None) -> str:
    """The region's `.local` topic: the named region's, else the only one on the cluster."""
    locals_ = reader.local_topics(topics)
    if region is not None:
        local = f"{region}{LOCAL_SUFFIX}"
        if local not in topics:
            have = ", ".join(t.removesuffix(LOCAL_SUFFIX) for t in locals_) or "none"
            raise PositionError(
                f"no topic {local} on {bootstrap}: this cluster holds the local log of {have}"
            )
        return local
    if len(locals_) == 1:
        return locals_[0]
    raise PositionError(
        f"{bootstrap} holds {len(locals_)} region-local logs ({', '.join(locals_)}): "
        "name the region with --region"
    )


def discover(bootstrap: str, region: str | None = None) -> Logs:
    counts, cluster_id = reader.describe(bootstrap)
    topics = list(counts)
    local = find_local(bootstrap, topics, region)
    region_name = local.removesuffix(LOCAL_SUFFIX)
    shards = counts[local]
    oplogs = reader.oplog_topics(topics)
    for topic in oplogs:
        if counts[topic] != shards:
            raise PositionError(
                f"{topic} on {bootstrap} has {counts[topic]} partition(s) but {local} has "
                f"{shards}: every log of a database has one partition per shard"
            )
    parts = [(t, p) for t in [*oplogs, local] for p in range(shards)]
    first = sorted(reader.first_records(bootstrap, parts).items())
    names = origin_names((topic, raw.value) for (topic, _p), raw in first)
    region_id: int | None = None
    for (topic, _p), raw in first:
        if topic != local:
            continue
        try:
            record = decode_all(raw.value)[0]
        except DecodeError:
            continue  # reported where it is read for real
        if isinstance(record, ops.LocalOp):
            region_id = record.region
    if region_id is None:
        region_id = {name: rid for rid, name in names.items()}.get(region_name)
    if region_id is None and region_name.startswith("r") and region_name[1:].isdigit():
        region_id = int(region_name[1:])
    if region_id is None:
        region_id = 0  # the region never wrote: its id matters for nothing replayed
    names.setdefault(region_id, region_name)
    return Logs(bootstrap, region_name, region_id, local, oplogs, shards, names, cluster_id)
