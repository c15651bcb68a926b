"""CLUSTER and its companions (READONLY, READWRITE, ASKING) for a node of a multi-node region.

`cluster_command` answers the CLUSTER subcommands that describe the cluster (INFO, MYID, NODES,
SLOTS, SHARDS, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, REPLICAS/SLAVES, COUNT-FAILURE-REPORTS,
HELP) with Redis's replies and errors. It checks the subcommand and its arity itself, with the
texts Redis's dispatcher gives, so it is right even when called before the node's own checks.
The subcommands that change a Redis cluster (ADDSLOTS, MEET, SETSLOT, FAILOVER, RESET, ...) are
refused as unsupported: a region's layout comes from its configuration, and each node computes
the same one.

CLUSTER NODES and INFO are bulk strings in RESP3 too (Redis: verbatim strings), as INFO and
CLIENT LIST are in this database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from streams import errors
from streams.cluster import replies
from streams.cluster.layout import Layout
from streams.commands.base import parse_int
from streams.commands.catalogue import is_redis_command, spec, unsupported
from streams.commands.groupview import help_reply
from streams.errors import CommandError
from streams.reply import OK, Reply, Status
from streams.slots import SLOTS, key_slot

KeySource = Callable[[], Iterable[bytes]]
"""The node's keys (every shard it owns), read only by COUNTKEYSINSLOT and GETKEYSINSLOT."""


def cluster_command(args: list[bytes], layout: Layout, keys: KeySource, now_ms: int) -> Reply:
    """CLUSTER <subcommand> ...: the reply, or CommandError with Redis's text."""
    if len(args) < 2:
        raise errors.wrong_arity("cluster")
    sub = args[1].lower().decode("utf-8", "replace")
    name = f"cluster|{sub}"
    if not is_redis_command(name):
        raise errors.unknown_subcommand("cluster", args[1])
    if not spec(name).arity_ok(len(args)):
        raise errors.wrong_arity(name)
    match sub:
        case "help":
            return help_reply(args[0], replies.HELP)
        case "info":
            return replies.info_text(layout)
        case "myid":
            return layout.me.node_id.encode()
        case "nodes":
            return replies.nodes_text(layout, now_ms)
        case "slots":
            return replies.slots_reply(layout)
        case "shards":
            return replies.shards_reply(layout)
        case "keyslot":
            return key_slot(args[2])
        case "countkeysinslot":
            slot = parse_int(args[2])
            if not 0 <= slot < SLOTS:
                raise CommandError(errors.INVALID_SLOT)
            return replies.count_keys_in_slot(keys(), slot)
        case "getkeysinslot":
            slot, count = parse_int(args[2]), parse_int(args[3])
            if not 0 <= slot < SLOTS or count < 0:
                raise CommandError(errors.INVALID_SLOT_OR_COUNT)
            return replies.get_keys_in_slot(keys(), slot, count)
        case "replicas" | "slaves":
            _known_node(layout, args[2])
            return []
        case "count-failure-reports":
            _known_node(layout, args[2])
            return 0
    raise unsupported(name)


def _known_node(layout: Layout, raw: bytes) -> None:
    """clusterLookupNode: a node id of this cluster, else `Unknown node <id>`."""
    if not any(n.node_id.encode() == raw for n in layout.nodes):
        raise errors.unknown_node(raw)


def flag_command(args: list[bytes]) -> Status:
    """READONLY, READWRITE, ASKING: accepted (+OK). Every node is a master that serves only its
    own slots and no slot ever migrates, so neither flag changes where a request may run."""
    return OK


def info_section() -> dict[str, object]:
    """INFO's `# Cluster` section of a node that speaks the cluster protocol."""
    return {"cluster_enabled": 1}
