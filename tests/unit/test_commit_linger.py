"""The commit linger (`--commit-linger-ms`, `WritePath._linger`), through `RegionNode.handle` on
an in-memory log whose appends wait at a gate: when a commit answers one client while another's
write already waits in the open batch, the next batch waits for the answered client's next write
and both go in one append; without the linger they go in two. A lone client is never held.

Run compiled too (CI runs the suite on the compiled core): a first version killed the commit task
there only (mypy's narrowing of `self._open` across an await, checked at run time by mypyc), and
these tests then hung; they now time out instead."""

from __future__ import annotations

import asyncio
import time

import pytest
from memory_node import ONE_REGION, answer

from streams.node.node import NodeOptions, RegionNode
from streams.node.runtime.memory import MemoryLog
from streams.resp.server import Session

LONG_LINGER_S = 5.0
"""Far longer than anything here takes, so that a batch that waited it out shows."""


def appended_batches(linger: float) -> list[int]:
    """Ops per append when client A's write commits while B's waits, then A writes again."""
    loop = asyncio.new_event_loop()
    log = MemoryLog()
    node = RegionNode(NodeOptions(ONE_REGION, "r1", commit_linger=linger), log=log)
    loop.run_until_complete(node.start(serve_resp=False))
    a, b = Session(1), Session(2)

    async def scenario() -> None:
        gate = log.writers[0].gate = asyncio.Event()
        first = asyncio.ensure_future(answer(node, a, [b"XADD", b"s", b"*", b"by", b"a"]))
        await asyncio.sleep(0.05)  # A's batch is in flight, held at the gate
        waiting = asyncio.ensure_future(answer(node, b, [b"XADD", b"s", b"*", b"by", b"b"]))
        await asyncio.sleep(0.05)  # B's write is in the open batch
        gate.set()
        await asyncio.wait_for(first, 2)  # A answered: it writes again at once
        second = asyncio.ensure_future(answer(node, a, [b"XADD", b"s", b"*", b"by", b"a2"]))
        await asyncio.wait_for(asyncio.gather(waiting, second), LONG_LINGER_S / 2)

    try:
        loop.run_until_complete(scenario())
    finally:
        loop.run_until_complete(asyncio.wait_for(node.stop(), 10))  # a dead commit task hangs it
        loop.close()
    return [len(replicated) for replicated, _local in log.writers[0].appends]


def test_the_next_batch_waits_for_the_writer_the_last_commit_answered() -> None:
    assert appended_batches(LONG_LINGER_S) == [1, 2]


def test_without_the_linger_the_answered_writer_goes_in_a_batch_of_its_own() -> None:
    assert appended_batches(0.0) == [1, 1, 1]


@pytest.mark.parametrize("writes", [1, 20])
def test_a_lone_client_is_never_held(writes: int) -> None:
    loop = asyncio.new_event_loop()
    log = MemoryLog()
    node = RegionNode(NodeOptions(ONE_REGION, "r1", commit_linger=LONG_LINGER_S), log=log)
    loop.run_until_complete(node.start(serve_resp=False))
    client = Session(1)

    async def scenario() -> None:
        for i in range(writes):
            await answer(node, client, [b"XADD", b"s", b"*", b"n", str(i).encode()])

    started = time.monotonic()
    try:
        loop.run_until_complete(asyncio.wait_for(scenario(), 10))
    finally:
        loop.run_until_complete(asyncio.wait_for(node.stop(), 10))
        loop.close()
    assert time.monotonic() - started < LONG_LINGER_S / 2  # no write waited out the linger
    assert [len(r) for r, _local in log.writers[0].appends] == [1] * writes
