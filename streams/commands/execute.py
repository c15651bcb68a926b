"""Run a command on a pure `Region`: dispatch, then issue its ops in order.

This is the whole write path without Kafka: the simulated regions of the tests use it directly,
and the node wraps the same steps around its log appends.
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


def context(region: Region, now_ms: int) -> Context:
    return Context(region.state, region.id, region.mode, now_ms, region.vector)


def run(region: Region, args: list[bytes], now_ms: int) -> Executed:
    result = dispatch(context(region, now_ms), args)
    done = Executed(result.reply, block=result.block)
    for body in result.ops:
        if ops.is_replicated(body):
            done.replicated.append(region.issue(body, now_ms))  # type: ignore[arg-type]
        else:
            done.local.append(region.issue_local(body, now_ms))  # type: ignore[arg-type]
    return done
