"""The Spark source and jobs read as a node reads: every record through the node's record gate
(a forged record skipped and counted, a conflict refused), another region's transaction folded
whole or not at all (export, follow, the snapshot's cut), and checkpointed offsets tied to the
cluster they were read from (a follow pointed at another cluster is refused)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from faults.test_forged_records import applied_seq, produce_op
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from streams.cli import main
from streams.config import RegionConfig, Topology
from streams.crdt import ops
from streams.crdt.region import Region
from streams.kafka.topics import ensure_topics
from streams.ops.codec import seal
from streams.ops.pack import sealed_records
from streams.pipeline.audit import audit
from streams.pipeline.export import export, follow
from streams.pipeline.snapshot import snapshot
from streams.snapshot import read_snapshot
from tests.pipeline.spark_workers import failure_of, run_to_end
from tests.pipeline.test_export_follow import read_back
from topology.broker import EmbeddedBroker
from topology.local import LocalTopology
from topology.ports import free_port

# --- a transaction of another region read in part -------------------------------------------


def _produce(boot: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": boot})
    for value in values:
        producer.produce("r2.oplog", value=value, partition=0)
    assert producer.flush(10) == 0


def _keys(out: Path) -> set[bytes]:
    return set(read_back(out)) if out.exists() and any(out.glob("key=*")) else set()


def test_a_transaction_read_in_part_is_folded_by_no_job_until_it_is_whole(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """r2's transaction takes two records (keys a and b in the first, c in the second), as a
    writer cuts a large one; a mirror has copied only the first so far. No job may show a or b
    without c: export, follow (whose later batch must refold a and b), the snapshot's cut, and
    `streams replay`."""
    broker = EmbeddedBroker("spark-txn")
    broker.start()
    try:
        boot = broker.bootstrap
        ensure_topics(boot, ["r2.oplog", "r1.local"])
        r2 = Region(2)
        lone = seal(r2.issue(ops.XAdd(b"z", (10, 2), (b"n", b"0")), 10))
        txn = [
            seal(r2.issue(ops.XAdd(key, (20 + i, 2), (b"n", b"%d" % i)), 20))
            for i, key in enumerate([b"a", b"b", b"a", b"c", b"c"])
        ]
        records = sealed_records(txn, limit=3 * max(len(s.value) for s in txn))
        assert len(records) == 2  # the same cut, as the writer makes it (each says txn_last)
        first, last = records
        _produce(boot, [lone.value, first.value])

        export(spark, boot, str(tmp_path / "export"))
        assert _keys(tmp_path / "export") == {b"z"}
        out, checkpoint = tmp_path / "follow", tmp_path / "checkpoint"
        run_to_end(lambda: follow(spark, boot, str(out), str(checkpoint), available_now=True))
        assert _keys(out) == {b"z"}
        result = snapshot(spark, boot, "r1", str(tmp_path / "r1.snap"), region_id=1)
        with open(result.files[0], "rb") as fp:
            region, positions, _meta = read_snapshot(fp)
        assert region.vector == {2: 1} and positions[("r2.oplog", 0)] == 1  # the first's offset
        assert set(region.state.keys) == {b"z"}
        monkeypatch.chdir(tmp_path)
        assert main(["replay", "--bootstrap", boot, "--region", "r1", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert summary["vector"] == {"r2": 1} and summary["waiting_ops"] == 3

        _produce(boot, [last.value])
        export(spark, boot, str(tmp_path / "export"))
        assert _keys(tmp_path / "export") == {b"z", b"a", b"b", b"c"}
        run_to_end(lambda: follow(spark, boot, str(out), str(checkpoint), available_now=True))
        assert read_back(out) == read_back(tmp_path / "export")  # a and b refolded too
    finally:
        broker.stop()


# --- the record gate, and cluster positions --------------------------------------------------


@pytest.fixture(scope="module")
def signed() -> Iterator[tuple[LocalTopology, int]]:
    """Two signing regions; an unsigned record under the dot r1 writes next, then the real write."""
    brokers = [EmbeddedBroker(f"spark-gate-r{i}") for i in (1, 2)]
    try:
        for broker in brokers:
            broker.start()
        topology = Topology(
            regions=tuple(
                RegionConfig(
                    f"r{i}",
                    i,
                    broker.bootstrap,
                    free_port(),
                    alias=f"c{i}",
                    signing_key=secrets.token_hex(32),
                )
                for i, broker in enumerate(brokers, start=1)
            )
        )
        with LocalTopology(external=topology, manual_sync=True) as topo:
            c1 = topo.client(1)
            for n in range(3):
                c1.xadd(b"victim", {b"n": b"%d" % n})
            topo.sync()
            dot = applied_seq(c1, 1) + 1
            fake = ops.Op(1, dot, (), 1, ops.XAdd(b"victim", (1, 1), (b"forged", b"1")))
            produce_op(topo.bootstrap[1], "r1.oplog", fake)
            c1.xadd(b"victim", {b"real": b"1"})
            topo.sync()
            yield topo, dot
    finally:
        for broker in brokers:
            broker.stop()


def test_a_forged_record_is_skipped_and_counted_by_the_spark_jobs_as_by_the_node(
    spark: SparkSession, signed: tuple[LocalTopology, int], tmp_path: Path
) -> None:
    topo, dot = signed
    file = str(topo.topology_path)
    report = audit(spark, [topo.bootstrap[1], topo.bootstrap[2]], topology=file)
    assert report.ok, report.render()
    assert report.skipped == sorted((topo.bootstrap[i], "forged", 1) for i in (1, 2))
    assert "records skipped by the record gate: 2" in report.render()
    export(spark, topo.bootstrap[2], str(tmp_path / "out"), topology=file)
    got = read_back(tmp_path / "out")[b"victim"]
    live = topo.client(2).xrange(b"victim")
    assert [sid for sid, _o, _f in got] == [sid for sid, _f in live]
    assert got[-1][2] == [(b"real", b"1")]
    # Without the keys the forged record cannot be told from a real one, but the gate the
    # executors learn from the logs sees two records under one dot: the job stops, as a node.
    # When several tasks fail at once Spark reports STAGE_MATERIALIZATION_MULTIPLE_FAILURES,
    # which pyspark leaves as a Py4JJavaError (one failure becomes a PySparkException).
    with pytest.raises((PySparkException, Py4JJavaError), match=f"dot 1:{dot}"):
        export(spark, topo.bootstrap[2], str(tmp_path / "bad"))


def test_a_follow_checkpoint_pointed_at_another_cluster_is_refused(
    spark: SparkSession, signed: tuple[LocalTopology, int], tmp_path: Path
) -> None:
    topo, _dot = signed
    file = str(topo.topology_path)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    run_to_end(
        lambda: follow(
            spark, topo.bootstrap[1], str(out), str(checkpoint), available_now=True, topology=file
        )
    )
    assert b"victim" in read_back(out)
    refused = failure_of(
        lambda: follow(
            spark, topo.bootstrap[2], str(out), str(checkpoint), available_now=True, topology=file
        )
    )
    assert isinstance(refused, PySparkException)
    text = str(refused)
    assert "cluster streams-spark-gate-r1" in text and "cluster streams-spark-gate-r2" in text
