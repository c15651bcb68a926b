"""The node's op log on Kafka: the region's topics on its own cluster, per shard a partition.

Shard s of region r writes partition s of `r.oplog` and `r.local`; the shards a node process owns
(`owned`) share one transactional producer, so one transaction holds the batches of several
shards (`streams.node.kafka.process_writer`: why, and how fencing follows a moved shard). A log
made without `owned` gives each shard a producer of its own (`streams.node.kafka.writer`). Shard s
reads partition s of every op log on the cluster (`streams.node.kafka.materializer`) and keeps its
snapshots in partition s of `r.snapshot` (`streams.node.kafka.snapshots`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping

from streams.kafka.gate import RecordGate
from streams.kafka.reading import Pacing
from streams.kafka.sizes import MAX_RECORD_BYTES, PRODUCER_BATCH_BYTES, TOPIC_MAX_MESSAGE_BYTES
from streams.kafka.topics import (
    Replication,
    TopicError,
    cluster_id_of,
    describe_topic_configs,
    ensure_topics,
    local_topic,
    oplog_topic,
    record_limit,
    snapshot_topic,
    writers_topic,
)
from streams.node.kafka import snapshots
from streams.node.kafka.materializer import Materializer
from streams.node.kafka.process_writer import (
    ProcessWriter,
    ShardWriter,
    process_transactional_id,
)
from streams.node.runtime.oplog import ReaderSpec, RecordAt, Snapshot

log = logging.getLogger(__name__)


class KafkaSnapshots:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        region_id: int,
        partition: int,
        shards: int,
        cluster: Callable[[], str | None] = lambda: None,
        keep: int = snapshots.KEEP,
    ) -> None:
        """`cluster`: the cluster's id once the log learned it (`KafkaLog.prepare`); `keep`:
        complete snapshots kept (the retention policy's `snapshots`, at least `KEEP`)."""
        self._cluster = cluster
        self.bootstrap = bootstrap
        self.topic = topic
        self.region_id = region_id
        self.partition = partition
        self.where = topic if shards == 1 else f"{topic} partition {partition}"
        self.retention = snapshots.Retention(max(keep, snapshots.KEEP))
        """Where the stored snapshots start: the newest `keep` are kept."""

    @property
    def cluster_id(self) -> str | None:
        return self._cluster()

    def load_newest(
        self, *, skip: Collection[str] = (), check_digest: bool = True
    ) -> Snapshot | None:
        return snapshots.load_newest(
            self.bootstrap,
            self.topic,
            self.region_id,
            partition=self.partition,
            retention=self.retention,
            cluster_id=self.cluster_id,
            skip=skip,
            check_digest=check_digest,
        )

    def publish(self, snapshot_id: str, data: bytes) -> None:
        first = snapshots.publish(
            self.bootstrap, self.topic, snapshot_id, data, partition=self.partition
        )
        self.retention.note(first)
        self.retention.trim(self.bootstrap, self.topic, self.partition)


BROKER_WAIT_S = 90.0
"""How long a starting node waits for its broker's first answer (a JVM broker started at the
same moment takes 3-10 s, much more on a loaded machine)."""


class KafkaLog:
    def __init__(
        self,
        bootstrap: str,
        region_name: str,
        region_id: int,
        shards: int = 1,
        skip_records: frozenset[RecordAt] = frozenset(),
        regions: Mapping[int, str] | None = None,
        replication: Replication | None = None,
        keys: Mapping[int, bytes] | None = None,
        snapshots_kept: int = snapshots.KEEP,
        owned: tuple[int, ...] | None = None,
        commit_linger: float = 0.0,
        catch_up_wait_ms: int | None = None,
    ) -> None:
        """`regions`: every region of the topology, id -> name: records of any other origin,
        or in another region's op log, are refused (`streams.kafka.gate`). `replication`: of
        the topics this node creates (the topology's; default the broker's). `keys`: per region id,
        the key its records are signed with (`streams.kafka.gate`). `owned`: the shards of this
        node process, which then share one transactional producer
        (`streams.node.kafka.process_writer`); `commit_linger`: how long its transactions wait
        for the shards the last one answered (`ProcessWriter.linger`); `catch_up_wait_ms`: the
        readers' fetch wait while they catch up (None: `Pacing`'s default)."""
        self.bootstrap = bootstrap
        self.replication = replication or Replication()
        self.record_limit = MAX_RECORD_BYTES
        """The largest record batch a write may make: `MAX_RECORD_BYTES`, or less where the own
        logs take less (learned in `prepare`). Never more, though the topics take 64 KiB more:
        every producer downstream (the mirror's, MirrorMaker 2's) is sized for that record."""
        self.region_name = region_name
        self.region_id = region_id
        self.shards = shards
        self.skip_records = skip_records
        self.regions = dict(regions) if regions is not None else {region_id: region_name}
        self.keys = dict(keys or {})
        self._gates: dict[int, list[RecordGate]] = {}
        """Per shard, the record gates of its newest readers (`admit_regions` widens them)."""
        self.snapshots_kept = snapshots_kept
        """Complete snapshots kept per shard (the retention policy anchors the op logs on the
        oldest of them, so it must outlive what the policy counts)."""
        self.oplog_topic = oplog_topic(region_name)
        self.local_topic = local_topic(region_name)
        self.snapshot_topic = snapshot_topic(region_name)
        self.writers_topic = writers_topic(region_name)
        """Where the nodes announce themselves (`streams.node.kafka.presence`)."""
        self.owned = owned
        self.commit_linger = commit_linger
        self.pacing = Pacing() if catch_up_wait_ms is None else Pacing(catch_up_ms=catch_up_wait_ms)
        """The readers' fetch waits (`streams.kafka.reading`)."""
        self.process_writer: ProcessWriter | None = None
        """The producer the owned shards share (made with the first shard's writer)."""
        self.fence_first: tuple[str, ...] = ()
        """Transactional ids the process writer registers before its own (`fence_first` of
        `ProcessWriter`; the node sets them from the presence announcements)."""
        self.cluster_id: str | None = None
        """The cluster's id (learned in `prepare`): every snapshot says it, and one taken on
        another cluster is translated by seq at boot (`streams.kafka.clusters`)."""

    def prepare(self) -> None:
        # The first answer of the broker: a node started beside its broker (streams up, a
        # container, a busy machine) waits for it this long before it gives up.
        self.cluster_id = cluster_id_of(self.bootstrap, timeout=BROKER_WAIT_S)
        ensure_topics(
            self.bootstrap,
            [self.oplog_topic, self.local_topic, self.snapshot_topic, self.writers_topic],
            partitions=self.shards,
            replication=self.replication,
        )
        # Topics this code creates take the largest op record; an older topic, or one made by
        # hand, may take less (Kafka's default: 1 MiB): then that is the limit of every write.
        try:
            configs = describe_topic_configs(self.bootstrap, [self.oplog_topic, self.local_topic])
        except TopicError as exc:
            log.warning("%s; taking records up to %d bytes", exc, MAX_RECORD_BYTES)
            configs = {}
        self.record_limit = record_limit(configs, MAX_RECORD_BYTES)
        if self.record_limit < PRODUCER_BATCH_BYTES:
            raise TopicError(
                f"{self.oplog_topic} / {self.local_topic} on {self.bootstrap} take record batches"
                f" of at most {self.record_limit} bytes (max.message.bytes), less than the"
                f" {PRODUCER_BATCH_BYTES} the writer packs small records into: a batch of small"
                f" writes could be refused as a whole; set max.message.bytes to at least"
                f" {PRODUCER_BATCH_BYTES} ({TOPIC_MAX_MESSAGE_BYTES} for values up to 64 MiB)"
            )
        if self.record_limit < MAX_RECORD_BYTES:
            log.warning(
                "%s / %s take record batches up to %d bytes (max.message.bytes): larger writes"
                " are refused to their clients; set it to %d for values up to 64 MiB",
                self.oplog_topic,
                self.local_topic,
                self.record_limit,
                TOPIC_MAX_MESSAGE_BYTES,
            )

    @property
    def transactional_id(self) -> str | None:
        """The id of the process's shared producer (None without `owned`)."""
        if self.owned is None:
            return None
        return process_transactional_id(self.region_name, self.owned, self.shards)

    def writer(self, shard: int) -> ShardWriter:
        """The shard's handle on the process's shared producer (`owned`); without `owned`, on
        a producer of its own (`STREAMS_WRITER_PER_SHARD=1`: fencing per shard, as before)."""
        if self.owned is not None and shard in self.owned:
            if self.process_writer is None:
                self.process_writer = self._process_writer(self.owned)
                self.process_writer.fence_first = self.fence_first
            return self.process_writer.handles[shard]
        return self._process_writer((shard,)).handles[shard]

    def _process_writer(self, owned: Iterable[int]) -> ProcessWriter:
        return ProcessWriter(
            self.bootstrap,
            self.region_name,
            self.oplog_topic,
            self.local_topic,
            owned,
            self.shards,
            signing_key=self.keys.get(self.region_id),
            linger=self.commit_linger,
        )

    def reader(self, shard: int, spec: ReaderSpec) -> Materializer:
        name = f"materializer-{self.region_name}"
        return Materializer(
            self.bootstrap,
            self.local_topic,
            spec.on_batch,
            spec.on_error,
            start_offsets=spec.start_offsets,
            name=name if self.shards == 1 else f"{name}-s{shard}",
            pacing=self.pacing,
            own_topics=frozenset()
            if spec.read_own
            else frozenset({self.oplog_topic, self.local_topic}),
            skip_records=self.skip_records,
            partition=shard,
            gate=self._gate(shard),
            covered=spec.covered,
        )

    def _gate(self, shard: int) -> RecordGate:
        gate = RecordGate(self.regions, self.region_id, self.keys)
        # A reload's reader runs beside the serving one until the switch: the last few suffice.
        self._gates[shard] = [*self._gates.get(shard, [])[-2:], gate]
        return gate

    def admit_regions(self, regions: Mapping[int, str], keys: Mapping[int, bytes]) -> None:
        """Regions joined the topology (`streams.node.topology_watch`): their records are
        accepted from now on, by the readers running and by those made later. Called before the
        joining region writes anything (`topology.join` waits for every node to follow the file
        first), so no record of it meets a gate that does not know it."""
        self.regions.update(regions)
        self.keys.update(keys)
        for gates in self._gates.values():
            for gate in gates:
                gate.admit(regions, keys)

    def snapshots(self, shard: int) -> KafkaSnapshots:
        return KafkaSnapshots(
            self.bootstrap,
            self.snapshot_topic,
            self.region_id,
            shard,
            self.shards,
            lambda: self.cluster_id,
            keep=self.snapshots_kept,
        )
