"""An in-memory op log for a node in tests and tools that need no broker.

Appends are acknowledged at once and kept in `appends`; readers find nothing to read and are
caught up at once; snapshots are kept in memory. It is not durable and holds one region: a node
on it behaves as a one-region database whose log never fails (unless `fail_next` says so), which
is what the unit tests of the request pipeline and `scripts/request_corpus.py` need.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection, Sequence

from streams.kafka.sizes import MAX_RECORD_BYTES
from streams.node.runtime.oplog import ReaderSpec, Snapshot, WriterError
from streams.ops.codec import Sealed


class MemoryWriter:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.fenced = False
        self.fail_next = 0
        self.next_offsets: dict[str, int] = {}
        self.gate: asyncio.Event | None = None
        """Test hook: while set and not set(), appends wait (a broker that stalls)."""
        self.appends: list[tuple[list[Sealed], list[Sealed]]] = []
        """Every batch appended: its replicated and local records (`streams.ops.codec.decode`
        reads them back)."""

    gathers = False

    def start(self) -> None:
        pass

    async def append(
        self,
        replicated: Sequence[Sealed],
        local: Sequence[Sealed],
        deadline: float | None = None,
        seal: Callable[[], None] | None = None,
    ) -> None:
        if seal is not None:
            seal()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_next > 0:
            self.fail_next -= 1
            raise WriterError("the op log did not acknowledge the write: injected fault")
        self.appends.append((list(replicated), list(local)))

    def grew(self) -> None:
        pass

    async def recover(self, superseded: Callable[[], str | None]) -> None:
        pass

    def close(self) -> None:
        pass


class MemoryReader:
    def __init__(self) -> None:
        self.caught_up = threading.Event()
        self.caught_up.set()
        self.records_read = 0
        self.records_skipped = 0
        self.positions: dict[str, int] = {}
        self.own_positions: dict[str, int] = {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def progress(self) -> str:
        return ""


class MemorySnapshots:
    where = "memory"
    cluster_id: str | None = None

    def __init__(self) -> None:
        self.published: list[tuple[str, bytes]] = []

    def load_newest(
        self, *, skip: Collection[str] = (), check_digest: bool = True
    ) -> Snapshot | None:
        return None

    def publish(self, snapshot_id: str, data: bytes) -> None:
        self.published.append((snapshot_id, data))


class MemoryLog:
    def __init__(self, region_name: str = "r1") -> None:
        self.oplog_topic = f"{region_name}.oplog"
        self.local_topic = f"{region_name}.local"
        self.record_limit = MAX_RECORD_BYTES
        """As a node on the topics it creates on Kafka; tests lower it."""
        self.writers: dict[int, MemoryWriter] = {}
        self.stores: dict[int, MemorySnapshots] = {}

    def prepare(self) -> None:
        pass

    def writer(self, shard: int) -> MemoryWriter:
        return self.writers.setdefault(shard, MemoryWriter(shard))

    def reader(self, shard: int, spec: ReaderSpec) -> MemoryReader:
        return MemoryReader()

    def snapshots(self, shard: int) -> MemorySnapshots:
        return self.stores.setdefault(shard, MemorySnapshots())
