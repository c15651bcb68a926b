"""`streams.cluster.layout`: node ids, shard ownership, slot runs, the owner of a slot."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.cluster import Layout, node_id, spread
from streams.cluster.layout import slot_runs
from streams.slots import SLOTS, shard_of_slot, shard_ranges

ENDPOINTS = [("10.0.0.1", 7000), ("10.0.0.2", 7001), ("10.0.0.3", 7002)]


def test_node_ids_are_40_lowercase_hex_stable_and_distinct() -> None:
    ids = {node_id(region, i) for region in ("r1", "r2", "r10") for i in range(3)}
    assert len(ids) == 9
    assert all(re.fullmatch(r"[0-9a-f]{40}", i) for i in ids)
    assert node_id("r1", 0) == node_id("r1", 0) == "5df9e113860911855eacc61790c2283c179c73cf"
    assert node_id("r1", 1) != node_id("r11", 0)


@pytest.mark.parametrize(
    ("shards", "nodes", "expected"),
    [
        (1, 1, ((0,),)),
        (2, 2, ((0,), (1,))),
        (4, 2, ((0, 1), (2, 3))),
        (3, 2, ((0,), (1, 2))),
        (5, 3, ((0,), (1, 2), (3, 4))),
    ],
)
def test_spread_gives_contiguous_blocks(
    shards: int, nodes: int, expected: tuple[tuple[int, ...], ...]
) -> None:
    assert spread(shards, nodes) == expected


@pytest.mark.parametrize(("shards", "nodes"), [(2, 3), (1, 0)])
def test_spread_needs_a_shard_per_node(shards: int, nodes: int) -> None:
    with pytest.raises(ValueError):
        spread(shards, nodes)


def test_build_numbers_nodes_and_epochs_and_merges_adjacent_shards() -> None:
    layout = Layout.build("r1", 4, ENDPOINTS[:2], myself=1)
    first, second = layout.nodes
    assert (first.index, first.shards, first.config_epoch) == (0, (0, 1), 1)
    assert first.slots == (range(0, 8192),)
    assert second.slots == (range(8192, 16384),)
    assert second.cport == 17001
    assert layout.me is second and layout.current_epoch == 2
    assert first.node_id == node_id("r1", 0)


def test_interleaved_ownership_keeps_separate_runs() -> None:
    layout = Layout.build("r1", 4, ENDPOINTS[:2], myself=0, owners=[(2, 0), (3, 1)])
    r = shard_ranges(4)
    assert layout.nodes[0].shards == (0, 2)
    assert layout.nodes[0].slots == (r[0], r[2])
    assert [(run, node.index) for run, node in layout.runs()] == [
        (r[0], 0),
        (r[1], 1),
        (r[2], 0),
        (r[3], 1),
    ]


def test_slot_runs_merge_in_slot_order_whatever_the_order_given() -> None:
    assert slot_runs(16384, [7, 5, 6]) == (range(5, 8),)
    assert slot_runs(16384, [9, 5]) == (range(5, 6), range(9, 10))
    assert slot_runs(2, []) == ()


@given(st.integers(1, 64), st.data())
def test_every_slot_has_the_owner_of_its_shard(shards: int, data: st.DataObject) -> None:
    nodes = data.draw(st.integers(1, min(shards, 3)))
    layout = Layout.build("r", shards, ENDPOINTS[:nodes], myself=0)
    for slot in data.draw(st.lists(st.integers(0, SLOTS - 1), max_size=20)) + [0, SLOTS - 1]:
        owner = layout.owner(slot)
        assert shard_of_slot(slot, shards) in owner.shards
        assert any(slot in run for run in owner.slots)
    covered = [slot for run, _ in layout.runs() for slot in run]
    assert covered == list(range(SLOTS))


@pytest.mark.parametrize(
    "owners",
    [[(0,), (0, 1)], [(0,), ()], [(0, 1, 2), ()]],
    ids=["shard owned twice", "shard unowned", "unknown shard"],
)
def test_every_shard_needs_exactly_one_owner(owners: list[tuple[int, ...]]) -> None:
    with pytest.raises(ValueError, match="exactly one owner"):
        Layout.build("r", 2, ENDPOINTS[:2], myself=0, owners=owners)


def test_a_node_without_shards_is_allowed() -> None:
    layout = Layout.build("r", 2, ENDPOINTS[:2], myself=1, owners=[(), (0, 1)])
    assert layout.nodes[0].slots == ()
    assert layout.owner(0).index == 1


def test_layouts_refuse_inconsistencies() -> None:
    layout = Layout.build("r", 2, ENDPOINTS[:2], myself=0)
    with pytest.raises(ValueError, match="myself"):
        replace(layout, myself=2)
    with pytest.raises(ValueError, match="ids must differ"):
        replace(layout, nodes=(layout.nodes[0], replace(layout.nodes[1], node_id=node_id("r", 0))))
    with pytest.raises(ValueError, match="runs of its shards"):
        replace(layout, nodes=(replace(layout.nodes[0], slots=(range(0, 5),)), layout.nodes[1]))
    with pytest.raises(ValueError, match="index order"):
        replace(layout, nodes=layout.nodes[::-1])
    with pytest.raises(ValueError, match="ownership sets"):
        Layout.build("r", 2, ENDPOINTS[:2], myself=0, owners=[(0, 1)])
