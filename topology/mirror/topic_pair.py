"""The source and target topics of one mirror: checked before copying and while it copies.

- The source must exist (else there is nothing to copy yet) and must still be the topic the
  mirror first saw: a recreated source (a memory-only broker restarted) holds a new log that the
  copies on the target do not belong to, which retrying cannot fix.
- The target is created with the source's partition count when missing (partition p is copied
  to partition p, as MirrorMaker 2 does: a shard's ops stay in the shard's partition), and a
  target with another partition count is refused.
- A target recreated while copying (its broker restarted) is refilled from what it holds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from streams.kafka.topics import TopicError, ensure_topics
from topology.mirror.clients import Clients, TopicShape
from topology.mirror.deadline import Deadline, MirrorError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicPair:
    source: TopicShape
    target: TopicShape

    @property
    def partitions(self) -> int:
        return self.source.partitions


def prepare(clients: Clients, source_seen: str | None, deadline: Deadline) -> TopicPair | None:
    """The checked pair, the target created if missing; None while the source does not exist.
    `source_seen`: the source's id when this mirror first saw it, if it did."""
    route = clients.route
    source = clients.describe(route.source_bootstrap, route.source_topic, deadline)
    if source is None:
        return None
    if source_seen is not None and source.id != source_seen:
        raise source_recreated(clients)
    target = clients.describe(route.target_bootstrap, route.target_topic, deadline)
    if target is None:
        ensure_topics(
            route.target_bootstrap,
            [route.target_topic],
            timeout=deadline.left(cap=30.0),
            partitions=source.partitions,
            replication=route.replication,
        )
        target = clients.describe(route.target_bootstrap, route.target_topic, deadline)
        if target is None:  # created, but the broker does not show it yet: try again
            raise TopicError(f"{route.target_topic} on {route.target_bootstrap} not visible yet")
    if target.partitions != source.partitions:
        raise MirrorError(
            f"{route.target_topic} on {route.target_bootstrap} has {target.partitions}"
            f" partitions but {route.source_topic} on {route.source_bootstrap} has"
            f" {source.partitions}: a mirror copies each partition to the partition of the same"
            f" number (delete the target topic, or create it with {source.partitions}"
            " partitions)"
        )
    return TopicPair(source, target)


def unchanged(clients: Clients, pair: TopicPair, deadline: Deadline) -> bool:
    """Whether both topics are still those of `pair`. Raises if the source was recreated; False
    when the target was (or the source's partition count changed: preparing again says why)."""
    route = clients.route
    source = clients.describe(route.source_bootstrap, route.source_topic, deadline)
    if source is None or source.id != pair.source.id:
        raise source_recreated(clients)
    if source != pair.source:
        log.warning("%s: the source now has %d partitions", route.name, source.partitions)
        return False
    if clients.describe(route.target_bootstrap, route.target_topic, deadline) != pair.target:
        log.warning(
            "%s: the target topic was deleted or recreated (broker restart?): copying again"
            " from what it holds",
            route.name,
        )
        return False
    return True


def source_recreated(clients: Clients) -> MirrorError:
    route = clients.route
    return MirrorError(
        f"{route.source_topic} on {route.source_bootstrap} was deleted or recreated since this"
        f" mirror started (its topic id changed; a memory-only broker restarted?): the copies"
        f" in {route.target_topic} on {route.target_bootstrap} belong to a log that is gone"
    )
