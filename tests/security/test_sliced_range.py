"""Issue 27, item 6: a large range reply is produced in slices, so one XRANGE over a long stream
does not hold the event loop (on main before this, XRANGE - + over 1M entries held it 4.7 s and
every other client's PING waited). What is proved here: the sliced reply is byte for byte the
reply produced at once, forward and reverse, with COUNT, over several origins; it is the state
at the moment the command ran although writes (XADD, XDEL, trims) land between its slices; and
another client is answered while it is being produced. How long the loop is held is measured in
bench/ (docs/benchmarks.md), not asserted here."""

from __future__ import annotations

import asyncio
import random

from streams.commands.reads import entries_reply
from streams.commands.slices import MIN_SLICED, sliced_range
from streams.config import RegionConfig, Topology
from streams.crdt.entries import EntryLogs
from streams.ids import MAX_ID, MIN_ID, StreamID
from streams.node.node import NodeOptions, RegionNode
from streams.node.pipeline.auth import AuthConfig
from streams.node.runtime.memory import MemoryLog
from streams.reply import Reply
from streams.resp.encode import encode
from streams.resp.server import Session, final


def _logs(seed: int, n: int) -> tuple[EntryLogs, list[tuple[int, int, StreamID]]]:
    """Three origins' interleaved entries (equal IDs across origins included), some deleted."""
    rnd = random.Random(seed)
    logs = EntryLogs()
    added: list[tuple[int, int, StreamID]] = []
    ms = 1
    for dot in range(1, n + 1):
        ms += rnd.choice((0, 1, 1, 2))
        origin = rnd.choice((1, 2, 3))
        sid = (ms, rnd.randrange(3))
        fields = tuple(b"f%d" % rnd.randrange(9) for _ in range(rnd.choice((2, 4))))
        if logs.get(origin, sid) is None:
            logs.add(origin, dot, sid, fields)
            added.append((origin, dot, sid))
    for origin, dot, sid in rnd.sample(added, len(added) // 10):
        logs.remove_observed(origin, sid, dot)
    return logs, added


def _at_once(logs: EntryLogs, start: StreamID, end: StreamID, reverse: bool, count: int) -> bytes:
    found = list(logs.range(start, end, reverse=reverse))
    return encode(entries_reply(found if count < 0 else found[:count]))


def _sliced(logs: EntryLogs, start: StreamID, end: StreamID, reverse: bool, count: int) -> bytes:
    sliced = sliced_range(logs, start, end, reverse, count)
    while not sliced.step(37):
        pass
    return bytes(sliced.result())


def test_a_sliced_range_is_byte_for_byte_the_range_answered_at_once() -> None:
    logs, added = _logs(7, 6000)
    ids = sorted(sid for _o, _d, sid in added)
    ranges = [(MIN_ID, MAX_ID), (ids[100], ids[4000]), (ids[5], ids[5]), (ids[-1], MAX_ID)]
    for start, end in ranges:
        for reverse in (False, True):
            for count in (-1, 1, 500, 10**6):
                expected = _at_once(logs, start, end, reverse, count)
                assert _sliced(logs, start, end, reverse, count) == expected


def test_a_sliced_range_is_the_state_when_the_command_ran_whatever_lands_between_slices() -> None:
    logs, added = _logs(11, 6000)
    expected = _at_once(logs, MIN_ID, MAX_ID, False, -1)
    expected_reverse = _at_once(logs, MIN_ID, MAX_ID, True, -1)
    sliced = sliced_range(logs, MIN_ID, MAX_ID, False, -1)
    sliced_reverse = sliced_range(logs, MIN_ID, MAX_ID, True, -1)
    sliced.step(50)
    sliced_reverse.step(50)
    rnd = random.Random(3)
    top = max(sid for _o, _d, sid in added)
    for i, (origin, dot, sid) in enumerate(rnd.sample(added, 800)):
        logs.remove_observed(origin, sid, dot)  # deletes everywhere, whole blocks dropped
        logs.add(origin, 10**6 + i, (sid[0], sid[1] + 7), (b"late", b"insert"))  # reopens
        logs.add(origin, 2 * 10**6 + i, (top[0] + i + 1, 0), (b"new", b"tail"))
    logs.trim_observed(1, added[3000][2], 10**7)
    assert _at_once(logs, MIN_ID, MAX_ID, False, -1) != expected  # the state did change
    assert bytes(sliced.result()) == expected
    assert bytes(sliced_reverse.result()) == expected_reverse


# --- through the node's request pipeline ------------------------------------------------------

TOPOLOGY = Topology(regions=(RegionConfig("r1", 1, "127.0.0.1:1", 7001),), mirror_naming="identity")


async def _answer(node: RegionNode, session: Session, *args: bytes) -> Reply:
    return await final(await node.handle(session, list(args)))


async def _scenario() -> None:
    node = RegionNode(NodeOptions(TOPOLOGY, "r1", auth=AuthConfig()), log=MemoryLog())
    await node.start(serve_resp=False)
    try:
        a, b = Session(1), Session(2)
        total = 4 * MIN_SLICED  # many slices: other clients' replies fit between them
        for chunk in range(0, total, 1000):
            await _answer(node, a, b"MULTI")
            for i in range(chunk, chunk + 1000):
                await _answer(node, a, b"XADD", b"big", b"*", b"n", b"%d" % i, b"pad", b"x" * 20)
            await _answer(node, a, b"EXEC")
        await _answer(node, a, b"MULTI")
        await _answer(node, a, b"XRANGE", b"big", b"-", b"+")
        at_once = await _answer(node, a, b"EXEC")  # inside EXEC: answered at once
        assert isinstance(at_once, list) and len(at_once[0]) == total  # type: ignore[arg-type]
        first = at_once[0][0][0]  # type: ignore[index]

        sliced = asyncio.ensure_future(_answer(node, a, b"XRANGE", b"big", b"-", b"+"))
        await asyncio.sleep(0)  # the range is frozen, its first slice produced
        assert not sliced.done()
        assert await _answer(node, b, b"XDEL", b"big", first) == 1  # runs between slices
        assert isinstance(await _answer(node, b, b"XADD", b"big", b"*", b"late", b"1"), bytes)
        assert not sliced.done()  # the other client was answered while the range was produced
        assert encode(await sliced) == encode(at_once[0])  # type: ignore[index]
        reverse = await _answer(
            node, a, b"XREVRANGE", b"big", b"+", b"-", b"COUNT", b"%d" % (total + 1)
        )
        assert encode(reverse).startswith(b"*%d\r\n*2\r\n" % total)  # one deleted, one added
    finally:
        await node.stop()


def test_the_node_answers_other_clients_while_a_long_range_is_produced() -> None:
    asyncio.run(_scenario())
