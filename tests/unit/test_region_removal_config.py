"""Regions that left a topology (`[[removed]]`, issue 37 part B): kept in the file, their id and
name never used again, their ids still origins (old records stay valid), and causal stability
over the remaining regions only (`streams.crdt.region.Region.stable_vector`)."""

from __future__ import annotations

import pytest

from streams.config import TopologyError, dumps, loads
from streams.crdt.region import Region
from streams.ids import IdMode

TEXT = """
[topology]
mirror_naming = "identity"
"""


def _region(name: str, rid: int) -> str:
    return (
        f'\n[[region]]\nname = "{name}"\nid = {rid}\n'
        f'bootstrap = "127.0.0.1:9{rid}"\nresp_port = 70{rid}\n'
    )


def test_a_removed_region_is_kept_in_the_file_and_never_reused() -> None:
    topology = loads(TEXT + _region("r1", 1) + _region("r2", 2) + _region("r3", 3))
    left = topology.without("r3")
    assert left.names == ["r1", "r2"]
    assert left.origins == {1: "r1", 2: "r2", 3: "r3"}
    again = loads(dumps(left))
    assert again == left and "[[removed]]" in dumps(left)
    with pytest.raises(KeyError, match="was removed"):
        again.region("r3")
    for name, rid in (("r9", 3), ("r3", 9)):
        with pytest.raises(TopologyError, match="never used again"):
            loads(dumps(left) + _region(name, rid))
    with pytest.raises(TopologyError, match="only region"):
        left.without("r2").without("r1")
    with pytest.raises(TopologyError, match=r"\[\[removed\]\]"):
        loads(TEXT + _region("r1", 1) + "\n[[removed]]\nname = 'r2'\n")


def test_causal_stability_stops_waiting_for_a_removed_region() -> None:
    region = Region(1, IdMode.STRICT)
    region._progress = {2: {1: 5, 2: 7, 3: 4}, 3: {1: 1, 2: 1, 3: 9}}
    region.causal.applied.update({1: 6, 2: 7, 3: 9})
    assert region.stable_vector([1, 2, 3]) == {1: 1, 2: 1, 3: 4}  # r3 holds everything back
    # r3 removed: the others' progress alone; its own ops (origin 3) still an origin
    assert region.stable_vector([1, 2], former=[3]) == {1: 5, 2: 7, 3: 4}
