"""A region's cluster layout: its node processes, the shards each owns, and which one is this.

Every node of a region computes the same `Layout` from the same configuration, so every node
gives the same CLUSTER SLOTS / SHARDS / NODES and the same MOVED redirections. A node's id is
derived from the region's name and the node's index (Redis draws 40 random hex characters once
and keeps them in nodes.conf; deriving them keeps them stable across restarts with nothing to
store). Every node is a master: a region has no replicas, its durability is the op log.

Config epochs are Redis's `redis-cli --cluster create` numbering (node i has epoch i + 1, the
cluster's current epoch is the highest), since no failover ever bumps them here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from streams.slots import shard_of_slot, shard_ranges

CLUSTER_PORT_INCR = 10000
"""Redis's default cluster bus port offset (`cport = port + 10000`)."""


def node_id(region: str, index: int) -> str:
    """The 40 lowercase hex characters naming node `index` of `region`, stable across restarts
    and distinct between regions (so ids never collide if regions' layouts are ever compared)."""
    seed = b"streams cluster node\x00" + region.encode() + b"\x00%d" % index
    return hashlib.sha1(seed).hexdigest()


def spread(shards: int, nodes: int) -> tuple[tuple[int, ...], ...]:
    """The default ownership: `shards` shards over `nodes` nodes in contiguous blocks of nearly
    equal size (later nodes get the extra ones), so each node serves one slot range."""
    if not 1 <= nodes <= shards:
        raise ValueError(f"{nodes} nodes cannot each own some of {shards} shards")
    return tuple(tuple(range(i * shards // nodes, (i + 1) * shards // nodes)) for i in range(nodes))


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """One node process of the region, as the cluster commands describe it."""

    index: int
    node_id: str
    ip: str
    """The address clients connect to (CLUSTER SLOTS, NODES, SHARDS and MOVED give it)."""
    port: int
    shards: tuple[int, ...]
    slots: tuple[range, ...]
    """The node's slots as maximal runs of consecutive slots, in slot order."""
    config_epoch: int

    @property
    def cport(self) -> int:
        return self.port + CLUSTER_PORT_INCR


@dataclass(frozen=True)
class Layout:
    """The region's nodes (in index order) over `shards` shards, and which one is `myself`."""

    region: str
    shards: int
    nodes: tuple[ClusterNode, ...]
    myself: int

    def __post_init__(self) -> None:
        _check_ownership(self.shards, [n.shards for n in self.nodes])
        if [n.index for n in self.nodes] != list(range(len(self.nodes))):
            raise ValueError("nodes are listed in index order, from 0")
        if any(n.slots != slot_runs(self.shards, n.shards) for n in self.nodes):
            raise ValueError("a node's slots are the runs of its shards' slot ranges")
        if len({n.node_id for n in self.nodes}) != len(self.nodes):
            raise ValueError("node ids must differ")
        if not 0 <= self.myself < len(self.nodes):
            raise ValueError(f"myself ({self.myself}) is not one of the {len(self.nodes)} nodes")

    @classmethod
    def build(
        cls,
        region: str,
        shards: int,
        endpoints: Sequence[tuple[str, int]],
        myself: int,
        owners: Sequence[Sequence[int]] | None = None,
    ) -> Layout:
        """The layout of `region`'s nodes at `endpoints` (ip, port), node i owning `owners[i]`
        (default: `spread`)."""
        owned = spread(shards, len(endpoints)) if owners is None else owners
        if len(owned) != len(endpoints):
            raise ValueError(f"{len(endpoints)} endpoints but {len(owned)} ownership sets")
        _check_ownership(shards, owned)
        nodes = tuple(
            ClusterNode(
                index=i,
                node_id=node_id(region, i),
                ip=ip,
                port=port,
                shards=tuple(sorted(owned[i])),
                slots=slot_runs(shards, owned[i]),
                config_epoch=i + 1,
            )
            for i, (ip, port) in enumerate(endpoints)
        )
        return cls(region, shards, nodes, myself)

    @property
    def me(self) -> ClusterNode:
        return self.nodes[self.myself]

    @property
    def current_epoch(self) -> int:
        return max(n.config_epoch for n in self.nodes)

    @cached_property
    def _shard_owner(self) -> tuple[ClusterNode, ...]:
        owner: dict[int, ClusterNode] = {s: n for n in self.nodes for s in n.shards}
        return tuple(owner[s] for s in range(self.shards))

    def owner(self, slot: int) -> ClusterNode:
        """The node that serves `slot`."""
        return self._shard_owner[shard_of_slot(slot, self.shards)]

    def runs(self) -> list[tuple[range, ClusterNode]]:
        """Every run of consecutive slots served by one node, in slot order (CLUSTER SLOTS)."""
        return sorted(((r, n) for n in self.nodes for r in n.slots), key=lambda rn: rn[0].start)


def _check_ownership(shards: int, owned: Sequence[Sequence[int]]) -> None:
    if sorted(s for shards_of_node in owned for s in shards_of_node) != list(range(shards)):
        raise ValueError(f"every one of the {shards} shards needs exactly one owner")


def slot_runs(shards: int, owned: Sequence[int]) -> tuple[range, ...]:
    """The slots of the `owned` shards as maximal runs: adjacent shards' ranges merge, as Redis
    reports a node's consecutive slots as one range whatever order they were assigned in."""
    ranges = shard_ranges(shards)
    runs: list[range] = []
    for shard in sorted(owned):
        r = ranges[shard]
        if runs and runs[-1].stop == r.start:
            runs[-1] = range(runs[-1].start, r.stop)
        else:
            runs.append(r)
    return tuple(runs)
