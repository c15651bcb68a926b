"""Positions carry the Kafka cluster they were read from (streams/kafka/clusters.py): a snapshot
says it, `--offsets` of another cluster are refused naming both ids, and a snapshot of another
cluster is translated by seq (every log read from its start, the ops it covers dropped) by
`streams replay` and by a node booting from it: the same state, never offsets of one cluster
applied to another's copies (which MirrorMaker 2 puts at other offsets).

Two regions on embedded brokers (cluster ids `streams-r1`, `streams-r2`). The snapshot "of
another cluster" is r2's, relabelled as read from r1's cluster: what a snapshot looks like when
its logs' cluster was replaced, or when it is handed to the wrong cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.cli import main
from streams.kafka.clusters import SNAPSHOT_META
from streams.snapshot import read_snapshot, write_snapshot
from topology.local import LocalTopology


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    with LocalTopology(regions=2, manual_sync=True) as topo:
        c1, c2 = topo.client(1), topo.client(2)
        c2.xgroup_create(b"k2", b"g", id="0", mkstream=True)
        for n in range(5):
            c1.xadd(b"k1", {b"n": b"%d" % n})
            c2.xadd(b"k2", {b"n": b"%d" % n})
        c2.xreadgroup(b"g", b"c", {b"k2": b">"}, count=3)
        topo.sync()
        yield topo


def _summary(out: str) -> dict[str, object]:
    summary: dict[str, object] = json.loads(out.splitlines()[-1])
    return summary


def _relabelled(state: Path, offsets: Path, to: Path, cluster: str) -> None:
    """`state`'s snapshot with `offsets`' positions (a later one's: taken as they are, they
    would skip the ops in between, as offsets of another cluster's longer copy would), said
    to be read from `cluster`."""
    with open(state, "rb") as fp:
        region, _positions, meta = read_snapshot(fp)
    with open(offsets, "rb") as fp:
        _region, positions, _meta = read_snapshot(fp)
    meta = {k: v for k, v in meta.items() if k != "region_name"}
    meta[SNAPSHOT_META] = cluster
    with open(to, "wb") as fp:
        write_snapshot(region, positions, fp, region_name="r2", meta=meta)


def _snapshot(boot: str, out: Path) -> None:
    assert main(["snapshot", "--bootstrap", boot, "--region", "r2", "--out", str(out)]) == 0


def _replay(boot: str, *more: str) -> int:
    return main(["replay", "--bootstrap", boot, "--region", "r2", "--json", *more])


def test_a_snapshot_says_its_cluster_and_one_of_another_cluster_is_translated_by_seq(
    topo: LocalTopology, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boot = topo.bootstrap[2]
    snap, later = tmp_path / "r2.snap", tmp_path / "r2-later.snap"
    _snapshot(boot, snap)
    with open(snap, "rb") as fp:
        _region, _positions, meta = read_snapshot(fp)
    assert meta[SNAPSHOT_META] == "streams-r2" and meta["source"] == boot
    topo.client(1).xadd(b"k1", {b"n": b"tail"})  # a tail past the snapshot
    topo.client(2).xadd(b"k2", {b"n": b"tail"})
    topo.sync()
    _snapshot(boot, later)
    capsys.readouterr()
    assert _replay(boot) == 0
    full = _summary(capsys.readouterr().out)
    assert full["cluster_id"] == "streams-r2"
    assert str(full["offsets"]).startswith("cluster=streams-r2,")
    assert _replay(boot, "--snapshot", str(snap)) == 0
    out, err = capsys.readouterr()
    tail = _summary(out)
    assert tail["digest"] == full["digest"] and "note" not in err
    assert int(str(tail["records"])) < int(str(full["records"]))
    other = tmp_path / "r2-from-r1.snap"
    _relabelled(snap, later, other, "streams-r1")
    assert _replay(boot, "--snapshot", str(other)) == 0
    out, err = capsys.readouterr()
    moved = _summary(out)
    assert "streams-r1" in err and "streams-r2" in err and "dropped by seq" in err
    live = topo.client(2).execute_command("CRDT.DIGEST").decode()
    assert moved["digest"] == full["digest"] == live
    assert moved["records"] == full["records"]  # every log read from its start
    assert moved["waiting_ops"] == 0


def test_offsets_of_another_cluster_are_refused_naming_both(
    topo: LocalTopology, capsys: pytest.CaptureFixture[str]
) -> None:
    boot = topo.bootstrap[2]
    argv = ["replay", "--bootstrap", boot, "--region", "r2", "--digest"]
    assert main([*argv, "--offsets", "cluster=streams-r1,r1.oplog=2"]) == 3
    err = capsys.readouterr().err
    assert "cluster streams-r1" in err and "cluster streams-r2" in err
    assert main([*argv, "--offsets", "cluster=streams-r2,r1.oplog=2"]) == 0
    assert main([*argv, "--offsets", "r1.oplog=2"]) == 0  # as before: this cluster's


def test_a_node_booting_from_a_snapshot_of_another_cluster_reads_every_log_and_holds_the_state(
    topo: LocalTopology, tmp_path: Path
) -> None:
    boot = topo.bootstrap[2]
    snap, later = tmp_path / "r2.snap", tmp_path / "r2-later.snap"
    other = tmp_path / "r2-from-r1.snap"
    _snapshot(boot, snap)
    c2 = topo.client(2)
    c2.xadd(b"k2", {b"n": b"after"})  # taken as they are, the later offsets would skip it
    _snapshot(boot, later)
    _relabelled(snap, later, other, "streams-r1")
    before = c2.execute_command("CRDT.DIGEST")
    pending = c2.xpending(b"k2", b"g")["pending"]
    topo.kill_node(2)
    topo.start_node(2, ["--snapshot", str(other)])
    c2 = topo.client(2)
    deadline = time.monotonic() + 30
    while c2.execute_command("CRDT.DIGEST") != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c2.execute_command("CRDT.DIGEST") == before
    assert c2.xpending(b"k2", b"g")["pending"] == pending
    assert c2.xrange(b"k2")[-1][1] == {b"n": b"after"}
    flat = c2.execute_command("CRDT.INFO")
    info = dict(zip(flat[::2], flat[1::2], strict=True))
    assert b"taken on cluster streams-r1" in info[b"booted_from"]
