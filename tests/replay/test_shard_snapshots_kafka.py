"""Snapshots per shard and diff per shard on a region of 4 shards in one node (2 regions, real
brokers): `streams snapshot` writes one file per shard, a node booted from those files (one
`--snapshot` per shard) has the live digest, `replay --snapshot` reads only the tails, and `diff`
compares the two regions shard by shard (a lagging key named with its shard)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.cli import main
from streams.replay.run import Request, replay
from streams.snapshot import read_shard, read_snapshot
from topology.local import LocalTopology

SHARDS = 4
KEYS = ("a", "b", "c", "d", "e", "f", "g", "h")
"""Two keys of each shard: b, f in 0; c, g in 1; d, h in 2; a, e in 3."""


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    with LocalTopology(regions=2, shards=SHARDS, manual_sync=True) as topo:
        c1, c2 = topo.client(1), topo.client(2)
        for i in range(2):
            for key in KEYS:
                c1.xadd(key, {"n": f"r1-{i}"})
                c2.xadd(key, {"n": f"r2-{i}"})
        c1.xgroup_create("b", "g", id="0")
        c1.xreadgroup("g", "alice", {"b": ">"}, count=2)
        topo.sync()
        yield topo


def _digest(topo: LocalTopology, i: int = 1) -> str:
    raw: Any = topo.client(i).execute_command
    return str(raw("CRDT.DIGEST").decode())


def test_a_node_boots_from_one_snapshot_file_per_shard(
    topo: LocalTopology, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boot = topo.bootstrap[1]
    out = tmp_path / "r1.snap"
    assert main(["snapshot", "--bootstrap", boot, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    files = [str(tmp_path / f"r1-s{s}.snap") for s in range(SHARDS)]
    assert not out.exists()
    for shard, path in enumerate(files):
        assert f"snapshot of r1 shard {shard} at " in printed and f"-> {path} " in printed
        with open(path, "rb") as fp:
            assert read_shard(fp) == shard
            fp.seek(0)
            _region, positions, meta = read_snapshot(fp)
        assert meta["shard"] == str(shard)
        assert {p for _t, p in positions} == {shard}
    assert f"digest {_digest(topo)}" in printed
    # A write after the snapshots: the node reads it from the tail.
    topo.client(1).xadd("e", {"n": "after the snapshot"})
    topo.sync()
    live = _digest(topo)
    topo.kill_node(1)
    topo.start_node(1, extra_args=[x for path in files for x in ("--snapshot", path)])
    assert _digest(topo) == live
    info: Any = topo.client(1).execute_command("CRDT.INFO")
    booted = dict(zip(info[::2], info[1::2], strict=True))[b"booted_from"].decode()
    assert all(f"snapshot file {path}" in booted for path in files), booted
    # The replay from the same files reads only the tails and folds to the same digest.
    snaps = [
        "--snapshot",
        files[0],
        "--snapshot",
        files[3],
        "--snapshot",
        files[1],
        "--snapshot",
        files[2],
    ]
    assert main(["replay", "--bootstrap", boot, *snaps, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["digest"] == live
    assert summary["records"] < replay(Request(bootstrap=boot)).records
    # With --shard: that shard's file alone (the others are passed over).
    assert main(["snapshot", "--bootstrap", boot, "--shard", "2", "--out", str(out)]) == 0
    assert "snapshot of r1 shard 2 of 4 at " in capsys.readouterr().out
    with open(out, "rb") as fp:
        assert read_shard(fp) == 2
    assert (
        main(["replay", "--bootstrap", boot, "--snapshot", files[2], "--snapshot", files[2]]) == 3
    )


def test_diff_compares_shard_by_shard(
    topo: LocalTopology, capsys: pytest.CaptureFixture[str]
) -> None:
    topo.sync()
    b1, b2 = topo.bootstrap[1], topo.bootstrap[2]
    assert main(["diff", "--bootstrap", b1, "--bootstrap", b2]) == 0
    out = capsys.readouterr().out
    assert f"{len(KEYS)} key(s) equal" in out
    assert re.search(r"shared position 0:r1=\d+,r2=\d+;1:", out), out
    topo.client(1).xadd("g", {"n": "only in r1"})  # never mirrored to r2's cluster
    assert main(["diff", "--bootstrap", b1, "--bootstrap", b2]) == 1
    out = capsys.readouterr().out
    assert re.search(
        r"lagging: key g \(shard 1\): r2 has not applied r1:\d+ XAdd g "
        r"\(missing from its cluster\)",
        out,
    ), out
    assert "CONVERGENCE BUG" not in out
    assert main(["diff", "--bootstrap", b1, "--bootstrap", b2, "--shard", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["equal_keys"] == 2 and not summary["differs"]
