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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

OPLOG_SUFFIX = ".oplog"
LOCAL_SUFFIX = ".local"
NAMINGS = ("identity", "default")
_kafka_log = logging.getLogger("topology.topics.kafka")


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
    return f"{region_name}.snapshot"


def writers_topic(region_name: str) -> str:
    """Where a region's nodes announce themselves as their shards' writers (never mirrored):
    `r1.writers` (`streams.node.presence`)."""
    return f"{region_name}.writers"


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


def ensure_topics(
    bootstrap: str, names: Iterable[str], timeout: float = 30.0, partitions: int = 1
) -> list[str]:
    """Create the topics among `names` that do not exist yet, with `partitions` partitions (the
    database's shard count); return the ones this call created.

    Idempotent and safe to race with another creator (TOPIC_ALREADY_EXISTS counts as success).
    It returns only once the broker has acknowledged every creation, so a producer that runs next
    never auto-creates the topic with the wrong partition count. A topic that exists (before, or
    made by a racing creator) with another partition count raises `TopicError`: its records are
    laid out for another shard count, and reading or writing it as this one would mix shards.
    """
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions!r}")
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return []
    # Typed loosely: the stubs do not list `logger`, which keeps librdkafka's chatter in logging.
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _kafka_log}
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout
    existing = _partition_counts(admin, bootstrap, timeout)
    _check_partitions(existing, bootstrap, wanted, partitions)
    missing = [name for name in wanted if name not in existing]
    if not missing:
        return []
    remaining = max(1.0, deadline - time.monotonic())
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1) for name in missing],
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
    return created


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
