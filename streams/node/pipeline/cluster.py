"""The Redis Cluster protocol on a node, when its region's shards are spread over several nodes.

Such a node answers like a master of a Redis Cluster (`streams.cluster`): CLUSTER SLOTS / SHARDS /
NODES / ..., `-MOVED slot host:port` for a key another node of the region serves, `-CROSSSLOT`
for a request whose keys hash to different slots, READONLY / READWRITE / ASKING accepted. A node
that owns every shard of its region is a standalone server, as redis-server without
`cluster-enabled`: CLUSTER and its companions answer "cluster support disabled" and every key is
served here (a multi-key command across shards then runs shard by shard:
`streams.node.runtime.shards`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from streams import errors
from streams.cluster import Layout, cluster_command, flag_command, redirect_command, redirect_exec
from streams.commands.base import Command
from streams.config import RegionConfig
from streams.errors import CommandError
from streams.node.pipeline.clients import Client, Queued
from streams.node.pipeline.dispatch import Builtin, sync
from streams.reply import Reply


def layout_of(region: RegionConfig, shards: int, myself: int, port: int | None = None) -> Layout:
    """The region's layout as every node of it computes it (`port`: this node's own port when
    it was moved from the topology's with --port)."""
    endpoints = [(n.announced, n.resp_port) for n in region.nodes]
    if port is not None:
        endpoints[myself] = (endpoints[myself][0], port)
    return Layout.build(
        region.name, shards, endpoints, myself, owners=[n.shards for n in region.nodes]
    )


class ClusterRouting:
    """`streams.node.pipeline.dispatch.Routing` over the region's layout."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def redirect(self, cmd: Command, args: list[bytes]) -> CommandError | None:
        return redirect_command(self.layout, cmd.name, args)

    def redirect_exec(self, queued: list[Queued]) -> CommandError | None:
        return redirect_exec(self.layout, ((cmd.name, args) for cmd, args in queued))


def builtins(
    layout: Layout | None, keys: Callable[[], Iterable[bytes]], now_ms: Callable[[], int]
) -> dict[str, Builtin]:
    """CLUSTER, READONLY, READWRITE and ASKING: Redis Cluster's answers with a layout, else (a
    standalone node) the refusal redis-server gives without cluster support."""
    if layout is None:
        disabled = sync(_disabled)
        return dict.fromkeys(("cluster", "readonly", "readwrite", "asking"), disabled)

    def cluster(client: Client, args: list[bytes]) -> Reply:
        return cluster_command(args, layout, keys, now_ms())

    return {
        "cluster": sync(cluster),
        "readonly": sync(lambda c, a: flag_command(a)),
        "readwrite": sync(lambda c, a: flag_command(a)),
        "asking": sync(lambda c, a: flag_command(a)),
    }


def _disabled(client: Client, args: list[bytes]) -> Reply:
    return CommandError(errors.CLUSTER_DISABLED)
