"""Topic names and topic creation, in one place.

Every part of the system (region node, materializer, mirror, replay tools, MirrorMaker 2 configs)
derives topic names from these functions, so a naming change cannot leave one of them behind.

Topics are always created explicitly, with one partition per shard of the database (one partition
when it is not sharded): partition s of `<region>.oplog`, `<region>.local` and `<region>.snapshot`
is shard s's totally ordered log (DESIGN.md section 13), and a mirror copies partition s to
partition s. A topic that a producer auto-creates gets the broker's default partition count
(several on Tansu), which would scatter a shard's ops across partitions; and a topic created for
another shard count would send a key's ops to another shard's partition. So the partition count is
checked whenever a topic is ensured, and the shard count is fixed once the topics exist.

Topics are also created with the configs their role needs (`topic_configs`), since a broker's
defaults are made for other data: Kafka deletes records after 7 days (`retention.ms`) and refuses
batches over about 1 MiB (`max.message.bytes`). Op logs, local logs, snapshot and writer topics
keep everything (`retention.ms=-1`, `retention.bytes=-1`, `cleanup.policy=delete`: compaction
by key would drop ops of the same stream); op and local logs take the largest op record
(`streams.kafka.sizes.TOPIC_MAX_MESSAGE_BYTES`); snapshot chunks are small enough for any broker's
default, and the node bounds that topic itself (keeps the newest snapshots, DeleteRecords before
them). Replication factor and `min.insync.replicas` come from the topology file, else the
broker's defaults. A topic that exists with configs that would lose data (finite retention or
compaction on an op log) is refused at start, naming the setting: a node that trusted it would
later replay a truncated log and diverge from the other regions for good.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.cimpl import NewTopic

from streams.kafka import security
from streams.kafka.sizes import TOPIC_MAX_MESSAGE_BYTES
from streams.kafka.tls_check import wait_for_tls

OPLOG_SUFFIX = ".oplog"
LOCAL_SUFFIX = ".local"
SNAPSHOT_SUFFIX = ".snapshot"
WRITERS_SUFFIX = ".writers"
NAMINGS = ("identity", "default")
_kafka_log = logging.getLogger("streams.kafka.topics.kafka")
_log = logging.getLogger(__name__)


class TopicError(RuntimeError):
    """A topic could not be created or does not have the shape an op log needs."""


def oplog_topic(region_name: str) -> str:
    """The replicated op log of a region: `r1` -> `r1.oplog`."""
    return f"{region_name}{OPLOG_SUFFIX}"


def local_topic(region_name: str) -> str:
    """The region-local op log (never mirrored): `r1` -> `r1.local`."""
    return f"{region_name}{LOCAL_SUFFIX}"


def snapshot_topic(region_name: str) -> str:
    """Where a region's node keeps its snapshots (chunked; never mirrored): `r1.snapshot`."""
    return f"{region_name}{SNAPSHOT_SUFFIX}"


def writers_topic(region_name: str) -> str:
    """Where a region's nodes announce themselves as their shards' writers (never mirrored):
    `r1.writers` (`streams.node.kafka.presence`)."""
    return f"{region_name}{WRITERS_SUFFIX}"


def mirrored_name(topic: str, source_alias: str, naming: str) -> str:
    """The name a mirror gives `topic` on the target cluster.

    `identity` keeps the name (MirrorMaker 2's IdentityReplicationPolicy); `default` prefixes the
    source cluster alias (DefaultReplicationPolicy: `A.r1.oplog`). Both end in `.oplog`, so a
    materializer finds every op log on its cluster by suffix and takes the origin from the record.
    """
    if naming == "identity":
        return topic
    if naming == "default":
        return f"{source_alias}.{topic}"
    raise ValueError(f"unknown mirror naming {naming!r}: expected one of {', '.join(NAMINGS)}")


def is_oplog_topic(name: str) -> bool:
    """True for a region's op log and for its mirrored copies under either naming."""
    return name.endswith(OPLOG_SUFFIX)


@dataclass(frozen=True)
class Replication:
    """Replicas per partition and `min.insync.replicas` of the topics a node creates (the
    topology file's `[topology] replication_factor` / `min_insync_replicas`); None: the
    broker's default (`default.replication.factor`, `min.insync.replicas`)."""

    factor: int | None = None
    min_insync: int | None = None


KEEP_EVERYTHING = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
"""What every topic of a region keeps: all of it, until the system itself truncates it."""

LOSSLESS = {"retention.ms": "-1", "retention.bytes": "-1"}
"""The settings an existing op log or local log must have (else it is refused at start)."""


def role_of(name: str) -> str | None:
    """`oplog` (a region's op log or a mirrored copy), `local`, `snapshot`, `writers`, or None
    for a topic of no region role."""
    for suffix in (OPLOG_SUFFIX, LOCAL_SUFFIX, SNAPSHOT_SUFFIX, WRITERS_SUFFIX):
        if name.endswith(suffix):
            return suffix[1:]
    return None


def topic_configs(name: str, replication: Replication = Replication()) -> dict[str, str]:
    """The topic configs `name` is created with, from its role (see the module docstring)."""
    role = role_of(name)
    configs: dict[str, str] = {} if role is None else dict(KEEP_EVERYTHING)
    if role in ("oplog", "local"):
        configs["max.message.bytes"] = str(TOPIC_MAX_MESSAGE_BYTES)
    if replication.min_insync is not None:
        configs["min.insync.replicas"] = str(replication.min_insync)
    return configs


def data_losing_settings(name: str, configs: dict[str, str]) -> list[str]:
    """The settings of an existing topic that would lose records an op log must keep
    (`retention.ms=604800000`, `cleanup.policy=compact`); empty when it is safe. A setting the
    broker does not report (Tansu reports only those set at creation) is not held against it."""
    if role_of(name) not in ("oplog", "local"):
        return []
    bad = [
        f"{key}={configs[key]}"
        for key, wanted in LOSSLESS.items()
        if key in configs and configs[key] != wanted
    ]
    policy = configs.get("cleanup.policy", "delete")
    if "compact" in policy:
        bad.append(f"cleanup.policy={policy}")
    return bad


def describe_topic_configs(
    bootstrap: str, names: Iterable[str], timeout: float = 30.0
) -> dict[str, dict[str, str]]:
    """The configs the broker reports for each of `names` (Tansu: only those set at creation;
    Kafka: all); raises TopicError when the broker cannot describe one."""
    config: dict[str, Any] = {
        **security.client_settings(bootstrap),
        "bootstrap.servers": bootstrap,
        "logger": _kafka_log,
    }
    return _describe(AdminClient(config), bootstrap, list(names), timeout)


def _describe(
    admin: AdminClient, bootstrap: str, names: list[str], timeout: float
) -> dict[str, dict[str, str]]:
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    try:
        futures = admin.describe_configs(resources, request_timeout=timeout)
    except KafkaException as exc:
        where = f"{', '.join(names)} on {bootstrap}"
        raise TopicError(f"cannot read the configs of {where}: {exc}") from exc
    described: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=timeout)
        except (KafkaException, TimeoutError) as exc:
            raise TopicError(
                f"cannot read the configs of topic {resource.name} on {bootstrap}: {exc}"
            ) from exc
        described[resource.name] = {
            key: entry.value for key, entry in entries.items() if entry.value is not None
        }
    return described


def record_limit(configs: dict[str, dict[str, str]], default: int) -> int:
    """The largest record batch every one of the described topics takes: the smallest
    `max.message.bytes` among them, else `default` (a topic that does not report it)."""
    limits = [default]
    for described in configs.values():
        value = described.get("max.message.bytes")
        if value is not None and value.lstrip("-").isdigit():
            limits.append(int(value))
    return min(limits)


def new_topics(names: Iterable[str], partitions: int, replication: Replication) -> list[NewTopic]:
    """The CreateTopics requests for `names`: replication factor -1 asks for the broker's
    default (KIP-464, Kafka 2.4+; Tansu accepts it too)."""
    factor = -1 if replication.factor is None else replication.factor
    return [
        NewTopic(name, partitions, factor, config=topic_configs(name, replication))
        for name in names
    ]


def ensure_topics(
    bootstrap: str,
    names: Iterable[str],
    timeout: float = 30.0,
    partitions: int = 1,
    replication: Replication = Replication(),
) -> list[str]:
    """Create the topics among `names` that do not exist yet, with `partitions` partitions (the
    database's shard count); return the ones this call created.

    Idempotent and safe to race with another creator (TOPIC_ALREADY_EXISTS counts as success).
    It returns only once the broker has acknowledged every creation, so a producer that runs next
    never auto-creates the topic with the wrong partition count. A topic that exists (before, or
    made by a racing creator) with another partition count raises `TopicError`: its records are
    laid out for another shard count, and reading or writing it as this one would mix shards.
    Each topic is created with `topic_configs` and `replication`; an existing op log or local
    log whose configs would lose data raises `TopicError` naming the setting.
    """
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions!r}")
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return []
    # Typed loosely: the stubs do not list `logger`, which keeps librdkafka's chatter in logging.
    config: dict[str, Any] = {
        **security.client_settings(bootstrap),
        "bootstrap.servers": bootstrap,
        "logger": _kafka_log,
    }
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout
    existing = _partition_counts(admin, bootstrap, timeout)
    _check_partitions(existing, bootstrap, wanted, partitions)
    present = [name for name in wanted if name in existing]
    _check_lossless(admin, bootstrap, present, timeout)
    missing = [name for name in wanted if name not in existing]
    if not missing:
        return []
    remaining = max(1.0, deadline - time.monotonic())
    futures = admin.create_topics(
        new_topics(missing, partitions, replication),
        request_timeout=remaining,
        operation_timeout=remaining,
    )
    created: list[str] = []
    raced: list[str] = []
    for name, future in futures.items():
        try:
            future.result(timeout=max(1.0, deadline - time.monotonic()))
            created.append(name)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                raced.append(name)
                continue
            raise TopicError(f"cannot create topic {name} on {bootstrap}: {exc}") from exc
        except TimeoutError as exc:
            raise TopicError(
                f"creating topic {name} on {bootstrap} did not complete in {timeout}s"
            ) from exc
    if raced:  # another creator won: its partition count must be ours as well
        existing = _partition_counts(admin, bootstrap, max(1.0, deadline - time.monotonic()))
        _check_partitions(existing, bootstrap, raced, partitions)
        _check_lossless(admin, bootstrap, raced, timeout)
    return created


def _check_lossless(admin: AdminClient, bootstrap: str, names: list[str], timeout: float) -> None:
    """Refuse the first existing op log or local log whose configs would lose records. A broker
    that will not describe them (no DescribeConfigs right for this principal) is warned about,
    not refused: what cannot be read is not known to lose data."""
    logs = [name for name in names if role_of(name) in ("oplog", "local")]
    try:
        described = _describe(admin, bootstrap, logs, timeout)
    except TopicError as exc:
        _log.warning("%s; their retention is not checked: it must be retention.ms=-1", exc)
        return
    for name, configs in described.items():
        bad = data_losing_settings(name, configs)
        if bad:
            raise TopicError(
                f"topic {name} on {bootstrap} has {', '.join(bad)}: the broker would delete"
                " op-log records that nodes replay and other regions have not all covered by a"
                f" snapshot; set {', '.join(f'{k}={v}' for k, v in LOSSLESS.items())} and"
                " cleanup.policy=delete on it (kafka-configs.sh --alter --entity-type topics"
                f" --entity-name {name} --add-config ...), see docs/kafka.md"
            )


def cluster_id_of(bootstrap: str, timeout: float = 30.0) -> str | None:
    """The Kafka cluster's id, as its metadata reports it (None when the broker names none):
    what every stored position is tied to (`streams.kafka.clusters`)."""
    try:
        wait_for_tls(bootstrap, timeout)  # a certificate problem now, in one line
    except ConnectionError as exc:
        raise TopicError(str(exc)) from None
    config: dict[str, Any] = {
        **security.client_settings(bootstrap),
        "bootstrap.servers": bootstrap,
        "logger": _kafka_log,
    }
    try:
        metadata = AdminClient(config).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise TopicError(f"cannot read the cluster id of {bootstrap}: {exc}") from exc
    return metadata.cluster_id or None


def _partition_counts(admin: AdminClient, bootstrap: str, timeout: float) -> dict[str, int | None]:
    """Every topic on the cluster and its number of partitions (None when the broker reported an
    error for the topic and no partitions, as it may for a topic still being created)."""
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise TopicError(f"cannot list topics on {bootstrap}: {exc}") from exc
    return {
        name: None if topic.error is not None and not topic.partitions else len(topic.partitions)
        for name, topic in metadata.topics.items()
    }


def _check_partitions(
    existing: dict[str, int | None], bootstrap: str, names: Iterable[str], partitions: int
) -> None:
    """Refuse the first of `names` that exists with another partition count than `partitions`."""
    for name in names:
        count = existing.get(name)
        if count is not None and count != partitions:
            raise TopicError(
                f"topic {name} on {bootstrap} has {count} partition(s), expected {partitions}"
                f" (one per shard): the shard count is fixed when the topics are created, and it"
                f" was created for {count} shard(s); run with that shard count"
                f" ([topology] shards = {count}, streams up --shards {count}) or start from a"
                " cluster without these topics"
            )
