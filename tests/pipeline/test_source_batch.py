"""The `streams_oplog` batch source on local[2] against real embedded brokers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from streams.crdt.state import State
from streams.pipeline import folding
from streams.pipeline.snapshot import snapshot
from streams.snapshot import read_snapshot, write_snapshot
from tests.pipeline.conftest import History
from topology.ports import free_port


def _read(spark: SparkSession, bootstrap: str, **options: str):  # type: ignore[no-untyped-def]
    reader = spark.read.format("streams_oplog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_reads_every_op_of_every_region_once_per_cluster(
    spark: SparkSession, history: History
) -> None:
    topo = history.topo
    vector = topo.vector(2)
    rows = _read(spark, topo.bootstrap[2]).select("topic", "origin", "seq", "kind").collect()
    by_topic: dict[str, list[int]] = {}
    for r in rows:
        assert r["kind"] == "op"
        assert r["topic"] == f"r{r['origin']}.oplog"
        by_topic.setdefault(r["topic"], []).append(r["seq"])
    assert sorted(by_topic) == ["r1.oplog", "r2.oplog", "r3.oplog"]
    for name, seqs in by_topic.items():
        region = name.split(".")[0]
        assert sorted(seqs) == list(range(1, vector[region] + 1))


def test_same_offsets_give_same_rows_however_split(spark: SparkSession, history: History) -> None:
    bootstrap = history.topo.bootstrap[1]
    full = _read(spark, bootstrap, subscribe="r1.oplog").select("offset").collect()
    offsets = sorted(r["offset"] for r in full)
    lo, hi = offsets[3], offsets[-3]
    start = json.dumps({"r1.oplog": {"0": lo}})
    end = json.dumps({"r1.oplog": {"0": hi}})
    cols = ["topic", "partition", "offset", "origin", "seq", "op", "args", "value"]
    one = (
        _read(spark, bootstrap, subscribe="r1.oplog", startingOffsets=start, endingOffsets=end)
        .select(*cols)
        .collect()
    )
    split = _read(
        spark,
        bootstrap,
        subscribe="r1.oplog",
        startingOffsets=start,
        endingOffsets=end,
        minPartitions="5",
    )
    assert split.rdd.getNumPartitions() == 5
    again = split.select(*cols).collect()
    assert sorted(one) == sorted(again)
    assert sorted(r["offset"] for r in one) == [o for o in offsets if lo <= o < hi]


def test_option_names_are_case_insensitive_and_headers_optional(
    spark: SparkSession, history: History
) -> None:
    df = _read(
        spark, history.topo.bootstrap[1], SUBSCRIBE="r1.oplog,r1.local", INCLUDEHEADERS="true"
    )
    assert "headers" in df.columns
    rows = df.select("topic", "kind", "origin", "seq", "op", "headers").collect()
    assert {r["topic"] for r in rows} == {"r1.oplog", "r1.local"}
    for r in rows:
        headers = {h["key"]: h["value"] for h in r["headers"]}
        assert headers["kind"].decode() == r["kind"]
        assert headers["type"].decode() == r["op"]
        assert int(headers["seq"]) == r["seq"]
    assert "headers" not in _read(spark, history.topo.bootstrap[3]).columns


def test_folded_ops_give_the_digest_of_a_live_node(spark: SparkSession, history: History) -> None:
    topo = history.topo
    for i in (2,):
        df = _read(spark, topo.bootstrap[i])
        state = State()
        for shard, key, ks in folding.collect_states(folding.key_states(df, f"r{i}.local")):
            assert shard == 0
            state.keys[key] = ks
        assert state.digest() == topo.client(i).execute_command("CRDT.DIGEST").decode()


def test_unreachable_cluster_is_a_clear_error(spark: SparkSession) -> None:
    with pytest.raises(PySparkException, match="cannot reach Kafka"):
        _read(spark, f"127.0.0.1:{free_port()}").collect()


def test_a_topic_that_is_not_an_op_log_is_refused(spark: SparkSession, history: History) -> None:
    from streams.kafka.topics import ensure_topics

    ensure_topics(history.topo.bootstrap[1], ["not-an-oplog"])
    with pytest.raises(PySparkException, match="not op logs"):
        _read(spark, history.topo.bootstrap[1], subscribe="not-an-oplog").collect()


def test_unknown_option_is_a_clear_error(spark: SparkSession, history: History) -> None:
    with pytest.raises(PySparkException, match="unknown option"):
        _read(spark, history.topo.bootstrap[1], startingOffset="earliest").collect()


def test_spark_snapshot_has_the_nodes_digest_and_pel_and_reads_back(
    spark: SparkSession, history: History, tmp_path: Path
) -> None:
    topo = history.topo
    out = tmp_path / "r1.snapshot"
    result = snapshot(spark, topo.bootstrap[1], "r1", str(out), id_mode="semi-strict")
    assert result.files == [str(out)]  # one shard: the file named, as always
    digest = result.digest
    assert result.shard_digests == [digest]
    live = topo.client(1)
    assert digest == live.execute_command("CRDT.DIGEST").decode()
    with open(out, "rb") as fp:
        region, positions, meta = read_snapshot(fp)
    assert region.id == 1 and meta["writer"] == "streams spark snapshot"
    assert meta["cluster_id"] == "streams-r1"  # its positions are that cluster's offsets
    assert region.state.digest() == digest
    assert {t for t, _p in positions} == {"r1.oplog", "r2.oplog", "r3.oplog", "r1.local"}
    assert {f"r{o}": s for o, s in region.vector.items()} == topo.vector(1)
    group = region.state.group(b"orders", b"billing")
    assert group is not None
    pending = live.xpending_range("orders", "billing", "-", "+", 100)
    assert sorted(f"{ms}-{seq}".encode() for ms, seq, _o in group.pel) == sorted(
        p["message_id"] for p in pending
    )
    assert set(group.consumers) == {b"alice"}
    # byte for byte what the snapshot module writes for that state (same sync marker)
    ref = io.BytesIO()
    same = {k: meta[k] for k in ("writer", "cluster_id")}
    write_snapshot(region, positions, ref, region_name="r1", meta=same)
    got = out.read_bytes()
    assert got == ref.getvalue().replace(ref.getvalue()[-16:], got[-16:])


def test_a_schema_given_by_the_reader_picks_columns(spark: SparkSession, history: History) -> None:
    bootstrap = history.topo.bootstrap[1]
    cols = "value binary, seq long, ctx map<int,long>, key binary, topic string"
    picked = (
        spark.read.format("streams_oplog")
        .schema(cols)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("minPartitions", "4")
        .load()
    )
    assert picked.columns == ["value", "seq", "ctx", "key", "topic"]
    full = _read(spark, bootstrap).select("value", "seq", "ctx", "key", "topic")
    assert sorted(map(tuple, picked.collect())) == sorted(map(tuple, full.collect()))
    bad = (
        spark.read.format("streams_oplog")
        .schema("seq string")
        .option("kafka.bootstrap.servers", bootstrap)
        .load()
    )
    with pytest.raises(PySparkException, match="seq string"):
        bad.collect()
