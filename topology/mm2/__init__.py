"""MirrorMaker 2 configuration for a topology (the docker-compose replication path).

The embedded topology replicates with `topology.mirror`; on Apache Kafka the same job is done by
MirrorMaker 2 (`connect-mirror-maker.sh`). Generating its properties from the topology file keeps
the two paths agreeing on what moves where: each cluster sends exactly the op logs of the regions
it hosts (`<region>.oplog`, never `.local`, never a topic that is itself a mirrored copy) to every
other cluster, under the identity or the default naming policy.

The Java clients' defaults are made for records of 1 MiB: a producer refuses a larger record
(`max.request.size`, and `buffer.memory` must hold it), so a task that meets one stops for good.
`SIZES` gives every client MirrorMaker runs the room the largest op record needs, the number the
region nodes create their topics with (`streams.kafka.sizes.TOPIC_MAX_MESSAGE_BYTES`).
"""

from __future__ import annotations

from pathlib import Path

from streams.config import Topology
from streams.kafka.sizes import TOPIC_MAX_MESSAGE_BYTES
from streams.kafka.topics import NAMINGS, oplog_topic
from topology.mm2.security import PROVIDERS, java_properties

HERE = Path(__file__).resolve().parent
EXAMPLE_TOPOLOGY = HERE / "topology.toml"
POLICIES = {
    "identity": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
    "default": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
}


SIZES = {
    "producer.max.request.size": TOPIC_MAX_MESSAGE_BYTES,
    "producer.buffer.memory": 2 * TOPIC_MAX_MESSAGE_BYTES,
    "consumer.max.partition.fetch.bytes": TOPIC_MAX_MESSAGE_BYTES,
    "consumer.fetch.max.bytes": TOPIC_MAX_MESSAGE_BYTES,
}
"""Per cluster alias (`A.producer.max.request.size = ...`): the producer that writes the copies
takes the largest op record and holds two; the consumer that reads the source fetches one
whole (Kafka returns a record larger than the fetch limits anyway, but sized so nothing waits)."""


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


MM2_TRANSACTION_TIMEOUT_MS = 10_000
"""How long a dead MirrorMaker's open transaction holds read_committed readers of the target."""


def _security_lines(topology: Topology) -> list[str]:
    """Each cluster's `[region.kafka]` as Java properties (`topology.mm2.security`), with the
    config providers that read key files and passwords when MirrorMaker starts."""
    per_alias: dict[str, dict[str, str]] = {}
    for region in topology.regions:
        per_alias.setdefault(region.alias, region.kafka)
    if not any(per_alias.values()):
        return []
    lines = [
        "",
        "# Security per cluster, from the topology file's [region.kafka] tables: key files and",
        "# passwords are read when MirrorMaker starts (${dir:...}, ${env:...}), not copied here.",
        *PROVIDERS,
    ]
    for alias, settings in per_alias.items():
        java, left_out = java_properties(settings)
        lines += [f"{alias}.{key} = {value}" for key, value in java.items()]
        if left_out:
            lines.append(f"# {alias}: librdkafka-only, not translated: {', '.join(left_out)}")
    return lines


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
    lines += _security_lines(topology)
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
        "# Record sizes: an op record may be 64 MiB (a Redis value of 10 MB and more); the Java",
        "# clients' defaults stop at 1 MiB, and a task that meets a larger record stops for good.",
        "# The producer writing the copies takes the topics' max.message.bytes and buffers two;",
        "# the consumer reading the source fetches one whole.",
    ]
    for alias in aliases:
        lines += [f"{alias}.{key} = {value}" for key, value in SIZES.items()]
    lines += [
        "",
        "# Skip what region nodes do not use: they read with assign(), not consumer groups.",
        "# MirrorMaker 2 still creates its own topics on each cluster (heartbeats,",
        "# mm2-offset-syncs.<alias>.internal, mm2-offsets/status/configs.<alias>.internal; no",
        "# checkpoints topic while checkpoints are off) and copies every heartbeats topic",
        "# whatever the topics filter (<alias>.heartbeats under the identity policy); region",
        "# nodes read only topics ending in .oplog, so these are ignored. With checkpoints off it",
        "# logs 'Failed to configure MirrorCheckpointConnector' once per flow at start: harmless.",
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
        "# copies at the next refresh; topic configs follow the source's: a copy is created with",
        "# them and kept in step, so it keeps everything (retention.ms = -1) and takes the",
        "# largest record (max.message.bytes) as the op log it copies. (min.insync.replicas is",
        "# never copied by MirrorMaker 2: the target broker's default applies to the copies.)",
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
        "# Kafka 4's clients rebootstrap when no broker they know answers (KIP-899, KIP-1102);",
        "# MirrorMaker 2's clients did so in a loop while a cluster was down (measured: 2,461",
        "# 'Rebootstrapping' log lines in 20 s of one broker down, growing; 25 with this), and",
        "# without end on addresses a cluster no longer had. Retry the known brokers with the",
        "# reconnect backoff instead (the behaviour before Kafka 4): worker, admin, consumer and",
        "# producer clients of every cluster.",
    ]
    for alias in aliases:
        lines.append(f"{alias}.metadata.recovery.strategy = none")
        for client in ("admin", "consumer", "producer"):
            lines.append(f"{alias}.{client}.metadata.recovery.strategy = none")
    lines += [
        "",
        "# The copies are written compressed as the op logs are ([topology] compression):",
        "# fewer bytes on the link between regions and on the target's disk.",
    ]
    for alias in aliases:
        lines.append(f"{alias}.producer.compression.type = {topology.compression}")
    lines += [
        "",
        "# Exactly once (KIP-618): each flow's copies and its source offsets commit in one",
        "# transaction on the target, so a restarted MirrorMaker copies nothing twice (without",
        "# it, everything since the last offset flush comes again: nodes drop such duplicates by",
        "# dot, but they cost). MirrorMaker's transactions follow its own poll batches, not the",
        "# source's (KAFKA-14021): the nodes apply another region's transaction whole however it",
        "# arrives (op packs say where it ends). Several MirrorMaker processes serving the",
        "# same flows also need `dedicated.mode.enable.internal.rest = true` and a `listeners`",
        "# URL each; one process (this file's use) does not.",
    ]
    for alias in aliases:
        lines.append(f"{alias}.exactly.once.source.support = enabled")
    lines += [
        "",
        "# A MirrorMaker killed inside a transaction leaves it open on the target until the broker",
        "# aborts it (the producer's transaction.timeout.ms, 60 s by default), and read_committed",
        "# readers stop there: the nodes, and the restarted MirrorMaker's own read of its offsets",
        "# topic, which it finishes before its tasks start (measured: copying resumed 64 s after",
        "# a restart under load). Its transactions last one poll batch (milliseconds).",
    ]
    for alias in aliases:
        lines.append(f"{alias}.producer.transaction.timeout.ms = {MM2_TRANSACTION_TIMEOUT_MS}")
    lines += [
        "",
        "# Find Connect's plugins from their ServiceLoader manifests instead of scanning every",
        "# jar: MirrorMaker starts in about 2 s instead of 20-30 s, with 300 MB less memory.",
        "plugin.discovery = service_load",
    ]
    lines += [f"{alias}.plugin.discovery = service_load" for alias in aliases]
    lines += [
        "",
        "# A MirrorMaker started again after a crash joins under a new worker id; Connect would",
        "# keep the dead worker's tasks unassigned for 5 minutes in case it returns (measured:",
        "# 70 s to copy again). With one MirrorMaker process nothing else can take them.",
    ]
    lines += [f"{alias}.scheduled.rebalance.max.delay.ms = 0" for alias in aliases]
    factor = topology.replication_factor or 1
    why = (
        "[topology] replication_factor"
        if topology.replication_factor
        else "1: [topology] replication_factor is not set (one broker per cluster)"
    )
    lines += [
        "",
        "# One task per flow copies every partition of its op logs, each in order; tasks.max up",
        "# to the shard count copies the partitions in parallel.",
        "tasks.max = 1",
        f"# Replicas of the copies and of MirrorMaker's own topics: {why}.",
        f"replication.factor = {factor}",
        f"checkpoints.topic.replication.factor = {factor}",
        f"heartbeats.topic.replication.factor = {factor}",
        f"offset-syncs.topic.replication.factor = {factor}",
        f"offset.storage.replication.factor = {factor}",
        f"status.storage.replication.factor = {factor}",
        f"config.storage.replication.factor = {factor}",
    ]
    return "\n".join(lines) + "\n"
