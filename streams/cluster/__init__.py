"""Redis Cluster's protocol for a region that runs on more than one node process.

A region of S shards (contiguous ranges of the 16384 hash slots, `streams.slots`) runs on M node
processes, each owning some shards. With M > 1 the nodes answer as the masters of a Redis Cluster,
so cluster clients (redis-py's RedisCluster, `redis-cli -c`, `redis-benchmark --cluster`) find
each key's node and follow redirections unchanged. Pure code: no sockets, no clock; the node
wires it in.

- `layout`: the region's nodes (ids, addresses, shards, slot runs, epochs) and which one is this.
- `replies`: CLUSTER SLOTS / SHARDS / NODES / INFO / key-slot replies in Redis 7.0.15's shapes.
- `command`: CLUSTER's subcommand dispatch with Redis's errors; READONLY / READWRITE / ASKING;
  INFO's cluster section.
- `routing`: run here, MOVED or CROSSSLOT, for a request and for a MULTI/EXEC queue.
"""

from streams.cluster.command import KeySource, cluster_command, flag_command, info_section
from streams.cluster.layout import ClusterNode, Layout, node_id, spread
from streams.cluster.routing import redirect, redirect_command, redirect_exec

__all__ = [
    "ClusterNode",
    "KeySource",
    "Layout",
    "cluster_command",
    "flag_command",
    "info_section",
    "node_id",
    "redirect",
    "redirect_command",
    "redirect_exec",
    "spread",
]
