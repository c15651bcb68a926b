"""The process writer's gather (`ProcessWriter._gather`): after a transaction commits, the next
one waits up to the linger for every shard it answered to hand in its next batch, so shards that
linger in their write paths still share one transaction; without the linger a shard that comes
back a moment late waits a whole transaction more. Only the grouping is exercised here: the
transaction itself (`_commit_sync`) records its group instead of talking to a broker (the real
one runs in tests/integration/test_process_transactions.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

from streams.node.kafka.process_writer import ProcessWriter

LONG_LINGER_S = 5.0
"""Far longer than the late shard takes, so that a gather that waited it out shows."""
LATE_S = 0.05
"""How long after the first commit shard 1 hands in its next batch."""


class RecordingWriter(ProcessWriter):
    """A process writer of shards 0 and 1 whose transactions only note their shards."""

    def __init__(self, linger: float) -> None:
        # Never connects: no transaction is begun, and the producer is not flushed on close.
        super().__init__("127.0.0.1:9", "r1", "r1.oplog", "r1.local", (0, 1), 2, linger=linger)
        self.groups: list[list[int]] = []
        self.fenced = True  # close_shard skips the flush of a producer that never connected

    def _commit_sync(self, group: list) -> None:  # type: ignore[type-arg]
        self.groups.append(sorted(batch.handle.partition for batch in group))

    async def write(self, partition: int) -> None:
        """One (empty) batch of shard `partition`, answered when its transaction committed."""
        await self.append(self.handles[partition], [], [], time.monotonic() + 10)

    def run(self, scenario: Coroutine[Any, Any, float]) -> float:
        """Run `scenario` on a fresh event loop, then close every shard's handle."""
        try:
            return asyncio.run(scenario)
        finally:
            for handle in self.handles.values():
                handle.close()


def transactions(linger: float) -> tuple[list[list[int]], float]:
    """The shards of each transaction when both shards write, then write again, shard 1 late;
    and how long the second round took."""
    writer = RecordingWriter(linger)

    async def shard(partition: int, late: float) -> None:
        await writer.write(partition)
        await asyncio.sleep(late)
        await writer.write(partition)

    async def scenario() -> float:
        started = time.monotonic()
        await asyncio.wait_for(asyncio.gather(shard(0, 0.0), shard(1, LATE_S)), LONG_LINGER_S / 2)
        return time.monotonic() - started

    took = writer.run(scenario())
    return writer.groups, took


def test_the_next_transaction_waits_for_every_shard_the_last_one_answered() -> None:
    groups, took = transactions(LONG_LINGER_S)
    assert groups == [[0, 1], [0, 1]]
    assert took < LONG_LINGER_S / 2  # it waited for shard 1, not the whole linger


def test_without_the_linger_the_late_shard_waits_for_a_transaction_of_its_own() -> None:
    groups, _took = transactions(0.0)
    assert groups == [[0, 1], [0], [1]]


def test_a_shard_that_does_not_come_back_holds_the_next_transaction_one_linger_at_most() -> None:
    writer = RecordingWriter(0.2)

    async def scenario() -> float:
        await asyncio.gather(writer.write(0), writer.write(1))
        started = time.monotonic()
        await writer.write(0)  # shard 1 has nothing more to write
        return time.monotonic() - started

    took = writer.run(scenario())
    assert writer.groups == [[0, 1], [0]]
    assert 0.19 <= took < 2.0  # held for the linger (0.2 s), then committed without shard 1
