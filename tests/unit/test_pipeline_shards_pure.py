"""Pure parts of the pipeline's shard handling (no Spark, no Kafka): the shard count, file names,
one sorted stream cut into shards, per-shard digests, and folds of colliding dots kept apart."""

from __future__ import annotations

import pytest

from streams.crdt import ops
from streams.crdt.keyspace import digest as region_digest
from streams.crdt.region import Region
from streams.crdt.state import State
from streams.pipeline.cut import render
from streams.pipeline.fold import fold_key
from streams.pipeline.shards import (
    ShardCountError,
    ShardStream,
    shard_count,
    shard_digests,
    shard_path,
)
from streams.pipeline.snapshot_file import digest_feed
from streams.slots import shard_of


def test_shard_count_is_the_partition_count_every_op_log_shares() -> None:
    tps = [(t, p) for t in ("r1.oplog", "r2.oplog", "r1.local") for p in range(4)]
    assert shard_count(tps) == 4
    assert shard_count([("r1.oplog", 0)]) == 1
    assert shard_count([]) == 1
    with pytest.raises(ShardCountError, match=r"r1.oplog: 4, r2.oplog: 2"):
        shard_count(tps[:4] + [("r2.oplog", 0), ("r2.oplog", 1)])
    with pytest.raises(ShardCountError, match="partitions 0..n-1"):
        shard_count([("r1.oplog", 1)])


def test_shard_paths() -> None:
    assert shard_path("/x/r1.snapshot", 0, 1) == "/x/r1.snapshot"
    assert shard_path("/x/r1.snapshot", 2, 4) == "/x/r1.snapshot.shard2"
    assert shard_path("/x/r1-{shard}.snap", 3, 4) == "/x/r1-3.snap"
    assert shard_path("/x/r1-{shard}.snap", 0, 1) == "/x/r1-0.snap"


def test_a_sorted_stream_is_taken_shard_by_shard_with_empty_shards() -> None:
    stream = ShardStream([(0, "a"), (0, "b"), (2, "c")], lambda item: item[0])
    assert [list(stream.of(s)) for s in range(4)] == [[(0, "a"), (0, "b")], [], [(2, "c")], []]
    assert stream.rest() is None
    late = ShardStream([(1, "a"), (0, "b")], lambda item: item[0])
    assert list(late.of(0)) == []
    with pytest.raises(ValueError, match="out of order"):
        list(late.of(1))
    beyond = ShardStream([(5, "x")], lambda item: item[0])
    assert list(beyond.of(0)) == [] and beyond.rest() == 5


def _xadd(
    origin: int, seq: int, key: bytes, ms: int, ctx: tuple[tuple[int, int], ...] = ()
) -> ops.Op:
    return ops.Op(origin, seq, ctx, ms, ops.XAdd(key, (ms, origin), (b"f", b"%d" % seq)))


def test_the_same_dots_in_two_shards_fold_apart_and_digest_as_the_nodes_shards() -> None:
    """Shard a and shard b both hold (r1, 1..3) and (r2, 1..2), each for its own key: folded per
    (shard, key) each key gets exactly its own ops, and the shards' digests combine into the
    region digest of two Regions that applied the same ops (what a node of 2 shards holds)."""
    a = next(b"a%d" % i for i in range(100) if shard_of(b"a%d" % i, 2) == 0)
    b = next(b"b%d" % i for i in range(100) if shard_of(b"b%d" % i, 2) == 1)
    shard_ops = {
        0: [_xadd(1, s, a, 10 + s) for s in (1, 2, 3)]
        + [_xadd(2, 1, a, 20, ((1, 2),)), _xadd(2, 2, a, 21, ((1, 3),))],
        1: [_xadd(1, s, b, 30 + s) for s in (1, 2, 3)]
        + [_xadd(2, 1, b, 40, ((1, 3),)), _xadd(2, 2, b, 41, ((1, 3),))],
    }
    nodes = []
    feeds = []
    for shard, records in shard_ops.items():
        node = Region(1)
        for op in records:
            node.receive(op)
        nodes.append(node.state.digest())
        key = records[0].body.key
        ks = fold_key(reversed(records)).state.raw(key)  # any order in: the fold sorts
        assert ks is not None and ks.entries.length == 5
        feeds.append((shard, digest_feed(key, ks)))
    assert shard_digests(feeds, 2) == nodes
    assert region_digest(shard_digests(feeds, 2)) == region_digest(nodes)
    # had the dots been mixed (one fold over both shards' ops), duplicates would be dropped
    mixed = fold_key(shard_ops[0] + shard_ops[1]).state
    assert sum(mixed.raw(k).entries.length for k in (a, b) if mixed.raw(k)) < 10  # type: ignore[union-attr]
    assert State().digest() == shard_digests([], 1)[0]


def test_the_cut_renders_per_shard() -> None:
    assert render({0: {1: 14, 2: 3}}) == "1:14, 2:3"
    assert render({}) == ""
    assert render({0: {1: 2}, 3: {1: 5}}) == "shard 0: 1:2; shard 3: 1:5"
