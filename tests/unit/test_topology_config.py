"""Topology file: round trips, every validation error, topic names, generated MM2 configs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from topology import mm2
from topology.config import (
    RegionConfig,
    Topology,
    TopologyError,
    dump,
    dumps,
    load,
    loads,
)
from topology.topics import is_oplog_topic, local_topic, mirrored_name, oplog_topic

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
