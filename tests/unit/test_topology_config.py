"""Topology file: round trips, every validation error, shards and nodes, topic names, generated
MM2 configs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.config import (
    MAX_SHARDS,
    NodeConfig,
    RegionConfig,
    Topology,
    TopologyError,
    dump,
    dumps,
    format_shard_set,
    load,
    loads,
    parse_shard_set,
)
from streams.kafka.topics import is_oplog_topic, local_topic, mirrored_name, oplog_topic
from topology import mm2

FULL = """
[topology]
mirror_naming = "default"

[[region]]
name = "r1"
id = 1
bootstrap = "127.0.0.1:9092"
resp_port = 6380
id_mode = "strict"
alias = "A"
bind = "127.0.0.1"

[[region]]
name = "r2"
id = 2
bootstrap = "127.0.0.1:9093,127.0.0.1:9094"
resp_port = 6381
id_mode = "semi-strict"

[[region]]
name = "r3"
id = 255
bootstrap = "kafka-c:9092"
resp_port = 6382
id_mode = "liberal"
alias = "C"
bind = "0.0.0.0"
"""


def region_toml(**fields: object) -> str:
    base: dict[str, object] = {
        "name": "r1",
        "id": 1,
        "bootstrap": "127.0.0.1:9092",
        "resp_port": 6380,
    }
    base.update(fields)
    lines = ["[[region]]"]
    for key, value in base.items():
        if value is None:  # leave the field out
            continue
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, str):
            lines.append(f"{key} = {json.dumps(value)}")
        else:
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


# -- loading and round trips ----------------------------------------------------------------------


def test_load_full_file() -> None:
    topo = loads(FULL)
    assert topo.mirror_naming == "default"
    assert topo.names == ["r1", "r2", "r3"]
    r1, r2, r3 = topo.regions
    assert r1 == RegionConfig("r1", 1, "127.0.0.1:9092", 6380, "strict", "A", "127.0.0.1")
    assert r2.alias == "r2"  # defaults to the region name
    assert r2.bind == "127.0.0.1"
    assert r2.id_mode == "semi-strict"
    assert r3.id == 255 and r3.bind == "0.0.0.0"
    assert topo.region("r3") is r3
    assert topo.by_id(2) is r2
    assert [r.name for r in topo.others("r2")] == ["r1", "r3"]


def test_defaults() -> None:
    topo = loads(region_toml())
    assert topo.mirror_naming == "identity"
    (region,) = topo.regions
    assert (region.id_mode, region.alias, region.bind) == ("strict", "r1", "127.0.0.1")


def test_round_trip_dumps_loads() -> None:
    topo = loads(FULL)
    text = dumps(topo)
    again = loads(text)
    assert again == topo
    assert dumps(again) == text


def test_round_trip_constructed_objects_and_file(tmp_path: Path) -> None:
    topo = Topology(
        regions=(
            RegionConfig("east", 7, "h1:1,h2:2", 7000, "liberal", "E", "10.0.0.1"),
            RegionConfig("west", 8, "h3:3", 7001),
        ),
        mirror_naming="default",
    )
    path = tmp_path / "topo.toml"
    dump(topo, path)
    assert load(path) == topo


def test_dumps_escapes_strings() -> None:
    # bind is free text as far as the file format goes: quotes and backslashes survive.
    topo = Topology((RegionConfig("r1", 1, "h:1", 1, bind='we"ird\\host\t'),))
    assert loads(dumps(topo)).regions[0].bind == 'we"ird\\host\t'


def test_lookup_errors() -> None:
    topo = loads(FULL)
    with pytest.raises(KeyError, match="no region named 'r9'.*r1, r2, r3"):
        topo.region("r9")
    with pytest.raises(KeyError, match="no region with id 9"):
        topo.by_id(9)


# -- validation errors ----------------------------------------------------------------------------


def test_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(region_toml(id=0))
    with pytest.raises(TopologyError, match=re.escape(str(path)) + r": region 'r1': field 'id'"):
        load(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="nope.toml: cannot read"):
        load(tmp_path / "nope.toml")


def test_invalid_toml() -> None:
    with pytest.raises(TopologyError, match="x.toml: not valid TOML"):
        loads("[[region]\nname = ", source="x.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (region_toml(id=0), r"region 'r1': field 'id' must be an integer in 1\.\.255, got 0"),
        (region_toml(id=256), r"region 'r1': field 'id' must be an integer in 1\.\.255, got 256"),
        (region_toml(id="1"), r"region 'r1': field 'id' must be an integer.*got '1'"),
        (region_toml(id=True), r"region 'r1': field 'id' must be an integer.*got True"),
        (region_toml(resp_port=0), r"region 'r1': field 'resp_port' must be an integer in 1\.\."),
        (region_toml(resp_port=70000), r"region 'r1': field 'resp_port'.*got 70000"),
        (region_toml(resp_port="6380"), r"region 'r1': field 'resp_port'.*got '6380'"),
        (region_toml(id_mode="lax"), r"region 'r1': field 'id_mode' must be one of strict, semi"),
        (region_toml(bootstrap="localhost"), r"region 'r1': field 'bootstrap' must be 'host:port'"),
        (region_toml(bootstrap="h:1,h"), r"region 'r1': field 'bootstrap'"),
        (region_toml(bootstrap="h:0"), r"region 'r1': field 'bootstrap'"),
        (region_toml(bootstrap=9092), r"region 'r1': field 'bootstrap'"),
        (
            region_toml(name="r.1"),
            r"region 'r\.1': field 'name' must be a non-empty string of letters",
        ),
        (region_toml(name=""), r"region #1: field 'name'"),
        (region_toml(name=1), r"region #1: field 'name'.*got 1"),
        (region_toml(alias="A.B"), r"region 'r1': field 'alias'"),
        (region_toml(bind=""), r"region 'r1': field 'bind' must be a non-empty string"),
        (region_toml(colour="red"), r"region #1 \('r1'\): unknown key\(s\) 'colour' \(known: "),
        (region_toml(id=None), r"region #1 \('r1'\): missing field\(s\) 'id'"),
        (
            region_toml(name=None, resp_port=None),
            r"region #1: missing field\(s\) 'name', 'resp_port'",
        ),
        (region_toml() + region_toml(id=2), r"region 'r1': duplicate region name"),
        (
            region_toml() + region_toml(name="r2"),
            r"region 'r2': duplicate id 1 \(already used by region 'r1'\)",
        ),
        (
            region_toml(alias="A") + region_toml(name="r2", id=2, alias="A", bootstrap="o:1"),
            r"region 'r2': alias 'A' already names the cluster 127\.0\.0\.1:9092",
        ),
        (
            '[topology]\nmirror_naming = "mm2"\n' + region_toml(),
            r"\[topology\]: field 'mirror_naming' must be one",
        ),
        ('[topology]\nnaming = "default"\n' + region_toml(), r"\[topology\]: unknown key\(s\)"),
        ("[topology]\n", r"no regions"),
        ("", r"no regions"),
        ('colour = "red"\n' + region_toml(), r"unknown top-level key\(s\) 'colour'"),
        ('topology = "x"\n' + region_toml(), r"'topology' must be a table"),
        ("[region]\nname = 'r1'\n", r"'region' must be an array of tables"),
        ("region = [1]\n", r"region #1: must be a table"),
    ],
)
def test_validation_errors(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=r"^t\.toml: " + message):
        loads(text, source="t.toml")


def test_regions_may_share_a_cluster_and_alias() -> None:
    text = region_toml(alias="A") + region_toml(name="r2", id=2, alias="A")
    topo = loads(text)
    assert {r.alias for r in topo.regions} == {"A"}


def test_constructing_objects_validates_too() -> None:
    with pytest.raises(TopologyError, match="region 'x': field 'id'"):
        RegionConfig("x", 300, "h:1", 1)
    with pytest.raises(TopologyError, match="duplicate id 1"):
        Topology((RegionConfig("a", 1, "h:1", 1), RegionConfig("b", 1, "h:2", 2)))


# -- shards and nodes ----------------------------------------------------------------------------

# What `dumps` wrote before shards existed, byte for byte: such files must keep reading back equal
# and writing out identical, or every deployed topology file would churn.
PRE_SHARDS = """[topology]
mirror_naming = "default"

[[region]]
name = "r1"
id = 1
bootstrap = "127.0.0.1:9092"
resp_port = 6380
id_mode = "strict"
alias = "A"
bind = "127.0.0.1"

[[region]]
name = "r2"
id = 2
bootstrap = "127.0.0.1:9093,127.0.0.1:9094"
resp_port = 6381
id_mode = "semi-strict"
alias = "r2"
bind = "127.0.0.1"
"""

SHARDED = """
[topology]
shards = 4

[[region]]
name = "r1"
id = 1
bootstrap = "127.0.0.1:9092"
bind = "0.0.0.0"

[[region.node]]
resp_port = 7001
shards = "0-1"

[[region.node]]
resp_port = 7002
bind = "10.0.0.2"
shards = "2,3"

[[region]]
name = "r2"
id = 2
bootstrap = "127.0.0.1:9093"
resp_port = 7010
"""


def test_files_from_before_shards_round_trip_byte_identical() -> None:
    topo = loads(PRE_SHARDS)
    assert topo.shards == 1
    assert dumps(topo) == PRE_SHARDS
    assert [r.nodes for r in topo.regions] == [
        (NodeConfig(0, "127.0.0.1", 6380, (0,)),),
        (NodeConfig(0, "127.0.0.1", 6381, (0,)),),
    ]


def test_sharded_file_with_nodes() -> None:
    topo = loads(SHARDED)
    assert topo.shards == 4
    r1, r2 = topo.regions
    assert r1.resp_port == 7001  # left out: the first node's
    assert r1.nodes == (
        NodeConfig(0, "0.0.0.0", 7001, (0, 1)),  # bind: the region's
        NodeConfig(1, "10.0.0.2", 7002, (2, 3)),
    )
    assert r2.nodes == (NodeConfig(0, "127.0.0.1", 7010, (0, 1, 2, 3)),)  # one node, every shard
    assert topo.node("r1", 1) is r1.nodes[1] and r1.node(0) is r1.nodes[0]
    assert r1.owner(3).index == 1 and r2.owner(3).index == 0
    assert r1.nodes[1].address == "10.0.0.2:7002"
    with pytest.raises(KeyError, match=r"region 'r1' has no node 2 \(its nodes: 0\.\.1\)"):
        topo.node("r1", 2)
    with pytest.raises(KeyError, match="region 'r2' has no node -1"):
        r2.node(-1)
    with pytest.raises(KeyError, match="no node owns shard 4"):
        r1.owner(4)


def test_sharded_file_round_trips() -> None:
    topo = loads(SHARDED)
    text = dumps(topo)
    assert "shards = 4" in text and text.count("[[region.node]]") == 2
    assert 'shards = "2-3"' in text  # written compactly
    again = loads(text)
    assert again == topo
    assert dumps(again) == text


def test_a_lone_node_table_may_leave_out_its_shards_and_equals_the_default() -> None:
    base = "[topology]\nshards = 3\n" + region_toml(resp_port=None)
    explicit = loads(base + "[[region.node]]\nresp_port = 6380\n")
    implicit = loads("[topology]\nshards = 3\n" + region_toml())
    assert explicit == implicit
    assert explicit.regions[0].nodes[0].shards == (0, 1, 2)
    assert "[[region.node]]" not in dumps(explicit)  # the same as no table at all
    elsewhere = loads(base + '[[region.node]]\nresp_port = 6380\nbind = "10.0.0.9"\n')
    assert "[[region.node]]" in dumps(elsewhere)  # a lone node binding elsewhere is kept
    assert loads(dumps(elsewhere)) == elsewhere


def test_constructed_topology_with_shards_and_nodes(tmp_path: Path) -> None:
    nodes = (NodeConfig(0, "127.0.0.1", 7000, (2, 0)), NodeConfig(1, "127.0.0.1", 7001, (1, 3)))
    assert nodes[0].shards == (0, 2)  # any order given, kept sorted
    topo = Topology(
        regions=(
            RegionConfig("east", 1, "h:1", 7000, nodes=nodes),
            RegionConfig("west", 2, "h:2", 7100),
        ),
        shards=4,
    )
    # The region given without nodes gets one owning the topology's shards, not just shard 0.
    assert topo.region("west").nodes == (NodeConfig(0, "127.0.0.1", 7100, (0, 1, 2, 3)),)
    path = tmp_path / "t.toml"
    dump(topo, path)
    assert load(path) == topo
    assert 'shards = "0,2"' in path.read_text()


def test_replacing_a_regions_port_moves_its_default_node() -> None:
    # Tests start a second node of a region on another port this way; an implicit node follows.
    topo = loads("[topology]\nshards = 2\n" + region_toml())
    moved = dataclasses.replace(topo.regions[0], resp_port=7777, bind="0.0.0.0")
    assert moved.nodes == (NodeConfig(0, "0.0.0.0", 7777, (0, 1)),)
    again = dataclasses.replace(topo, regions=(moved,))
    assert again.regions[0].nodes[0].resp_port == 7777
    assert "[[region.node]]" not in dumps(again)
    # Explicit nodes do not follow: the region's port must still be its first node's.
    sharded = loads(SHARDED).regions[0]
    with pytest.raises(TopologyError, match="field 'resp_port' is 7777 but its first node"):
        dataclasses.replace(sharded, resp_port=7777)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", (0,)),
        ("0-3", (0, 1, 2, 3)),
        ("0,2", (0, 2)),
        ("4-7,9", (4, 5, 6, 7, 9)),
        (" 9 , 1 - 2 ", (1, 2, 9)),
        ("5-5", (5,)),
        (f"{MAX_SHARDS - 1}", (MAX_SHARDS - 1,)),
    ],
)
def test_parse_shard_set(text: str, expected: tuple[int, ...]) -> None:
    assert parse_shard_set(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"shard set '' is empty: name at least one shard"),
        ("  ", r"is empty"),
        ("0,", r"shard set '0,': '' is not a shard or a range of shards \(write '0-3'"),
        ("a-b", r"'a-b' is not a shard or a range"),
        ("-1", r"'-1' is not a shard"),
        ("1-2-3", r"'1-2-3' is not a shard"),
        ("3-1", r"shard set '3-1': the range 3-1 runs backwards"),
        ("0-3,2", r"shard set '0-3,2': shard 2 is named twice"),
        ("1,1", r"shard 1 is named twice"),
        (f"0-{MAX_SHARDS}", rf"shard {MAX_SHARDS} does not exist: a database has at most"),
        (3, r"a shard set is text such as '0-3', '0,2' or '4-7,9', got 3"),
    ],
)
def test_parse_shard_set_errors(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        parse_shard_set(text)  # the int case: what TOML gives for `shards = 3`


@given(st.sets(st.integers(0, MAX_SHARDS - 1), min_size=1))
def test_shard_set_text_round_trips(shards: set[int]) -> None:
    text = format_shard_set(shards)
    assert parse_shard_set(text) == tuple(sorted(shards))
    assert "," not in text or all(part for part in text.split(","))


def test_format_shard_set() -> None:
    assert format_shard_set((0, 1, 2, 3, 5, 7, 8)) == "0-3,5,7-8"
    assert format_shard_set([4]) == "4"
    assert format_shard_set(()) == ""


def nodes_toml(*nodes: dict[str, object], shards: int = 4, **region: object) -> str:
    """A one-region file with `[topology] shards` and the given [[region.node]] tables."""
    text = f"[topology]\nshards = {shards}\n" + region_toml(**{"resp_port": None, **region})
    for node in nodes:
        text += "[[region.node]]\n" + region_toml(**node).split("\n", 1)[1]
    return text


def node(**fields: object) -> dict[str, object]:
    """Fields of a [[region.node]] table (region_toml's base fields left out)."""
    return {"name": None, "id": None, "bootstrap": None, "resp_port": None, **fields}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[topology]\nshards = 0\n" + region_toml(),
            r"\[topology\]: field 'shards' must be an"
            r" integer in 1\.\.1024, got 0",
        ),
        ("[topology]\nshards = 1025\n" + region_toml(), r"\[topology\]: field 'shards'.*got 1025"),
        ('[topology]\nshards = "2"\n' + region_toml(), r"\[topology\]: field 'shards'.*got '2'"),
        ("[topology]\nshards = true\n" + region_toml(), r"\[topology\]: field 'shards'.*got True"),
        (
            nodes_toml(node(resp_port=1, shards="0-1"), node(resp_port=2, shards="3")),
            r"region 'r1': no node owns shard\(s\) 2; every shard 0\.\.3 belongs to exactly one",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0"), node(resp_port=2, shards="3")),
            r"region 'r1': no node owns shard\(s\) 1-2;",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-2"), node(resp_port=2, shards="2-3")),
            r"region 'r1': shard 2 is owned by nodes 0 and 1; every shard belongs to exactly one",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-1"), node(resp_port=2, shards="2-4")),
            r"region 'r1', node 1: shard 4 does not exist: \[topology\] shards = 4 makes shards"
            r" 0\.\.3",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-1"), node(resp_port=1, shards="2-3")),
            r"region 'r1': nodes 0 and 1 both listen on 127\.0\.0\.1:1",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-1"), node(resp_port=2)),
            r"region 'r1', node 1: missing field 'shards' \(with several nodes each names its",
        ),
        (
            nodes_toml(node(shards="0-3")),
            r"region 'r1', node 0: missing field 'resp_port'",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-3", colour="red")),
            r"region 'r1', node 0: unknown key\(s\) 'colour' "
            r"\(known: resp_port, bind, shards, announce, tls_port\)",
        ),
        (
            nodes_toml(node(resp_port=1, shards="x")),
            r"region 'r1', node 0: field 'shards': shard set 'x': 'x' is not a shard",
        ),
        (
            nodes_toml(node(resp_port=1, shards=3)),
            r"region 'r1', node 0: field 'shards': a shard set is text such as",
        ),
        (
            nodes_toml(node(resp_port=70000, shards="0-3")),
            r"region 'r1', node 0: field 'resp_port' must be an integer in 1\.\.65535, got 70000",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-3", bind="")),
            r"region 'r1', node 0: field 'bind' must be a non-empty string",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-3"), resp_port=2),
            r"region 'r1': field 'resp_port' is 2 but its first node listens on 1: a region's"
            r" resp_port is its first node's",
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-3"), bind=""),
            r"region 'r1': field 'bind' must be a non-empty string",  # the region's, not node's
        ),
        (
            nodes_toml(node(resp_port=1, shards="0-3"), name=None),
            r"region #1: missing field\(s\) 'name'",
        ),
        (
            nodes_toml(node(resp_port=1, shards="x"), name=None),
            r"region #1, node 0: field 'shards'",
        ),
        (region_toml() + "node = 3\n", r"region #1 \('r1'\): 'node' must be an array of tables"),
        (region_toml() + "node = [1]\n", r"region 'r1', node 0: must be a table"),
    ],
)
def test_shard_and_node_validation_errors(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=r"^t\.toml: " + message):
        loads(text, source="t.toml")


def test_nodes_may_share_a_port_on_different_addresses() -> None:
    # Nodes of a region on different hosts often all use one port, as Redis Cluster nodes do.
    text = nodes_toml(
        node(resp_port=6379, shards="0-1", bind="10.0.0.1"),
        node(resp_port=6379, shards="2-3", bind="10.0.0.2"),
    )
    assert [n.address for n in loads(text).regions[0].nodes] == ["10.0.0.1:6379", "10.0.0.2:6379"]


def test_constructing_nodes_validates_too() -> None:
    with pytest.raises(TopologyError, match="node 0: field 'shards' must name at least one"):
        NodeConfig(0, "h", 1, ())
    with pytest.raises(TopologyError, match="node 0: field 'shards' names shard 1 twice"):
        NodeConfig(0, "h", 1, (1, 1))
    with pytest.raises(TopologyError, match="node 0: field 'shards' holds -1"):
        NodeConfig(0, "h", 1, (-1,))
    with pytest.raises(TopologyError, match="node -1: its index must be an integer >= 0"):
        NodeConfig(-1, "h", 1, (0,))
    with pytest.raises(TopologyError, match="region 'r': node #1 has index 2"):
        RegionConfig(
            "r", 1, "h:1", 1, nodes=(NodeConfig(0, "h", 1, (0,)), NodeConfig(2, "h", 2, (1,)))
        )
    with pytest.raises(TopologyError, match="region 'r': nodes must be NodeConfig objects"):
        RegionConfig("r", 1, "h:1", 1, nodes=("x",))  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match=r"\[topology\]: field 'shards'"):
        Topology((RegionConfig("r", 1, "h:1", 1),), shards=0)


# -- topic names ----------------------------------------------------------------------------------


def test_topic_names() -> None:
    assert oplog_topic("r1") == "r1.oplog"
    assert local_topic("r1") == "r1.local"
    assert mirrored_name("r1.oplog", "A", "identity") == "r1.oplog"
    assert mirrored_name("r1.oplog", "A", "default") == "A.r1.oplog"
    with pytest.raises(ValueError, match="unknown mirror naming"):
        mirrored_name("r1.oplog", "A", "prefix")
    assert is_oplog_topic("r1.oplog") and is_oplog_topic("A.r1.oplog")
    assert not is_oplog_topic("r1.local") and not is_oplog_topic("r1.oplogs")


# -- MirrorMaker 2 configs ------------------------------------------------------------------------


@pytest.mark.parametrize("naming", ["identity", "default"])
def test_checked_in_mm2_configs_match_the_generator(naming: str) -> None:
    expected = mm2.render(load(mm2.EXAMPLE_TOPOLOGY), naming)
    assert mm2.properties_path(naming).read_text() == expected, (
        "topology/mm2 configs are stale: run `python -m topology.mm2`"
    )


def _properties(text: str) -> dict[str, str]:
    """A small Java .properties reader (enough for these files: `key = value`, `\\\\`)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = re.sub(r"\\(.)", r"\1", value.strip())
    return out


@pytest.mark.parametrize(
    ("naming", "policy"),
    [("identity", "IdentityReplicationPolicy"), ("default", "DefaultReplicationPolicy")],
)
def test_mm2_config_content(naming: str, policy: str) -> None:
    props = _properties(mm2.properties_path(naming).read_text())
    assert props["clusters"] == "A, B, C"
    assert props["A.bootstrap.servers"] == "kafka-a:9092"
    assert props["replication.policy.class"].endswith("." + policy)
    homes = {"A": "r1", "B": "r2", "C": "r3"}
    flows = {
        key.removesuffix(".enabled")
        for key, value in props.items()
        if "->" in key and key.endswith(".enabled") and value == "true"
    }
    assert flows == {f"{s}->{t}" for s in homes for t in homes if s != t}
    for flow in flows:
        source = flow.split("->")[0]
        regex = props[f"{flow}.topics"]
        # Exactly the source's own op log: not its .local, not a mirrored copy of another's.
        assert re.fullmatch(regex, f"{homes[source]}.oplog")
        assert not re.fullmatch(regex, f"{homes[source]}.local")
        assert not re.fullmatch(regex, f"{homes[source]}Xoplog")
        for other in homes.values():
            if other != homes[source]:
                assert not re.fullmatch(regex, f"{other}.oplog")
                assert not re.fullmatch(regex, f"{source}.{other}.oplog")
    for alias in homes:
        assert props[f"{alias}.consumer.isolation.level"] == "read_committed"
    assert props["refresh.topics.interval.seconds"] == "5"


def test_mm2_render_groups_regions_sharing_a_cluster() -> None:
    topo = Topology(
        (
            RegionConfig("r1", 1, "a:1", 1, alias="A"),
            RegionConfig("r2", 2, "a:1", 2, alias="A"),
            RegionConfig("r3", 3, "b:1", 3, alias="B"),
        )
    )
    props = _properties(mm2.render(topo, "identity"))
    assert props["clusters"] == "A, B"
    assert props["A->B.topics"] == r"r1\.oplog, r2\.oplog"
    assert props["B->A.topics"] == r"r3\.oplog"


def test_a_node_announces_the_host_clients_reach_it_at() -> None:
    """`announce` (as Redis's cluster-announce-ip) is what CLUSTER SLOTS and MOVED name, for a
    node binding 0.0.0.0 or in a container; it defaults to the bind address and round-trips."""
    text = """
[topology]
shards = 2

[[region]]
name = "r1"
id = 1
bootstrap = "127.0.0.1:9092"

[[region.node]]
resp_port = 7001
bind = "0.0.0.0"
shards = "0"
announce = "node-a.example"

[[region.node]]
resp_port = 7002
shards = "1"
"""
    topology = loads(text)
    nodes = topology.region("r1").nodes
    assert [n.announced for n in nodes] == ["node-a.example", "127.0.0.1"]
    assert loads(dumps(topology)) == topology
