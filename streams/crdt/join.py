"""The state a joining region starts from: a peer region's state, its region-local part dropped
(issue 37, part C; docs/architecture.md, "Retention and new regions"). Pure.

A region's state is a replicated part (every region holding the same ops holds the same: entries,
tombstones, group existence, the groups' announced XACK frontiers, IDMP records, the applied
vector) and a local part (what only that region's own local ops made: each group's PEL, consumers,
delivery cursors past what the replicated XACK effects say, entries-read, the local seq). A new
region never ran the peer's local ops, so it takes the replicated part only, and its groups are
exactly what a region that had applied the same replicated ops from the start would hold: the
cursors the group was created with, raised by every region's announced frontier, an empty PEL, no
consumers, entries-read unknown (Redis's nil: XINFO GROUPS' lag is then computed afresh).

Why the applied vector may be kept as it is: every op it covers is in the state taken; the new
region reads every op log on its own cluster and its fold drops what the vector covers, by seq
(`streams.kafka.clusters.translate`), so nothing is applied twice and nothing is missing. Ops the
peer held in its causal buffer are not in a snapshot (they are read again from the logs).
"""

from __future__ import annotations

from streams.crdt.causal import CausalBuffer
from streams.crdt.groups import Group
from streams.crdt.region import Region
from streams.ids import IdMode


def replicated_group(group: Group) -> Group:
    """The group as a region that never delivered from it holds it (see the module docstring)."""
    fresh = Group(group.name, group.default_cursor, dict(group.ack_sent), None)
    fresh.region_acks = {r: dict(frontier) for r, frontier in group.region_acks.items()}
    for frontier in fresh.region_acks.values():
        for origin, sid in frontier.items():
            fresh.advance(origin, sid)
    return fresh


def joining_region(peer: Region, region_id: int, mode: IdMode) -> Region:
    """A new region `region_id` starting from `peer`'s state (taken over: do not use `peer`
    afterwards). ValueError when `region_id` already wrote ops into that state (an id in use)."""
    if peer.causal.applied.get(region_id, 0) or region_id == peer.id:
        raise ValueError(
            f"region id {region_id} already wrote ops that region {peer.id}'s state holds: a"
            " joining region needs an id no region ever had"
        )
    joined = Region(region_id, mode)
    state = peer.state
    for ks in state.keys.values():
        for name in list(ks.groups):
            ks.groups[name] = replicated_group(ks.groups[name])
    joined.state = state
    joined.causal = CausalBuffer({o: s for o, s in peer.causal.applied.items() if s > 0})
    joined.local_seq = 0
    return joined
