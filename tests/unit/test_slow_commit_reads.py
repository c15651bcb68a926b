"""Reads while a write batch is slow to commit (a broker that stalls, issue 22), through
`RegionNode.handle` on an in-memory log whose appends wait at a gate: another client's read is
answered while the batch is still pending, from the state the log holds (without the pending
write); the writing client's own read waits for its write (read-your-writes); a blocked XREAD
woken by the pending write answers only once it committed."""

from __future__ import annotations

import asyncio

from memory_node import answer

from streams.config import RegionConfig, Topology
from streams.node.node import NodeOptions, RegionNode
from streams.node.runtime.memory import MemoryLog
from streams.reply import Map
from streams.resp.server import Session

TOPOLOGY = Topology(regions=(RegionConfig("r1", 1, "127.0.0.1:1", 7001),))


def test_a_slow_batch_holds_writes_but_not_other_clients_reads() -> None:
    loop = asyncio.new_event_loop()
    log = MemoryLog()
    node = RegionNode(NodeOptions(TOPOLOGY, "r1"), log=log)
    loop.run_until_complete(node.start(serve_resp=False))
    writer, reader, blocked = Session(1), Session(2), Session(3)

    async def scenario() -> None:
        await answer(node, writer, [b"XADD", b"s", b"*", b"f", b"1"])
        waiting = asyncio.ensure_future(
            answer(node, blocked, [b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"])
        )
        await asyncio.sleep(0.05)
        gate = log.writers[0].gate = asyncio.Event()
        write = asyncio.ensure_future(answer(node, writer, [b"XADD", b"s", b"*", b"f", b"2"]))
        await asyncio.sleep(0)
        own_read = asyncio.ensure_future(answer(node, writer, [b"XLEN", b"s"]))
        # Answered while the batch is pending (else this waits for the gate: a timeout), with
        # what the log holds: one entry.
        assert await asyncio.wait_for(answer(node, reader, [b"XLEN", b"s"]), 5) == 1
        entries = await asyncio.wait_for(answer(node, reader, [b"XRANGE", b"s", b"-", b"+"]), 5)
        assert isinstance(entries, list) and len(entries) == 1
        await asyncio.sleep(0.2)
        assert not write.done() and not own_read.done() and not waiting.done()
        gate.set()
        added = await write
        assert await own_read == 2
        assert await answer(node, reader, [b"XLEN", b"s"]) == 2
        woken = await asyncio.wait_for(waiting, 5)
        assert isinstance(woken, Map), woken
        assert [(key, [e[0] for e in got]) for key, got in woken.pairs] == [(b"s", [added])]

    try:
        loop.run_until_complete(scenario())
    finally:
        loop.run_until_complete(node.stop())
        loop.close()
