"""The process writer's gather (`ProcessWriter._gather`) and its late seal, through the shards'
real write paths (`WritePath`): the batches of a process's shards share one transaction; a batch
handed in while another shard's transaction is in flight stays open, taking its shard's ops,
until its own transaction begins; and after a commit the next transaction waits, up to the
linger, until the process's batches hold as many new ops as that commit answered, whichever
shards they went to. Only the transaction itself is replaced: `_commit_sync` notes what it holds
instead of talking to a broker (the real one runs in
tests/integration/test_process_transactions.py), and it can be held at a gate like a slow broker.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from typing import Any

from streams.crdt.region import Region
from streams.node.kafka.process_writer import ProcessWriter
from streams.node.runtime.replica import Issued
from streams.node.runtime.undo import Journal
from streams.node.runtime.writepath import WriteBatch, WritePath

LONG_LINGER_S = 5.0
"""Far longer than anything here takes, so that a transaction that waited it out shows."""


class RecordingWriter(ProcessWriter):
    """A process writer of shards 0 and 1 whose transactions only note what they hold."""

    def __init__(self, linger: float) -> None:
        # Never connects: no transaction is begun, and the producer is not flushed on close.
        super().__init__("127.0.0.1:9", "r1", "r1.oplog", "r1.local", (0, 1), 2, linger=linger)
        self.groups: list[dict[int, list[object]]] = []
        """Per transaction, per shard, the records it wrote (a copy taken as it began)."""
        self.gate = threading.Event()
        """While clear, a transaction waits at it (the broker is slow); set by default."""
        self.gate.set()
        self.fenced = True  # close_shard skips the flush of a producer that never connected

    def _commit_sync(self, group: list) -> None:  # type: ignore[type-arg]
        self.groups.append({batch.handle.partition: list(batch.replicated) for batch in group})
        assert self.gate.wait(10), "the test never opened the gate"


class Shards:
    """Two shards' write paths on one `RecordingWriter`, as a node process of two shards."""

    def __init__(self, linger: float) -> None:
        self.writer = RecordingWriter(linger)
        self.paths = {
            shard: WritePath(
                self.writer.handles[shard],
                on_committed=lambda batch: None,
                on_failed=self._failed,
                new_journal=lambda: Journal(Region(1)),
                linger=linger,
            )
            for shard in (0, 1)
        }

    @staticmethod
    def _failed(error: Exception, batches: list[WriteBatch]) -> None:
        raise AssertionError(f"a batch failed: {error}")

    async def write(self, shard: int, name: str) -> None:
        """One op (a record named `name`) into the shard's open batch; returns once committed."""
        path = self.paths[shard]
        path.journal()
        outcome = path.add(Issued([name], [], [name], []))  # type: ignore[list-item]
        assert await outcome is None

    def run(self, scenario: Coroutine[Any, Any, float | None]) -> float | None:
        """Run `scenario` with both write paths started, then stop them and close the writer."""

        async def main() -> float | None:
            for path in self.paths.values():
                path.start()
            try:
                return await asyncio.wait_for(scenario, LONG_LINGER_S / 2)
            finally:
                for path in self.paths.values():
                    await path.stop()

        try:
            return asyncio.run(main())
        finally:
            for handle in self.writer.handles.values():
                handle.close()


def behind_a_slow_transaction(
    first: tuple[int, str], *steps: list[tuple[int, str]]
) -> list[dict[int, list[object]]]:
    """The transactions when shard `first[0]` writes `first[1]` while the broker is slow (its
    transaction held at the gate), then, 50 ms apart, each step's writes (shard, name) start;
    50 ms after the last step the gate opens."""
    shards = Shards(0.0)
    writer = shards.writer

    async def scenario() -> None:
        writer.gate.clear()
        started = [asyncio.ensure_future(shards.write(*first))]
        await asyncio.sleep(0.05)  # the first transaction is in flight, held at the gate
        for step in steps:
            started += [asyncio.ensure_future(shards.write(*write)) for write in step]
            await asyncio.sleep(0.05)
        writer.gate.set()
        await asyncio.gather(*started)

    shards.run(scenario())
    return writer.groups


def test_a_batch_handed_in_during_a_transaction_takes_ops_until_its_own_begins() -> None:
    # shard 1 hands "b" in (it waits for the transaction), then "c" joins the handed batch
    groups = behind_a_slow_transaction((0, "a"), [(1, "b")], [(1, "c"), (0, "d")])
    assert groups == [{0: ["a"]}, {0: ["d"], 1: ["b", "c"]}]


def test_ops_after_the_transaction_began_go_to_the_next_batch() -> None:
    groups = behind_a_slow_transaction((1, "a"), [(1, "b")])  # "a" sealed: its transaction began
    assert groups == [{1: ["a"]}, {1: ["b"]}]


def answered_writers_coming_back(linger: float) -> tuple[list[dict[int, list[object]]], float]:
    """Two clients write to shards 0 and 1 at once; once answered, both write again, to shard 0
    (random keys), the second a moment later. The transactions, and how long the second took."""
    shards = Shards(linger)

    async def client(first: int, name: str, late: float) -> None:
        await shards.write(first, name)
        await asyncio.sleep(late)
        await shards.write(0, name + "2")

    async def scenario() -> float:
        await asyncio.gather(shards.write(0, "x"), shards.write(1, "y"))
        started = time.monotonic()
        await asyncio.gather(client(0, "a", 0.0), client(1, "b", 0.05))
        return time.monotonic() - started

    took = shards.run(scenario())
    assert took is not None
    return shards.writer.groups, took


def test_the_next_transaction_waits_for_as_many_writes_as_the_last_one_answered() -> None:
    groups, took = answered_writers_coming_back(LONG_LINGER_S)
    assert groups[-1] == {0: ["a2", "b2"]}  # both answered clients' next writes in one
    assert took < LONG_LINGER_S / 2  # the mark was met: the linger was not waited out


def test_without_the_linger_a_writer_a_moment_late_waits_for_a_transaction_more() -> None:
    groups, _took = answered_writers_coming_back(0.0)
    assert groups[-2:] == [{0: ["a2"]}, {0: ["b2"]}]


def test_writers_that_do_not_come_back_hold_the_next_transaction_one_linger_at_most() -> None:
    shards = Shards(0.2)

    async def scenario() -> float:
        await asyncio.gather(shards.write(0, "a"), shards.write(1, "b"))
        started = time.monotonic()
        await shards.write(1, "c")  # the other client went away
        return time.monotonic() - started

    took = shards.run(scenario())
    assert took is not None
    assert shards.writer.groups[-1] == {1: ["c"]}
    assert 0.19 <= took < 2.0  # held for the linger (0.2 s), then committed alone


def test_a_shard_of_a_gathering_writer_does_not_linger_in_its_write_path() -> None:
    shards = Shards(LONG_LINGER_S)
    assert shards.writer.handles[0].gathers
    alone = ProcessWriter("127.0.0.1:9", "r1", "r1.oplog", "r1.local", (0,), 4)
    alone.fenced = True  # never connected: nothing to flush on close
    alone.handles[0].close()
    assert not alone.gathers  # one shard alone lingers in its write path, as on any other writer
