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
from streams.config import NodeConfig, RegionConfig
from streams.errors import CommandError
from streams.node.pipeline.clients import Client, Queued
from streams.node.pipeline.dispatch import Builtin, sync
from streams.reply import Reply


def layout_of(
    region: RegionConfig,
    shards: int,
    myself: int,
    me: NodeConfig | None = None,
    tls: bool = False,
) -> Layout:
    """The region's layout as every node of it computes it (`me`: this node as it runs, its
    ports moved from the topology's with --port / --tls-port). `tls`: the layout announced to a
    client that came over TLS (Redis's `tls-cluster yes`): each node's TLS port, else its
    plaintext one; a plaintext client is given each node's plaintext port, else its TLS one."""
    nodes = list(region.nodes)
    if me is not None:
        nodes[myself] = me
    endpoints = [(n.announced, announced_port(n, tls)) for n in nodes]
    return Layout.build(
        region.name, shards, endpoints, myself, owners=[n.shards for n in region.nodes]
    )


def announced_port(node: NodeConfig, tls: bool) -> int:
    """The port of `node` given to a client over TLS (`tls`) or plaintext: the same kind when
    the node serves it, else the other."""
    first, second = (node.tls_port, node.resp_port) if tls else (node.resp_port, node.tls_port)
    return first or second


class ClusterRouting:
    """`streams.node.pipeline.dispatch.Routing` over the region's layout: MOVED names the
    owner's TLS port to a client over TLS (`tls_layout`), its plaintext port to the others."""

    def __init__(self, layout: Layout, tls_layout: Layout | None = None) -> None:
        self.layout = layout
        self.tls_layout = tls_layout if tls_layout is not None else layout

    def _for(self, client: Client) -> Layout:
        return self.tls_layout if client.tls else self.layout

    def redirect(self, client: Client, cmd: Command, args: list[bytes]) -> CommandError | None:
        return redirect_command(self._for(client), cmd.name, args)

    def redirect_exec(self, client: Client, queued: list[Queued]) -> CommandError | None:
        return redirect_exec(self._for(client), ((cmd.name, args) for cmd, args in queued))


def builtins(
    layout: Layout | None,
    keys: Callable[[], Iterable[bytes]],
    now_ms: Callable[[], int],
    tls_layout: Layout | None = None,
) -> dict[str, Builtin]:
    """CLUSTER, READONLY, READWRITE and ASKING: Redis Cluster's answers with a layout (the
    TLS one to a client over TLS), else (a standalone node) the refusal redis-server gives
    without cluster support."""
    if layout is None:
        disabled = sync(_disabled)
        return dict.fromkeys(("cluster", "readonly", "readwrite", "asking"), disabled)
    over_tls = tls_layout if tls_layout is not None else layout

    def cluster(client: Client, args: list[bytes]) -> Reply:
        return cluster_command(args, over_tls if client.tls else layout, keys, now_ms())

    return {
        "cluster": sync(cluster),
        "readonly": sync(lambda c, a: flag_command(a)),
        "readwrite": sync(lambda c, a: flag_command(a)),
        "asking": sync(lambda c, a: flag_command(a)),
    }


def _disabled(client: Client, args: list[bytes]) -> Reply:
    return CommandError(errors.CLUSTER_DISABLED)
