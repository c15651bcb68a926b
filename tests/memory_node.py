"""Region nodes on an in-memory op log, for the unit tests that drive a node's request pipeline
directly (`RegionNode.handle`) rather than over a socket.

A node's write path commits in a task of the event loop it started on, so each node gets a loop
of its own (`serving`, `run`); `answer` gives what the client would read: a held reply once its
batch committed (`streams.resp.server.final`, the one reading of a held reply's outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from streams.config import RegionConfig, Topology
from streams.node.node import NodeOptions, RegionNode
from streams.node.runtime.memory import MemoryLog
from streams.reply import Reply
from streams.resp.server import Session, final

T = TypeVar("T")

ONE_REGION = Topology(
    regions=(RegionConfig("r1", 1, "127.0.0.1:1", 7001),), mirror_naming="identity"
)
"""One region `r1` whose Kafka is never dialled (the log is in memory)."""

LOOPS: dict[int, asyncio.AbstractEventLoop] = {}
STARTED: list[RegionNode] = []
"""The nodes `serving` started and `stop_all` has not stopped yet."""


def serving(node: RegionNode) -> RegionNode:
    """`node`, started (nothing to catch up with) on an event loop of its own."""
    loop = LOOPS[id(node)] = asyncio.new_event_loop()
    loop.run_until_complete(node.start(serve_resp=False))
    STARTED.append(node)
    return node


def stop_all() -> None:
    """Stop every node `serving` started and close its loop (a test's teardown). A node left
    running keeps its commit and housekeeping tasks pending on a loop nobody drives again, and
    asyncio reports each ("Task was destroyed but it is pending!") when it is collected."""
    while STARTED:
        node = STARTED.pop()
        loop = LOOPS.pop(id(node))
        loop.run_until_complete(asyncio.wait_for(node.stop(), 10))
        loop.close()


def memory_node(
    topology: Topology = ONE_REGION,
    region: str = "r1",
    log: MemoryLog | None = None,
    **options: Any,
) -> RegionNode:
    """A started node of `region` on an in-memory log (`log`, or a new one)."""
    chosen = log if log is not None else MemoryLog(region)
    return serving(RegionNode(NodeOptions(topology, region, **options), log=chosen))


def run(node: RegionNode, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on `node`'s loop (the node works only while a test drives its loop)."""
    return LOOPS[id(node)].run_until_complete(coro)


async def answer(node: RegionNode, session: Session, args: list[bytes]) -> Reply:
    """The reply the client gets: a held reply once its write batch committed (or what replaced
    it: the batch's refusal, or a read run again)."""
    return await final(await node.handle(session, args))
