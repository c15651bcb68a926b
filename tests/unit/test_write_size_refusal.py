"""A write whose record the op log would not take is refused to its own client, with nothing
applied, while the other clients' writes of the same moment go into the same batch and commit
(issue 27 item 1; before, one such record failed the whole batch and reloaded the region).
Through `RegionNode.handle` on an in-memory log whose record limit is the test's; the same on
the embedded broker with node processes is tests/integration/test_kafka_sizes.py."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from memory_node import answer

from streams.config import RegionConfig, Topology
from streams.crdt import ops
from streams.kafka.sizes import MAX_RECORD_BYTES
from streams.node.node import NodeOptions, RegionNode
from streams.node.runtime.memory import MemoryLog
from streams.ops.codec import decode
from streams.reply import Reply
from streams.resp.server import Session
from topology.ports import free_port

TOPOLOGY = Topology(regions=(RegionConfig("r1", 1, "127.0.0.1:1", 7001),))


def _node(loop: asyncio.AbstractEventLoop, limit: int) -> tuple[RegionNode, MemoryLog]:
    log = MemoryLog()
    log.record_limit = limit
    node = RegionNode(NodeOptions(TOPOLOGY, "r1", clock=lambda: 1.0), log=log)
    loop.run_until_complete(node.start(serve_resp=False))
    return node, log


def _close(loop: asyncio.AbstractEventLoop, *nodes: RegionNode) -> None:
    """Stop the nodes (their commit and housekeeping tasks end), then close their loop."""
    for node in nodes:
        loop.run_until_complete(asyncio.wait_for(node.stop(), 10))
    loop.close()


def _keys_appended(log: MemoryLog) -> list[list[bytes]]:
    """Per batch appended, the keys of its replicated ops."""
    out = []
    for replicated, _local in log.writers[0].appends:
        batch = []
        for record in replicated:
            op = decode(record.value)
            assert isinstance(op, ops.Op)
            batch.append(op.body.key)
        if batch:
            out.append(batch)
    return out


def _refused(reply: Reply) -> str:
    assert isinstance(reply, Exception), reply
    return str(reply)


def test_the_oversized_write_alone_is_refused_and_the_others_commit_in_the_same_batch() -> None:
    loop = asyncio.new_event_loop()
    node, log = _node(loop, limit=20_000)
    a, big, c = Session(1), Session(2), Session(3)

    async def moment() -> list[Reply]:
        return list(
            await asyncio.gather(
                answer(node, a, [b"XADD", b"s", b"*", b"f", b"1"]),
                answer(node, big, [b"XADD", b"s", b"*", b"f", b"x" * 30_000]),
                answer(node, c, [b"XADD", b"s", b"*", b"f", b"2"]),
            )
        )

    first, refused, third = loop.run_until_complete(moment())
    control, _log = _node(loop, limit=20_000)  # the same two writes without the big one
    expected = [
        loop.run_until_complete(answer(control, Session(9), [b"XADD", b"s", b"*", b"f", v]))
        for v in (b"1", b"2")
    ]
    assert [first, third] == expected  # the refused write took no ID
    text = _refused(refused)
    assert text.startswith("ERR the write is too large for the op log, nothing was applied")
    assert "at most 20000 (max.message.bytes)" in text
    assert _keys_appended(log) == [[b"s", b"s"]]  # one batch, without it
    assert loop.run_until_complete(answer(node, big, [b"XLEN", b"s"])) == 2
    _close(loop, node, control)


def test_a_value_under_the_limit_whose_record_is_over_it_is_refused_once_encoded() -> None:
    """Key, ID, field name, Avro framing and headers count too: measured on the sealed record."""
    loop = asyncio.new_event_loop()
    node, log = _node(loop, limit=20_000)
    session = Session(1)
    reply = loop.run_until_complete(
        answer(node, session, [b"XADD", b"s", b"*", b"f", b"x" * 19_990])
    )
    assert "too large for the op log" in _refused(reply)
    fits = loop.run_until_complete(
        answer(node, session, [b"XADD", b"s", b"*", b"f", b"x" * 19_000])
    )
    assert fits == b"1000-1"
    assert _keys_appended(log) == [[b"s"]]
    _close(loop, node)


def test_a_70mb_value_is_refused_against_the_default_limit_before_it_is_encoded() -> None:
    """Counted from the op's bytes, not encoded: the refusal costs the event loop well under
    the ~80 ms encoding 70 MB takes (measured, not asserted: see docs/benchmarks.md)."""
    loop = asyncio.new_event_loop()
    node, log = _node(loop, limit=MAX_RECORD_BYTES)
    huge = b"v" * (70 * 1024 * 1024)
    started = time.perf_counter()
    reply = loop.run_until_complete(answer(node, Session(1), [b"XADD", b"h", b"*", b"f", huge]))
    print(f"70 MB XADD refused in {(time.perf_counter() - started) * 1000:.1f} ms")
    text = _refused(reply)
    assert f"at least {70 * 1024 * 1024 + 2}" in text and str(MAX_RECORD_BYTES) in text
    assert _keys_appended(log) == []
    _close(loop, node)


def test_a_value_longer_than_the_log_takes_is_dropped_unread_and_refused_over_a_socket() -> None:
    """The RESP server drops an argument longer than the log's record limit as it arrives
    (`Limits.max_arg`, `streams.resp.request.Dropped`): its client gets the size refusal, its
    connection works on, and inside MULTI the refusal dooms the transaction as Redis's
    queue-time errors do."""
    port = free_port()
    topology = Topology(regions=(RegionConfig("r1", 1, "127.0.0.1:1", port),))
    log = MemoryLog()
    log.record_limit = 100_000
    node = RegionNode(NodeOptions(topology, "r1", clock=lambda: 1.0), log=log)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(node.start())
    assert node.limits.max_arg == 100_000

    def client_side() -> None:
        client = redis.Redis(port=port, socket_timeout=10)
        try:
            with pytest.raises(redis.ResponseError) as refused:
                client.xadd("s", {"f": b"x" * 300_000})
            assert str(refused.value) == (
                "the request is too large for the op log, nothing was applied: an argument of"
                " 300000 bytes, the log takes at most 100000 (max.message.bytes); the argument"
                " was not kept"
            )
            assert client.xadd("s", {"f": "small"})  # the connection works on
            with pytest.raises(redis.ResponseError, match="Command # 2 .* too large for the op"):
                with client.pipeline(transaction=True) as tx:
                    tx.xadd("s", {"f": "queued"}).xadd("s", {"f": b"y" * 200_000}).execute()
            assert client.xlen("s") == 1
        finally:
            client.close()

    try:
        loop.run_until_complete(asyncio.wait_for(loop.run_in_executor(None, client_side), 30))
    finally:
        loop.run_until_complete(node.stop())
        loop.close()
