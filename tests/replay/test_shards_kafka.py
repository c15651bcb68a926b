"""The replay tools on a region of 4 shards spread over 2 nodes (2 regions, real brokers).

A recorded history writes two keys of every shard in both regions, then a group with deliveries
and an ack, an XDEL, a DEL racing an XADD and an XTRIM; after each phase the live r1 is looked at:
CRDT.DIGEST (the region's), every node's CRDT.SHARDS (each shard's digest and vector) and what a
cluster client reads. The replay must give the same: the region digest at the per-shard `--at`
of each cut and at the end, each shard's digest at `--shard N --at`, the history of a key of shard
3 from shard 3's partitions only, every partition of a topic in `log`, and over `--serve` the same
reads for keys of every shard.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from replay.serving import serving
from streams.cli import main
from streams.crdt import keyspace
from streams.crdt.state import State
from streams.slots import shard_of
from topology.local import LocalTopology

SHARDS = 4
KEYS = ("a", "b", "c", "d", "e", "f", "g", "h")
"""Two keys of each shard: b, f in 0; c, g in 1; d, h in 2; a, e in 3."""

Figures = dict[int, tuple[str, dict[str, int]]]
"""shard -> (digest, {origin name: seq}), as CRDT.SHARDS reports them."""


def shard_figures(topo: LocalTopology, i: int) -> Figures:
    figures: Figures = {}
    for port in topo.node_ports[i]:
        node = redis.Redis(port=port)
        try:
            reply = cast(list[Any], node.execute_command("CRDT.SHARDS"))  # type: ignore[no-untyped-call]
        finally:
            node.close()
        for index, digest, flat in reply:
            vector = {flat[k].decode(): int(flat[k + 1]) for k in range(0, len(flat), 2)}
            figures[int(index)] = (digest.decode(), vector)
    return figures


def plain(vector: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(vector.items()))


def per_shard(figures: Figures) -> str:
    return ";".join(f"{s}:{plain(v)}" for s, (_d, v) in sorted(figures.items()) if v)


def look(c: Any) -> dict[str, Any]:
    """What a client reads of every key (nothing that depends on the clock of the moment)."""
    seen: dict[str, Any] = {}
    for key in KEYS:
        seen[f"xrange {key}"] = c.xrange(key)
        seen[f"xlen {key}"] = c.xlen(key)
        try:
            seen[f"xinfo stream {key}"] = c.xinfo_stream(key)
        except redis.ResponseError as exc:
            seen[f"xinfo stream {key}"] = str(exc)
    try:
        seen["xinfo groups a"] = c.xinfo_groups("a")
        seen["xpending a g"] = c.xpending("a", "g")
    except redis.ResponseError as exc:
        seen["xinfo groups a"] = str(exc)
    return seen


def observe(topo: LocalTopology) -> dict[str, Any]:
    topo.sync()
    return {
        "digest": topo.client(1).execute_command("CRDT.DIGEST").decode(),  # type: ignore[no-untyped-call]
        "shards": shard_figures(topo, 1),
        "look": look(topo.cluster_client(1)),
    }


@pytest.fixture(scope="module")
def recorded() -> Iterator[tuple[LocalTopology, list[dict[str, Any]]]]:
    with LocalTopology(regions=2, shards=SHARDS, nodes=2, manual_sync=True) as topo:
        c1, c2 = topo.cluster_client(1), topo.cluster_client(2)
        cuts: list[dict[str, Any]] = []
        for i in range(3):
            for key in KEYS:
                c1.xadd(key, {"n": f"r1-{i}"})
                c2.xadd(key, {"n": f"r2-{i}"})
        c1.xgroup_create("a", "g", id="0")
        cuts.append(observe(topo))

        # A replicated op of shard 3 first: local ops made at cut 0's vector would belong to it.
        c1.xadd("a", {"n": "r1-3"})
        got = cast(list[Any], c1.xreadgroup("g", "alice", {"a": ">"}, count=3))
        ids = [entry_id for entry_id, _fields in got[0][1]]
        c1.xack("a", "g", ids[0])
        c2.xdel("a", ids[1])
        c2.delete("d")  # concurrent with r1's XADD on d
        c1.xadd("d", {"n": "raced"})
        c1.xtrim("c", maxlen=2)
        cuts.append(observe(topo))
        yield topo, cuts


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out.strip()


def test_replay_digest_equals_the_live_region_and_each_shard_at_every_cut(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, cuts = recorded
    boot = topo.bootstrap[1]
    assert main(["replay", "--bootstrap", boot, "--digest"]) == 0
    assert _out(capsys) == cuts[-1]["digest"]
    assert main(["replay", "--bootstrap", topo.bootstrap[2], "--digest"]) == 0
    assert _out(capsys) == cuts[-1]["digest"]  # converged: r2's cluster folds to the same
    for seen in cuts:
        assert (
            main(["replay", "--bootstrap", boot, "--digest", "--at", per_shard(seen["shards"])])
            == 0
        )
        assert _out(capsys) == seen["digest"]
        for shard, (digest, vector) in seen["shards"].items():
            at = ["--shard", str(shard), "--at", plain(vector)]
            assert main(["replay", "--bootstrap", boot, "--digest", *at]) == 0
            assert _out(capsys) == digest, shard
    # The region's vector summed over shards, per-shard vectors and state in the JSON summary.
    assert main(["replay", "--bootstrap", boot, "--json"]) == 0
    *keys, summary = [json.loads(line) for line in _out(capsys).splitlines()]
    assert summary["shards"] == SHARDS and summary["shard"] is None
    assert summary["digest"] == cuts[-1]["digest"]
    assert summary["at"] == per_shard(cuts[-1]["shards"])
    assert [s["digest"] for s in summary["per_shard"]] == [
        cuts[-1]["shards"][s][0] for s in range(SHARDS)
    ]
    assert summary["vector"] == topo.vector(1)
    assert {k["key"] for k in keys} == set(KEYS)


def test_positions_need_a_shard_and_offsets_and_time_cut_each_partition(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, cuts = recorded
    boot = topo.bootstrap[1]
    assert main(["replay", "--bootstrap", boot, "--digest", "--at", "r1=1"]) == 3
    assert "add --shard N" in capsys.readouterr().err
    assert main(["replay", "--bootstrap", boot, "--digest", "--shard", "4"]) == 3
    assert "has 4 shard(s)" in capsys.readouterr().err
    off = "--offsets"
    assert main(["replay", "--bootstrap", boot, "--digest", off, "r1.oplog:7=0"]) == 3
    assert (
        main(["replay", "--bootstrap", boot, "--digest", "--shard", "3", off, "r1.oplog:2=0"]) == 3
    )
    capsys.readouterr()
    # Shard 3 cut at offset 0 of each of its partitions: nothing applied.
    zero = "r1.oplog:3=0,r2.oplog:3=0,r1.local:3=0"
    assert main(["replay", "--bootstrap", boot, "--digest", "--shard", "3", off, zero]) == 0
    assert _out(capsys) == State().digest()
    # --time cuts every partition: before anything was written, every shard is empty.
    assert main(["replay", "--bootstrap", boot, "--digest", "--time", "2000-01-01T00:00:00Z"]) == 0
    assert _out(capsys) == keyspace.digest([State().digest()] * SHARDS)
    assert main(["replay", "--bootstrap", boot, "--digest", "--time", "2100-01-01"]) == 0
    assert _out(capsys) == cuts[-1]["digest"]


def test_history_of_a_key_reads_only_its_shard(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, cuts = recorded
    assert shard_of(b"a", SHARDS) == 3
    boot = topo.bootstrap[1]
    assert main(["history", "--bootstrap", boot, "a", "--json"]) == 0
    *steps, summary = [json.loads(line) for line in _out(capsys).splitlines()]
    assert {s["partition"] for s in steps} == {3}
    assert [s["op"] for s in steps].count("XAdd") == 7
    assert {"GroupCreate", "Deliver", "Ack", "XDel"} <= {s["op"] for s in steps}
    assert all(s["applied"] for s in steps)
    assert (summary["shard"], summary["shards"]) == (3, SHARDS)
    assert summary["digest"] == cuts[-1]["shards"][3][0]
    assert summary["vector"] == cuts[-1]["shards"][3][1]
    # --at with the plain form applies to the key's shard; text names the partitions.
    first = plain(cuts[0]["shards"][3][1])
    assert main(["history", "--bootstrap", boot, "a", "--at", first]) == 0
    text = _out(capsys)
    assert "shard 3 of 4" in text and "r1.oplog:3@" in text
    assert "XDel: not applied: past the requested position" in text
    assert "Deliver g: not applied: made after the requested position" in text
    assert main(["history", "--bootstrap", boot, "a", "--shard", "1"]) == 3
    assert "lives in shard 3" in capsys.readouterr().err


def test_log_lists_every_partition_and_each_shard_numbers_its_own_ops(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, _cuts = recorded
    boot = topo.bootstrap[1]
    assert main(["log", "--bootstrap", boot, "--topic", "r2.oplog", "--json"]) == 0
    lines = [json.loads(line) for line in _out(capsys).splitlines()]
    assert {line["partition"] for line in lines} == set(range(SHARDS))
    for line in lines:
        assert line["partition"] == shard_of(line["key"].encode(), SHARDS)
    for shard in range(SHARDS):
        dots = [line["dot"] for line in lines if line["partition"] == shard]
        assert dots == [f"2:{seq}" for seq in range(1, len(dots) + 1)]
    assert main(["log", "--bootstrap", boot, "--topic", "r2.oplog", "--shard", "2"]) == 0
    out = _out(capsys).splitlines()
    assert out and all(line.startswith("r2.oplog:2@") for line in out)


@pytest.fixture
def served(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], tmp_path: Path
) -> Iterator[redis.Redis]:
    topo, _cuts = recorded
    with serving(["--bootstrap", topo.bootstrap[1]], tmp_path) as client:
        yield client


def test_serve_answers_for_keys_of_every_shard(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], served: redis.Redis
) -> None:
    topo, cuts = recorded
    raw: Any = served.execute_command
    assert look(served) == cuts[-1]["look"]
    assert raw("CRDT.DIGEST").decode() == cuts[-1]["digest"]
    live_vector = topo.client(1).execute_command("CRDT.VECTOR")  # type: ignore[no-untyped-call]
    assert raw("CRDT.VECTOR") == live_vector
    flat = raw("REPLAY.POSITION")
    position = {k.decode(): v for k, v in zip(flat[::2], flat[1::2], strict=True)}
    assert position["at"].decode() == per_shard(cuts[-1]["shards"])
    assert [(s[0], s[1].decode()) for s in position["shards"]] == [
        (i, cuts[-1]["shards"][i][0]) for i in range(SHARDS)
    ]
    moved = raw("REPLAY.SEEK", per_shard(cuts[0]["shards"]))
    assert dict(zip(moved[::2], moved[1::2], strict=True))[b"digest"].decode() == cuts[0]["digest"]
    assert look(served) == cuts[0]["look"]
