"""A region joining the topology (issue 37, part C): the new region's id and the topology file
that names it. Pure (no I/O).

Why a fresh id: an op is named by its dot (origin id, seq), strict-mode stream IDs carry the
origin id in their sequence part (`streams.ids`), and every reader that ever saw a removed region
still accepts its old records under its id (`Topology.origins`). A region id that was used before,
by a current region or by one that left (`[[removed]]`), would make the new region's ops collide
with the old ones (dropped as duplicates, or refused as conflicts by the record gate) and its IDs
with theirs. So the new id is one no region of the file ever had: one above the highest ever
used (ids are never reused, so "above every id" is the simple rule that cannot pick an old one),
and a name no region ever had either (topic names derive from it, and the old region's topics
may still be on every cluster).
"""

from __future__ import annotations

import dataclasses

from streams.config.nodes import TopologyError
from streams.config.topology import RegionConfig, Topology

MAX_REGION_ID = 255
"""Region ids are 1..255 (`streams.ids.MAX_REGION_ID`: strict-mode IDs carry them)."""


def used_ids(topology: Topology) -> set[int]:
    """Every id a region of the file ever had (current and removed)."""
    return {r.id for r in topology.regions} | {gone.id for gone in topology.removed}


def next_region_id(topology: Topology) -> int:
    """One above every id ever used; TopologyError when 255 is taken."""
    new = max(used_ids(topology)) + 1
    if new > MAX_REGION_ID:
        raise TopologyError(
            f"no region id is left: ids are 1..{MAX_REGION_ID}, never reused, and"
            f" {MAX_REGION_ID} was already given"
        )
    return new


def with_region(topology: Topology, region: RegionConfig) -> Topology:
    """`topology` with `region` added; TopologyError when its id or name was ever used (a
    removed region's included: such an id names old ops that readers still accept)."""
    for gone in topology.removed:
        if gone.id == region.id or gone.name == region.name:
            raise TopologyError(
                f"region {region.name!r} (id {region.id}): region {gone.name!r} (id {gone.id})"
                " was removed from this topology, and a removed region's id and name are never"
                f" used again: give the new region a new name and an id no region ever had"
                f" (next free id: {next_region_id(topology)})"
            )
    for current in topology.regions:
        if current.id == region.id or current.name == region.name:
            raise TopologyError(
                f"region {region.name!r} (id {region.id}): region {current.name!r} (id"
                f" {current.id}) is already in the topology (next free id:"
                f" {next_region_id(topology)})"
            )
    return dataclasses.replace(topology, regions=(*topology.regions, region))
