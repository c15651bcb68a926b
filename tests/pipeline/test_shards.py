"""The pipeline over a database of 4 shards, 2 regions, on real brokers and local[2].

Every shard numbers its ops per origin from 1, so with a few ops per shard the same dot (r1, 5)
certainly exists in several partitions, each a different op of a different key: the source, the
folds, the cut, the audit and the snapshot must keep them apart. Checked against the nodes
themselves: CRDT.DIGEST (the region), CRDT.SHARDS (each shard's digest and vector), XRANGE, and a
node booted from the per-shard snapshot files.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from streams.crdt.keyspace import digest as region_digest
from streams.crdt.state import State
from streams.pipeline import folding
from streams.pipeline.audit import audit
from streams.pipeline.export import export, follow, read_oplogs
from streams.pipeline.snapshot import snapshot
from streams.slots import shard_of
from streams.snapshot import read_shard, read_snapshot
from tests.pipeline.spark_workers import run_to_end
from tests.pipeline.test_export_follow import (
    _comparable,
    read_back,
    stored_records,
    xrange_all,
)
from topology.local import LocalTopology

SHARDS = 4
KEYS_PER_SHARD = 3


def keys_of_every_shard() -> list[bytes]:
    """KEYS_PER_SHARD keys of each shard (found by hashing names until every shard has them)."""
    found: dict[int, list[bytes]] = {s: [] for s in range(SHARDS)}
    i = 0
    while any(len(v) < KEYS_PER_SHARD for v in found.values()):
        key = b"k%d" % i
        if len(found[shard_of(key, SHARDS)]) < KEYS_PER_SHARD:
            found[shard_of(key, SHARDS)].append(key)
        i += 1
    return [k for s in range(SHARDS) for k in found[s]]


@pytest.fixture(scope="module")
def sharded() -> Iterator[tuple[LocalTopology, list[bytes]]]:
    """Two regions writing concurrently to keys of every shard: adds, a group with reads and
    acks (local records), trims, XDEL, a DEL concurrent with an add."""
    keys = keys_of_every_shard()
    with LocalTopology(regions=2, shards=SHARDS, manual_sync=True) as topo:
        c1, c2 = topo.client(1), topo.client(2)
        for round_ in range(3):
            for key in keys:
                c1.xadd(key, {"n": str(round_), "by": "r1"})
                c2.xadd(key, {"n": str(round_), "by": "r2"})
        topo.sync()
        for key in keys[::KEYS_PER_SHARD]:  # one key per shard: a group, read, half acked
            c1.xgroup_create(key, "g", id="0")
            read = c1.xreadgroup("g", "alice", {key: ">"}, count=4)
            c1.xack(key, "g", *[sid for sid, _f in read[0][1][:2]])
        c2.xtrim(keys[1], maxlen=3)
        c1.xdel(keys[4], c1.xrange(keys[4], count=1)[0][0])
        topo.sync()
        c2.delete(keys[-1])
        c1.xadd(keys[-1], {"after": "del"})  # concurrent with r2's DEL: survives
        topo.sync()
        yield topo, keys


def _crdt_digest(topo: LocalTopology, i: int) -> str:
    """Region i's CRDT.DIGEST."""
    reply: bytes = topo.client(i).execute_command("CRDT.DIGEST")  # type: ignore[no-untyped-call]
    return reply.decode()


def _crdt_shards(topo: LocalTopology, i: int) -> dict[int, tuple[str, dict[int, int]]]:
    """Region i's shards as its node reports them: index -> (digest, applied vector by id)."""
    reply = topo.client(i).execute_command("CRDT.SHARDS")  # type: ignore[no-untyped-call]
    return {
        index: (d.decode(), {int(flat[k][1:]): int(flat[k + 1]) for k in range(0, len(flat), 2)})
        for index, d, flat in reply
    }


def test_every_partition_is_read_and_dots_collide_across_shards(
    spark: SparkSession, sharded: tuple[LocalTopology, list[bytes]]
) -> None:
    topo, _keys = sharded
    rows = (
        read_oplogs(spark, topo.bootstrap[1])
        .select("topic", "partition", "kind", "origin", "seq", "key")
        .collect()
    )
    assert {(r["topic"], r["partition"]) for r in rows} == {
        (t, p) for t in ("r1.oplog", "r2.oplog") for p in range(SHARDS)
    }
    for r in rows:
        assert r["partition"] == shard_of(bytes(r["key"]), SHARDS)
    # each shard numbers its ops per origin from 1, without gaps
    per: dict[tuple[int, int], list[int]] = {}
    for r in rows:
        per.setdefault((r["partition"], r["origin"]), []).append(r["seq"])
    for seqs in per.values():
        assert sorted(seqs) == list(range(1, len(seqs) + 1))
    vector = topo.vector(1)
    assert sum(len(v) for (_p, o), v in per.items() if o == 1) == vector["r1"]
    # the same dot in every shard, each time another key's op
    dots = Counter((r["origin"], r["seq"]) for r in rows)
    assert dots[(1, 5)] == dots[(2, 5)] == SHARDS
    keys_at = {bytes(r["key"]) for r in rows if (r["origin"], r["seq"]) == (1, 5)}
    assert len({shard_of(k, SHARDS) for k in keys_at}) == SHARDS


def test_folds_per_shard_give_each_shards_and_the_regions_digest(
    spark: SparkSession, sharded: tuple[LocalTopology, list[bytes]]
) -> None:
    topo, _keys = sharded
    for i in (1, 2):
        states = [State() for _ in range(SHARDS)]
        df = read_oplogs(spark, topo.bootstrap[i])
        for shard, key, ks in folding.collect_states(folding.key_states(df, f"r{i}.local")):
            assert shard == shard_of(key, SHARDS)
            states[shard].keys[key] = ks
        digests = [s.digest() for s in states]
        assert digests == [d for _s, (d, _v) in sorted(_crdt_shards(topo, i).items())]
        assert region_digest(digests) == _crdt_digest(topo, i)


def test_audit_of_two_sharded_clusters_agrees_with_the_nodes(
    spark: SparkSession, sharded: tuple[LocalTopology, list[bytes]]
) -> None:
    topo, keys = sharded
    b1, b2 = topo.bootstrap[1], topo.bootstrap[2]
    report = audit(spark, [b1, b2])
    assert report.ok, report.render()
    assert report.shards == SHARDS
    assert report.conflicting_dots == []  # (r1, 5) of shard 0 is not (r1, 5) of shard 3
    assert report.position == {s: vector for s, (_d, vector) in _crdt_shards(topo, 1).items()}
    live = _crdt_digest(topo, 1)
    assert report.region_digests == {b1: live, b2: live}
    assert report.shard_digests[b1] == [d for _s, (d, _v) in sorted(_crdt_shards(topo, 2).items())]
    assert set(report.digests) == set(keys)
    assert "shard 3:" in report.render()


def test_export_and_follow_equal_xrange_for_keys_of_every_shard(
    spark: SparkSession, sharded: tuple[LocalTopology, list[bytes]], tmp_path: Path
) -> None:
    topo, keys = sharded
    written = export(spark, topo.bootstrap[2], str(tmp_path / "out"))
    got = read_back(tmp_path / "out")
    assert written == sum(len(v) for v in got.values())
    assert {shard_of(k, SHARDS) for k in got} == set(range(SHARDS))
    for i in (1, 2):
        assert _comparable(got) == xrange_all(topo.client(i), keys)
    out, checkpoint = tmp_path / "follow", tmp_path / "checkpoint"
    run_to_end(
        lambda: follow(
            spark,
            topo.bootstrap[1],
            str(out),
            str(checkpoint),
            max_offsets_per_trigger=40,
            available_now=True,
        )
    )
    assert _comparable(read_back(out)) == xrange_all(topo.client(1), keys)
    records = stored_records(out)
    assert len(records) == len(set(records)) == sum(topo.vector(1).values())
    assert {p for _t, p, _o, _s in records} == set(range(SHARDS))


def test_snapshot_writes_one_bootable_file_per_shard(
    spark: SparkSession, sharded: tuple[LocalTopology, list[bytes]], tmp_path: Path
) -> None:
    """Runs last in this module: it writes more and restarts region 1's node."""
    topo, keys = sharded
    result = snapshot(spark, topo.bootstrap[1], "r1", str(tmp_path / "r1.snapshot"))
    live = _crdt_digest(topo, 1)
    assert result.digest == live == _crdt_digest(topo, 2)
    assert result.files == [str(tmp_path / f"r1.snapshot.shard{s}") for s in range(SHARDS)]
    shards = _crdt_shards(topo, 1)
    for s, path in enumerate(result.files):
        with open(path, "rb") as fp:
            assert read_shard(fp) == s
        with open(path, "rb") as fp:
            region, positions, meta = read_snapshot(fp)
        assert (meta["writer"], meta["shard"]) == ("streams spark snapshot", str(s))
        assert region.id == 1 and region.state.digest() == result.shard_digests[s]
        assert dict(region.vector) == shards[s][1]
        assert {p for _t, p in positions} == {s}
        assert {t for t, _p in positions} == {"r1.oplog", "r2.oplog", "r1.local"}
        assert all(shard_of(k, SHARDS) == s for k in region.state.keys)
        grouped = [k for k in keys[::KEYS_PER_SHARD] if shard_of(k, SHARDS) == s]
        for key in grouped:  # the PEL of r1's group came from r1.local's partition s
            group = region.state.group(key, b"g")
            assert group is not None and set(group.consumers) == {b"alice"}
            assert len(group.pel) == 2
    # more history after the snapshot, then region 1's node boots from the four files
    c1, c2 = topo.client(1), topo.client(2)
    for key in keys:
        c2.xadd(key, {"after": "snapshot"})
    c1.xadd(keys[0], {"r1": "after"})
    topo.sync()
    topo.kill_node(1)
    args = [x for path in result.files for x in ("--snapshot", path)]
    topo.start_node(1, extra_args=args)
    topo.sync()
    flat = topo.client(1).execute_command("CRDT.INFO")
    booted = dict(zip(flat[::2], flat[1::2], strict=True))[b"booted_from"]
    for path in result.files:
        assert path.encode() in booted
    after = _crdt_digest(topo, 2)
    assert after != live
    assert _crdt_digest(topo, 1) == after
    assert _comparable_xrange(topo, keys)


def _comparable_xrange(topo: LocalTopology, keys: list[bytes]) -> bool:
    deadline = time.monotonic() + 30
    while xrange_all(topo.client(1), keys) != xrange_all(topo.client(2), keys):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
