"""Which clusters and topics one mirror joins (`Route`) and the Kafka clients it opens there.

Every client of a mirror shares one error callback (`Clients.on_error`: a fatal librdkafka error
makes the mirror start over from the target) and one rule for consumer error events
(`Clients.consumer_event`). Consumers use assign(), never a consumer group, and never jump to a
log's start or end by themselves (`auto.offset.reset=error`): that would re-copy or skip.
Topics are described through an AdminClient: a topic's id and partition count come in one
answer, and the id is the only way to notice on Tansu that a topic was recreated under its name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
)
from confluent_kafka.admin import AdminClient

from streams.kafka import security
from streams.kafka.paced import PacedConsumer
from streams.kafka.reading import Pacing, consumer_config
from streams.kafka.sizes import MAX_RECORD_BYTES
from streams.kafka.topics import Replication, mirrored_name, oplog_topic
from topology.mirror.deadline import Deadline, MirrorError

if TYPE_CHECKING:
    from streams.kafka.reading import Msg

log = logging.getLogger(__name__)
kafka_log = logging.getLogger("topology.mirror.kafka")


class _KnownConfigWarnings(logging.Filter):
    """librdkafka warns at every producer creation that the gapless guarantee we rely on is
    "experimental"; it is chosen on purpose, so the warning would only bury real ones."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "enable.gapless.guarantee is experimental" not in record.getMessage()


kafka_log.addFilter(_KnownConfigWarnings())

_FATAL_CONSUMER_ERRORS = {
    KafkaError._AUTO_OFFSET_RESET,
    KafkaError.OFFSET_OUT_OF_RANGE,
}


@dataclass(frozen=True)
class Route:
    """`<region>.oplog` on the region's home cluster, copied to `target_topic` on another one;
    `poll_timeout` and `batch_size` bound each read of the source."""

    source_bootstrap: str
    target_bootstrap: str
    region_name: str
    source_alias: str
    naming: str = "identity"
    poll_timeout: float = 0.1
    batch_size: int = 2000
    replication: Replication = Replication()
    from_log_start: bool = False
    """An empty target partition is filled from the first record the source still holds (a
    region joining over logs a retention policy truncated: `topology.join`), not from offset 0
    (where a truncated source makes the copy fail: nothing below its start may be skipped
    silently for a cluster whose readers read its copy from the beginning)."""
    """Of the target topic, when the mirror creates it (the topology's)."""

    def __post_init__(self) -> None:
        if self.source_bootstrap == self.target_bootstrap:
            raise ValueError(
                f"mirror of {self.region_name}: source and target are the same cluster"
                f" ({self.source_bootstrap}); regions that share a cluster need no mirror"
            )

    @property
    def source_topic(self) -> str:
        return oplog_topic(self.region_name)

    @property
    def target_topic(self) -> str:
        return mirrored_name(self.source_topic, self.source_alias, self.naming)

    @property
    def name(self) -> str:
        return (
            f"{self.source_topic}@{self.source_alias} -> {self.target_topic}"
            f"@{self.target_bootstrap}"
        )


@dataclass(frozen=True)
class TopicShape:
    """What a mirror must know of a topic: its id (new when the topic is recreated) and its
    partition count (partition p is copied to partition p)."""

    id: str
    partitions: int


class Clients:
    """Opens the Kafka clients of one mirror; holds the fatal error their callback saw."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.fatal: KafkaError | None = None
        self._admins: dict[str, AdminClient] = {}

    def on_error(self, error: KafkaError) -> None:
        """librdkafka's error callback: transient errors are retried by librdkafka itself."""
        if error.fatal():
            self.fatal = error
            log.error("%s: fatal Kafka error: %s", self.route.name, error)
        else:
            log.debug("%s: Kafka error (retried): %s", self.route.name, error)

    def _consumer_settings(self, purpose: str) -> dict[str, object]:
        route = self.route
        return {
            "client.id": f"mirror-{purpose}-{route.source_alias}-{route.region_name}",
            # Never silently jump to the start or end of a log: that would re-copy or skip.
            "auto.offset.reset": "error",
            "error_cb": self.on_error,
            "logger": kafka_log,
        }

    @property
    def _group_id(self) -> str:
        return f"streams-mirror-{self.route.source_alias}-{self.route.region_name}"

    def consumer(self, bootstrap: str, purpose: str) -> Consumer:
        """A consumer for one-off reads (a topic's tail, a record to verify)."""
        wait_ms = Pacing().catch_up_ms
        settings = self._consumer_settings(purpose)
        return Consumer(consumer_config(bootstrap, self._group_id, wait_ms, **settings))

    def reader(self) -> PacedConsumer:
        """The continuous reader of the source topic; its fetch wait starts short (a mirror is
        created to copy what comes) and follows `streams.kafka.reading.FetchPacer`."""
        return PacedConsumer(
            self.route.source_bootstrap,
            self._group_id,
            catching_up=False,
            poll_s=self.route.poll_timeout,
            max_records=self.route.batch_size,
            on_error=self.consumer_event,
            name=self.route.name,
            config=self._consumer_settings("source"),
        )

    def producer(self, on_delivery: Callable[[KafkaError | None, Msg], None]) -> Producer:
        route = self.route
        return Producer(
            {
                **security.producer_settings(route.target_bootstrap),
                "bootstrap.servers": route.target_bootstrap,
                "client.id": f"mirror-target-{route.source_alias}-{route.region_name}",
                "enable.idempotence": True,
                "acks": "all",
                # A failed batch stops the producer instead of leaving a hole that a later
                # success would hide from resume (which trusts the target's last record).
                "enable.gapless.guarantee": True,
                # Never create the target topic as a side effect of a metadata request (Tansu
                # would give it its default partition count, e.g. after a target broker restart).
                "allow.auto.create.topics": False,
                # Surface an unreachable target as delivery errors (then: reopen, resume from
                # the target) instead of queueing for librdkafka's default five minutes.
                "message.timeout.ms": 30000,
                "linger.ms": 5,
                "message.max.bytes": MAX_RECORD_BYTES,  # as the region writer
                "on_delivery": on_delivery,
                "error_cb": self.on_error,
                "logger": kafka_log,
            }
        )

    def describe(self, bootstrap: str, topic: str, deadline: Deadline) -> TopicShape | None:
        """The topic's id and partition count, or None when the topic does not exist."""
        futures = self._admin(bootstrap).describe_topics(
            TopicCollection([topic]), request_timeout=max(1.0, deadline.left(cap=10.0))
        )
        try:
            description = futures[topic].result()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise
        return TopicShape(str(description.topic_id), len(description.partitions))

    def _admin(self, bootstrap: str) -> AdminClient:
        admin = self._admins.get(bootstrap)
        if admin is None:
            config: dict[str, Any] = {
                **security.client_settings(bootstrap),
                "bootstrap.servers": bootstrap,
                "logger": kafka_log,
            }
            admin = self._admins[bootstrap] = AdminClient(config)
        return admin

    def drop_admins(self) -> None:
        """AdminClient has no close(): dropping it is what disconnects it. That matters: Tansu
        does not exit on SIGTERM while clients are still connected."""
        self._admins.clear()

    def consumer_event(self, message: Message[Any, Any]) -> None:
        """An error event of a source or target consumer: raise what retrying cannot fix
        (MirrorError) or what means "start over" (KafkaException); log the rest."""
        error = message.error()
        assert error is not None
        topic = message.topic() or self.route.source_topic
        if error.code() in _FATAL_CONSUMER_ERRORS:
            raise MirrorError(
                f"{topic} has no offset {message.offset()}: {error.str()} (the log was truncated"
                " or recreated)"
            )
        if error.fatal():
            raise MirrorError(f"{self.route.name}: fatal consumer error on {topic}: {error}")
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            # The topic vanished (deleted, broker restarted): start over (the topic-id check
            # then tells a recreated source, which is fatal, from a recreated target, which is
            # refilled).
            raise KafkaException(error)
        # Anything else (a broker connection dropped, ...) librdkafka retries by itself.
        log.warning("%s: consumer error (retried by the client): %s", self.route.name, error)
