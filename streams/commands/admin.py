"""CRDT.DIGEST and CRDT.VECTOR: digest and applied vector of the region (the node's other CRDT.*
admin commands act on the node itself: `streams.node.node`)."""

from __future__ import annotations

from streams.commands.base import Command, Context, Result, command
from streams.reply import Map, Reply


def crdt_digest(ctx: Context, args: list[bytes]) -> Result:
    return Result(ctx.state.digest().encode())


def crdt_vector(ctx: Context, args: list[bytes]) -> Result:
    """Applied seq per origin: a map in RESP3, a flat `name seq ...` array in RESP2."""
    pairs: list[tuple[Reply, Reply]] = []
    for region in sorted(set(ctx.vector) | set(ctx.region_names) | {ctx.region}):
        name = ctx.region_names.get(region, f"r{region}")
        pairs.append((name.encode(), ctx.vector.get(region, 0)))
    return Result(Map(tuple(pairs)))


COMMANDS: list[Command] = [
    command("crdt.digest", crdt_digest),
    command("crdt.vector", crdt_vector),
]
