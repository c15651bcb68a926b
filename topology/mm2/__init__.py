"""MirrorMaker 2 configuration for a topology (the docker-compose replication path).

The embedded topology replicates with `topology.mirror`; on Apache Kafka the same job is done by
MirrorMaker 2 (`connect-mirror-maker.sh`). Generating its properties from the topology file keeps
the two paths agreeing on what moves where: each cluster sends exactly the op logs of the regions
it hosts (`<region>.oplog`, never `.local`, never a topic that is itself a mirrored copy) to every
other cluster, under the identity or the default naming policy.
"""

from __future__ import annotations

from pathlib import Path

from topology.config import Topology
from topology.topics import NAMINGS, oplog_topic

HERE = Path(__file__).resolve().parent
EXAMPLE_TOPOLOGY = HERE / "topology.toml"
POLICIES = {
    "identity": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
    "default": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
}


def properties_path(naming: str) -> Path:
    """Where the checked-in config for `naming` lives (`topology/mm2/<naming>/...`)."""
    return HERE / naming / "connect-mirror-maker.properties"


def _topic_regex(topic: str) -> str:
    # A Java regex matching exactly `topic`, written for a .properties file: the regex needs `\.`
    # and a properties file turns `\\` into `\` (a lone `\.` would lose its backslash).
    return topic.replace(".", "\\\\.")


def _shards(topology: Topology) -> str:
    count = topology.shards
    return "one shard: one partition" if count == 1 else f"{count} shards: {count} partitions"


def render(topology: Topology, naming: str | None = None) -> str:
    """The connect-mirror-maker.properties text for `topology` (naming defaults to its own)."""
    naming = naming or topology.mirror_naming
    if naming not in NAMINGS:
        raise ValueError(f"unknown naming {naming!r}: expected one of {', '.join(NAMINGS)}")
    clusters: dict[str, tuple[str, list[str]]] = {}
    for region in topology.regions:
        bootstrap, homed = clusters.setdefault(region.alias, (region.bootstrap, []))
        homed.append(region.name)
    aliases = list(clusters)
    lines = [
        "# MirrorMaker 2 (dedicated mode): connect-mirror-maker.sh connect-mirror-maker.properties",
        "# Generated from a topology file by `python -m topology.mm2` (topology/mm2/README.md):",
        "# edit the topology file and regenerate rather than editing this file.",
        "",
        f"clusters = {', '.join(aliases)}",
    ]
    for alias, (bootstrap, _) in clusters.items():
        lines.append(f"{alias}.bootstrap.servers = {bootstrap}")
    lines += [
        "",
        f"# Topic naming: {naming}"
        + (
            " (the mirrored topic keeps its name: r1.oplog)"
            if naming == "identity"
            else " (<source alias>.<topic>: A.r1.oplog)"
        ),
        f"replication.policy.class = {POLICIES[naming]}",
    ]
    if naming == "default":
        lines.append("replication.policy.separator = .")
    lines += [
        "",
        "# Every cluster sends the op logs of the regions it hosts, and only those, to every other",
        "# cluster: never <region>.local, never a mirrored copy (that would loop records around).",
    ]
    for source, (_, homed) in clusters.items():
        topics = ", ".join(_topic_regex(oplog_topic(name)) for name in homed)
        for target in aliases:
            if target == source:
                continue
            lines.append(f"{source}->{target}.enabled = true")
            lines.append(f"{source}->{target}.topics = {topics}")
    lines += [
        "",
        "# Skip what region nodes do not use: they read with assign(), not consumer groups.",
        "emit.checkpoints.enabled = false",
        "sync.group.offsets.enabled = false",
        "emit.heartbeats.enabled = false",
        "sync.topic.acls.enabled = false",
        "",
        "# Op-log topics appear when a region node first starts: look for new ones often",
        "# (the default is every 10 minutes).",
        "refresh.topics.enabled = true",
        "refresh.topics.interval.seconds = 5",
        "",
        f"# Shards: partition s of every op log is shard s ({_shards(topology)}). A remote topic",
        "# is created with its source's partition count, each record goes to the partition",
        "# number it had at the source, and a partition added at the source is added to the",
        "# copies at the next refresh; topic configs (retention, ...) follow the source's.",
        "sync.topic.configs.enabled = true",
        "",
        "# Read committed data only (region nodes write in transactions); write idempotently.",
    ]
    for alias in aliases:
        lines.append(f"{alias}.consumer.isolation.level = read_committed")
    for alias in aliases:
        lines.append(f"{alias}.producer.enable.idempotence = true")
        lines.append(f"{alias}.producer.acks = all")
    lines += [
        "",
        "# One task per flow copies every partition of its op logs, each in order; tasks.max up",
        "# to the shard count copies the partitions in parallel. One broker per cluster.",
        "tasks.max = 1",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        "config.storage.replication.factor = 1",
    ]
    return "\n".join(lines) + "\n"
