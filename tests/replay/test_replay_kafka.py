"""Replay from the real logs of a 3-region LocalTopology equals what the live node showed.

One recorded history (writes in every region, a DEL racing an XADD, XDEL, XTRIM, a group with
deliveries and acks, consecutive-XACK effects), with the live r1 observed at several cut points:
CRDT.DIGEST, CRDT.VECTOR, XRANGE, XINFO GROUPS, XPENDING. Replaying r1's cluster with `--at` each
cut's vector must give the same. The verbs themselves run through `streams.cli.main`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from streams.cli import main
from streams.ids import MAX_ID, MIN_ID
from streams.replay.run import Request, replay
from topology.local import LocalTopology

KEYS = (b"s", b"t")


def _observe(topo: LocalTopology) -> dict[str, Any]:
    topo.sync()
    c1 = topo.client(1)
    seen: dict[str, Any] = {
        "vector": topo.vector(1),
        "digest": c1.execute_command("CRDT.DIGEST").decode(),  # type: ignore[no-untyped-call]
        "xrange": {k: c1.xrange(k) for k in KEYS},
    }
    try:
        groups = c1.xinfo_groups("s")
    except redis.ResponseError:
        groups = []
    seen["groups"] = {g["name"]: (g["last-delivered-id"], g["pending"]) for g in groups}
    seen["pending"] = {
        g["name"]: [
            (p["message_id"], p["consumer"], p["times_delivered"])
            for p in c1.xpending_range("s", g["name"], "-", "+", 100)
        ]
        for g in groups
    }
    return seen


@pytest.fixture(scope="module")
def recorded() -> Iterator[tuple[LocalTopology, list[dict[str, Any]]]]:
    with LocalTopology(regions=3, manual_sync=True, id_mode="strict") as topo:
        c1, c2, c3 = topo.client(1), topo.client(2), topo.client(3)
        cuts: list[dict[str, Any]] = []
        for i in range(5):
            c1.xadd("s", {"n": f"a{i}"})
            c2.xadd("s", {"n": f"b{i}"})
        c3.xadd("t", {"n": "c0"})
        c1.xgroup_create("s", "g", id="0")
        cuts.append(_observe(topo))

        c1.xadd("s", {"n": "a5"})  # every phase starts with a replicated op of r1
        got = c1.xreadgroup("g", "alice", {"s": ">"}, count=4)
        ids = [entry_id for entry_id, _f in got[0][1]]
        c1.xack("s", "g", ids[0], ids[1])
        c2.xdel("s", ids[2])
        c3.xtrim("s", maxlen=6)
        cuts.append(_observe(topo))

        c1.xadd("s", {"n": "a6"})
        c1.xreadgroup("g", "bob", {"s": ">"}, count=2)
        # A DEL in r3 racing an XADD in r2 on the same key (neither saw the other).
        c2.xadd("t", {"n": "raced"})
        c3.delete("t")
        c1.xack("s", "g", *ids[2:])
        cuts.append(_observe(topo))
        yield topo, cuts


def _at(vector: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(vector.items()))


def test_replay_at_each_cut_equals_the_live_region_then(
    recorded: tuple[LocalTopology, list[dict[str, Any]]],
) -> None:
    topo, cuts = recorded
    for seen in cuts:
        result = replay(Request(bootstrap=topo.bootstrap[1], at=_at(seen["vector"])))
        region = result.region
        assert result.vector_named() == seen["vector"]
        assert region.state.digest() == seen["digest"]
        for key in KEYS:
            ks = region.state.get(key)
            entries = [] if ks is None else list(ks.entries.range(MIN_ID, MAX_ID))
            assert [
                (b"%d-%d" % sid, dict(zip(f[::2], f[1::2], strict=True))) for sid, _o, f in entries
            ] == seen["xrange"][key]
        groups = region.state.keys[b"s"].groups if b"s" in region.state.keys else {}
        assert {
            name: (b"%d-%d" % g.last_delivered(), len(g.pel)) for name, g in groups.items()
        } == seen["groups"]
        assert {
            name: [
                (b"%d-%d" % (ms, seq), p.consumer, p.delivery_count)
                for (ms, seq, _o), p in g.pel.items()
            ]
            for name, g in groups.items()
        } == seen["pending"]


def test_replay_digest_verb_prints_the_live_digest(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, cuts = recorded
    boot = topo.bootstrap[1]
    assert main(["replay", "--bootstrap", boot, "--digest"]) == 0
    assert capsys.readouterr().out.strip() == cuts[-1]["digest"]
    assert main(["replay", "--bootstrap", boot, "--digest", "--at", _at(cuts[1]["vector"])]) == 0
    assert capsys.readouterr().out.strip() == cuts[1]["digest"]
    # Every region's cluster replays to the same converged digest.
    assert main(["replay", "--bootstrap", topo.bootstrap[3], "--digest"]) == 0
    assert capsys.readouterr().out.strip() == cuts[-1]["digest"]


def test_positions_that_cannot_be_resolved_exit_3(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, _cuts = recorded
    boot = topo.bootstrap[1]
    assert main(["replay", "--bootstrap", boot, "--digest", "--at", "r9=1"]) == 3
    assert main(["replay", "--bootstrap", boot, "--digest", "--at", "r1=100000"]) == 3
    assert main(["replay", "--bootstrap", boot, "--digest", "--offsets", "nope.oplog=3"]) == 3
    assert main(["replay", "--bootstrap", boot, "--digest", "--at", "r1=x"]) == 3
    assert "unknown region 'r9'" in capsys.readouterr().err


def test_snapshot_then_tail_replay_gives_the_full_digest(
    recorded: tuple[LocalTopology, list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topo, cuts = recorded
    boot = topo.bootstrap[1]
    snap = tmp_path / "r1.snap"
    assert (
        main(["snapshot", "--bootstrap", boot, "--at", _at(cuts[0]["vector"]), "--out", str(snap)])
        == 0
    )
    capsys.readouterr()
    assert main(["replay", "--bootstrap", boot, "--snapshot", str(snap), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["v"] == 1
    assert summary["digest"] == cuts[-1]["digest"]
    assert summary["vector"] == cuts[-1]["vector"]
    # The tail was read, not everything: fewer records than a full replay reads.
    full = replay(Request(bootstrap=boot))
    assert summary["records"] < full.records


def test_log_lists_every_op_of_a_topic_decoded(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, cuts = recorded
    assert main(["log", "--bootstrap", topo.bootstrap[1], "--topic", "r2.oplog", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["dot"] for line in lines] == [
        f"2:{seq}" for seq in range(1, cuts[-1]["vector"]["r2"] + 1)
    ]
    assert {line["op"] for line in lines} >= {"XAdd", "XDel"}
    assert (
        main(["log", "--bootstrap", topo.bootstrap[1], "--topic", "r3.oplog", "--op", "del"]) == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and " Del t" in out[0]


def test_diff_names_an_op_held_back_from_one_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    with LocalTopology(regions=2, manual_sync=True, id_mode="strict") as topo:
        c1 = topo.client(1)
        c1.xadd("s", {"n": "both"})
        topo.client(2).xadd("other", {"n": "x"})
        topo.sync()
        b1, b2 = topo.bootstrap[1], topo.bootstrap[2]
        assert main(["diff", "--bootstrap", b1, "--bootstrap", b2]) == 0
        assert "2 key(s) equal" in capsys.readouterr().out
        c1.xadd("s", {"n": "only in r1"})  # never mirrored to r2's cluster
        assert main(["diff", "--bootstrap", b1, "--bootstrap", b2]) == 1
        out = capsys.readouterr().out
        assert "lagging: key s: r2 has not applied r1:2 XAdd s (missing from its cluster)" in out
        assert "CONVERGENCE BUG" not in out
