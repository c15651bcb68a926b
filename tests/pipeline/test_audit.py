"""`streams spark audit` over two real clusters: finds an injected divergence and duplicate IDs."""

from __future__ import annotations

from confluent_kafka import Producer
from pyspark.sql import SparkSession

from streams.crdt import ops
from streams.ops.codec import encode
from streams.pipeline.audit import audit
from topology.local import LocalTopology


def _produce(bootstrap: str, topic: str, op: ops.Op) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, encode(op))
    assert producer.flush(10) == 0


def test_audit_finds_injected_divergence_and_duplicate_ids_and_counts_ops(
    spark: SparkSession,
) -> None:
    with LocalTopology(regions=2, manual_sync=True, id_mode="liberal") as topo:
        c1, c2 = topo.client(1), topo.client(2)
        for i in range(12):
            c1.xadd("a", {"i": str(i)})
        for i in range(5):
            c2.xadd("b", {"i": str(i)})
        c1.xadd("dup", {"from": "r1"}, id="7-0")
        c2.xadd("dup", {"from": "r2"}, id="7-0")
        topo.sync()
        c1.delete("b")
        topo.sync()
        # A forged op at the same dot with different contents in each cluster: r2's next op.
        seq = topo.vector(2)["r2"] + 1
        ctx = ((1, topo.vector(1)["r1"]),)
        for cluster, value in ((1, b"one"), (2, b"two")):
            forged = ops.Op(2, seq, ctx, 1, ops.XAdd(b"forged", (9, 9), (b"f", value)))
            _produce(topo.bootstrap[cluster], "r2.oplog", forged)
        report = audit(spark, [topo.bootstrap[1], topo.bootstrap[2]])
        b1, b2 = topo.bootstrap[1], topo.bootstrap[2]
    assert report.position == {0: {1: 14, 2: seq}}
    assert report.shards == 1
    assert report.differing_keys == [b"forged"]
    assert report.conflicting_dots == [(0, 2, seq)]
    assert report.region_digests[b1] != report.region_digests[b2]
    assert not report.ok
    assert set(report.digests) == {b"a", b"b", b"dup", b"forged"}
    assert report.digests[b"b"] == {b1: "", b2: ""}  # deleted everywhere
    assert report.digests[b"a"][b1] == report.digests[b"a"][b2] != ""
    assert report.duplicate_ids == sorted([(b1, b"dup", ["7-0"]), (b2, b"dup", ["7-0"])])
    counts = {(c, o, t): n for c, o, t, n in report.op_counts}
    for cluster in (b1, b2):
        assert counts[(cluster, 1, "XAdd")] == 13
        assert counts[(cluster, 1, "Del")] == 1
        assert counts[(cluster, 2, "XAdd")] == 7
    assert {(c, o) for c, o, _p, _m, _t in report.lag_ms} == {(b1, 1), (b1, 2), (b2, 1), (b2, 2)}
    assert "DIVERGED" in report.render()
