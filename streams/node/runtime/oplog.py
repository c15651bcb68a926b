"""What a node needs of its op log, per shard: a writer, a reader, a snapshot store.

The node is a composition root (`streams.node.node`): it is handed an `OpLog` that makes these
parts, so a test builds a node on an in-memory log (`streams.node.runtime.memory`) and production on
Kafka (`streams.node.kafka.kafka_log`). The protocols name exactly what the node uses of each part.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from streams.crdt import ops
from streams.crdt.region import Region
from streams.ops.codec import Sealed
from streams.snapshot import Positions

# --- the records the port carries, and its errors ------------------------------------------


class Decoded(NamedTuple):
    """One op read, with where its record was (a pack's ops share the place). A NamedTuple, not
    a frozen dataclass: one is made per op replayed, and a frozen dataclass's constructor sets
    each field through object.__setattr__."""

    topic: str
    partition: int
    offset: int
    record: ops.Op | ops.LocalOp
    txn_last: int = 0
    """The seq of the last op of the record's transaction when it goes on in later records of
    the partition, else 0 (`streams.ops.pack.decode_record`; the fold assembles such a
    transaction of another region and applies it whole)."""


class CorruptRecord(RuntimeError):
    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(
            f"cannot decode the record at topic {topic} partition {partition} offset {offset}: "
            f"{reason}; the materializer stopped (nothing was skipped; if this record carries "
            f"no op, restart the node with --skip-record {topic}:{partition}:{offset})"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset


Batch = list[Decoded]

RecordAt = tuple[str, int, int]
"""(topic, partition, offset) of one record."""


def parse_record_at(text: str) -> RecordAt:
    """'r2.oplog:0:1234' -> ('r2.oplog', 0, 1234); ValueError with the expected form."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f"expected TOPIC:PARTITION:OFFSET (e.g. r2.oplog:0:1234), got {text!r}")
    return parts[0], int(parts[1]), int(parts[2])


class WriterError(RuntimeError):
    """An append did not commit; the node refuses writes until it has re-read its log."""


class WriterFenced(WriterError):
    """Another writer took over this region; this one must never write again."""


# --- the parts ---------------------------------------------------------------------------------


class Writer(Protocol):
    """Appends a shard's batches to its logs, one transaction each; fenced by a newer writer."""

    partition: int
    """The partition of the region's logs it appends to (its shard's)."""
    fenced: bool
    fail_next: int
    """Test hook (CRDT.FAULT): fail this many upcoming appends."""
    next_offsets: dict[str, int]
    """Per own topic: one past the last record a committed append wrote."""

    @property
    def gathers(self) -> bool:
        """The writer's transactions gather the batches of several shards (one producer per node
        process, `streams.node.kafka.process_writer`): it holds each transaction for the writers the
        last one answered over all its shards, so the shard's write path does not linger itself, and
        a batch handed to `append` stays open until the writer calls its `seal`."""
        ...

    def start(self) -> None: ...

    async def append(
        self,
        replicated: Sequence[Sealed],
        local: Sequence[Sealed],
        deadline: float | None = None,
        seal: Callable[[], None] | None = None,
    ) -> None:
        """Append one batch (encoded ops for the replicated and the local log) in one
        transaction, committed by `deadline` (time.monotonic()); raises
        `streams.node.kafka.writer.WriterError` when it did not commit.

        `seal`: called, in the event loop, when the transaction that carries the batch begins.
        Until then the caller may still extend `replicated` and `local` (the same lists): ops
        that arrive while the batch waits for a transaction join it rather than the next one.
        A writer that begins at once calls it at once."""
        ...

    def grew(self) -> None:
        """A batch handed to `append` and not yet sealed took more ops (a gathering writer
        checks whether its transaction has waited long enough)."""
        ...

    async def recover(self, superseded: Callable[[], str | None]) -> None:
        """Make the writer usable after a failed append, unless `superseded()` names a newer
        writer (then it is fenced); raises WriterError while the log is unreachable."""
        ...

    def close(self) -> None: ...


class Reader(Protocol):
    """Reads a shard's partition of every op log on the cluster, in a thread of its own, and
    hands decoded batches to the node (the materializer)."""

    caught_up: threading.Event
    records_read: int

    @property
    def records_skipped(self) -> int:
        """Records skipped: forged ones (a signing region's, unsigned), and those named by
        --skip-record."""
        ...

    own_positions: dict[str, int]
    """Where reading the own logs stopped when they were dropped after catching up."""

    @property
    def positions(self) -> dict[str, int]:
        """Per topic read, the next offset."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def wake(self) -> None: ...

    def progress(self) -> str: ...


@dataclass(frozen=True)
class ReaderSpec:
    """How to make a shard's reader."""

    on_batch: Callable[[Batch], None]
    """Called in the reader's thread with each decoded batch."""
    on_error: Callable[[Exception], None]
    """Called in the reader's thread when reading stopped for good."""
    start_offsets: dict[str, int] | None
    """Per topic, where to start (a snapshot's positions); None: from the beginning."""
    read_own: bool
    """Read the region's own logs too, not only to catch up: true once another writer (which
    fenced this node) appends to them."""
    covered: dict[int, int] | None = None
    """Set when the boot state came with no positions (a joining region's seed, a snapshot of
    another cluster): its applied vector. Each log is then read from its first record held, and
    that record's first op of origin O must not lie past covered[O] + 1 (else ops between are
    missing: the reader stops, naming the log)."""


class Snapshot(NamedTuple):
    """A stored snapshot read back: its id, the state, the log positions it covers."""

    id: str
    region: Region
    positions: Positions
    unchecked_digest: str | None = None
    """The digest its trailer recorded when the state was not yet compared with it (asked for
    with `check_digest=False`; `streams.node.runtime.digest_check`), else None."""


class SnapshotStore(Protocol):
    where: str
    """Where the snapshots are kept, for messages (a topic, or a topic and partition)."""

    @property
    def cluster_id(self) -> str | None:
        """The id of the Kafka cluster the shard reads (None: not known, or no Kafka): every
        snapshot names the cluster its positions were read from (`streams.kafka.clusters`)."""
        ...

    def load_newest(
        self, *, skip: Collection[str] = (), check_digest: bool = True
    ) -> Snapshot | None:
        """The newest snapshot that reads back, older ones if it does not, never one whose id
        is in `skip` (refused by a later digest check). `check_digest=False` leaves the state's
        digest unchecked (`Snapshot.unchecked_digest`) for the caller to compare later."""
        ...

    def publish(self, snapshot_id: str, data: bytes) -> None: ...


class OpLog(Protocol):
    """Makes the parts of each shard of one region on this node."""

    oplog_topic: str
    local_topic: str
    record_limit: int
    """The largest record batch its logs take (bytes, `streams.kafka.sizes.batch_bytes`): an op
    whose record is bigger is refused to its own client before it is applied. Known once
    `prepare` ran (learned from the topics where the broker tells)."""

    def prepare(self) -> None:
        """Make sure the logs exist with the shape the database needs (blocking)."""
        ...

    def writer(self, shard: int) -> Writer: ...

    def reader(self, shard: int, spec: ReaderSpec) -> Reader: ...

    def snapshots(self, shard: int) -> SnapshotStore: ...
