"""Run a command on a pure `Region`: the node's steps without Kafka.

`dispatch` (resolve, arity, run) then `Region.issue_all`, exactly as the node resolves a request
and issues its ops; the simulated regions of the scenarios and the differential tests use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.commands.base import BlockRequest, Context
from streams.commands.table import dispatch
from streams.crdt import ops
from streams.crdt.region import Region
from streams.reply import Reply


@dataclass
class Executed:
    reply: Reply
    replicated: list[ops.Op] = field(default_factory=list)
    local: list[ops.LocalOp] = field(default_factory=list)
    block: BlockRequest | None = None


def context(region: Region, now_ms: int, regions: tuple[int, ...] = ()) -> Context:
    return Context(region.state, region.id, region.mode, now_ms, regions)


def run(region: Region, args: list[bytes], now_ms: int, regions: tuple[int, ...] = ()) -> Executed:
    """`regions`: the simulated topology (ACKED consults every region's announced frontier)."""
    result = dispatch(context(region, now_ms, regions), args)
    replicated, local = region.issue_all(result.effects, now_ms)
    return Executed(result.reply, replicated, local, result.block)
