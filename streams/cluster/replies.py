"""The replies of the CLUSTER subcommands, in redis-server 7.0.15's exact shapes (cluster.c).

Built from a `Layout` only, so every node of a region answers the same topology. What a real
cluster learns from its gossip bus is fixed here: every node is a connected master, no failure
reports, replication offset 0 (a region has no replicas), and no bus messages counted. Times are
parameters (`now_ms`), read by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

from streams.cluster.layout import ClusterNode, Layout
from streams.reply import Map, Reply
from streams.slots import SLOTS, key_slot

HELP = (
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a "
    "link",
)
"""CLUSTER HELP's lines (clusterCommand), word for word, including the subcommands this
database refuses: the text is Redis's."""


def slots_reply(layout: Layout) -> list[Reply]:
    """CLUSTER SLOTS: per run of slots, [start, end, [ip, port, id, {}]] in slot order (the
    empty map holds the endpoints other than the preferred one: none, as no hostname is set)."""
    return [
        [run.start, run.stop - 1, [node.ip.encode(), node.port, node.node_id.encode(), Map(())]]
        for run, node in layout.runs()
    ]


def shards_reply(layout: Layout) -> list[Reply]:
    """CLUSTER SHARDS: per master, {slots: [start, end, ...], nodes: [its details]}."""
    return [
        Map(
            (
                (b"slots", [edge for run in node.slots for edge in (run.start, run.stop - 1)]),
                (b"nodes", [_shard_node(node)]),
            )
        )
        for node in layout.nodes
    ]


def _shard_node(node: ClusterNode) -> Map:
    return Map(
        (
            (b"id", node.node_id.encode()),
            (b"port", node.port),
            (b"ip", node.ip.encode()),
            (b"endpoint", node.ip.encode()),
            (b"role", b"master"),
            (b"replication-offset", 0),
            (b"health", b"online"),
        )
    )


def nodes_text(layout: Layout, now_ms: int) -> bytes:
    """CLUSTER NODES: one line per node, each ending in a newline (clusterGenNodesDescription)."""
    return "".join(node_line(layout, node, now_ms) + "\n" for node in layout.nodes).encode()


def node_line(layout: Layout, node: ClusterNode, now_ms: int) -> str:
    """`<id> <ip>:<port>@<cport> <flags> <master> <ping-sent> <pong-recv> <epoch> <link>
    <slot> ...`: myself reports no ping or pong times (0 0); a peer's last pong is `now_ms`,
    as a peer on a healthy bus answers within the ping period."""
    flags = "myself,master" if node.index == layout.myself else "master"
    pong = 0 if node.index == layout.myself else now_ms
    slots = "".join(
        f" {r.start}" if len(r) == 1 else f" {r.start}-{r.stop - 1}" for r in node.slots
    )
    return (
        f"{node.node_id} {node.ip}:{node.port}@{node.cport} {flags} - 0 {pong} "
        f"{node.config_epoch} connected{slots}"
    )


def info_text(layout: Layout) -> bytes:
    """CLUSTER INFO: state ok with every slot assigned and ok. Redis lists a line per kind of
    bus message it has sent or received (ping, pong, meet, ...) only for kinds it counted; no
    bus runs here, so only the totals (0) are listed."""
    fields: dict[str, int | str] = {
        "cluster_state": "ok",
        "cluster_slots_assigned": SLOTS,
        "cluster_slots_ok": SLOTS,
        "cluster_slots_pfail": 0,
        "cluster_slots_fail": 0,
        "cluster_known_nodes": len(layout.nodes),
        "cluster_size": sum(1 for n in layout.nodes if n.slots),
        "cluster_current_epoch": layout.current_epoch,
        "cluster_my_epoch": layout.me.config_epoch,
        "cluster_stats_messages_sent": 0,
        "cluster_stats_messages_received": 0,
        "total_cluster_links_buffer_limit_exceeded": 0,
    }
    return "".join(f"{k}:{v}\r\n" for k, v in fields.items()).encode()


def keys_in_slot(keys: Iterable[bytes], slot: int) -> Iterator[bytes]:
    """The keys of `keys` that hash to `slot`, in the order given."""
    return (k for k in keys if key_slot(k) == slot)


def count_keys_in_slot(keys: Iterable[bytes], slot: int) -> int:
    """CLUSTER COUNTKEYSINSLOT's count."""
    return sum(1 for _ in keys_in_slot(keys, slot))


def get_keys_in_slot(keys: Iterable[bytes], slot: int, count: int) -> list[Reply]:
    """CLUSTER GETKEYSINSLOT's keys: at most `count` of the slot's keys."""
    return list(islice(keys_in_slot(keys, slot), count))
