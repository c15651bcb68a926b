"""Export and follow: Parquet read back with pyarrow equals XRANGE on a live node."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streams.pipeline.export import OPS_DIR, export, follow
from tests.pipeline.conftest import History
from tests.pipeline.spark_workers import run_until
from topology.local import LocalTopology

Entries = dict[bytes, list[tuple[bytes, bytes, list[tuple[bytes, bytes]]]]]


def read_back(out: Path) -> Entries:
    """key -> [(id, origin, fields)] in pos order, from the Parquet files with pyarrow."""
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    rows = sorted(table.to_pylist(), key=lambda r: (r["key_bytes"], r["pos"]))
    got: Entries = {}
    for r in rows:
        got.setdefault(r["key_bytes"], []).append(
            (r["id"].encode(), str(r["origin"]).encode(), [tuple(f) for f in r["fields"]])
        )
        assert r["key"] == r["key_bytes"].decode()
    for key, items in got.items():
        assert len({i[0] for i in items}) == len(items) or key == b"dup"
    return got


def xrange_all(client: redis.Redis, keys: list[bytes]) -> dict[bytes, list[tuple[bytes, list]]]:
    out = {}
    for key in keys:
        entries = client.xrange(key)
        if entries:
            out[key] = [(sid, sorted(fields.items())) for sid, fields in entries]
    return out


def _comparable(got: Entries) -> dict[bytes, list[tuple[bytes, list]]]:
    return {k: [(sid, sorted(fields)) for sid, _o, fields in v] for k, v in got.items()}


def test_export_read_back_with_pyarrow_equals_xrange(
    spark: SparkSession, history: History, tmp_path: Path
) -> None:
    topo = history.topo
    written = export(spark, topo.bootstrap[2], str(tmp_path / "out"), min_partitions=4)
    got = read_back(tmp_path / "out")
    assert written == sum(len(v) for v in got.values())
    for i in (1, 2, 3):
        assert _comparable(got) == xrange_all(topo.client(i), history.keys)
    assert len([sid for sid, _o, _f in got[b"dup"] if sid == b"5-1"]) == 2
    assert {o for sid, o, _f in got[b"dup"]} == {b"2", b"3"}


def stored_records(out: Path) -> list[tuple[str, int, int, int]]:
    """(topic, partition, offset, seq) of every op a follow query stored under `out`: one per
    op, not per record, since one record can be a pack of a transaction's ops (`streams.ops.
    pack`; with the commit linger, CI saw two ops in one record of the sharded topology)."""
    stored = ds.dataset(str(out / OPS_DIR), format="parquet", partitioning="hive").to_table()
    columns = [stored.column(c).to_pylist() for c in ("topic", "partition", "offset", "seq")]
    return list(zip(*columns, strict=True))


@pytest.fixture
def live() -> Iterator[LocalTopology]:
    with LocalTopology(regions=2, manual_sync=True, id_mode="semi-strict") as topo:
        yield topo


def _wait_batches(query, n: int, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            # raises the failure with its Java exception kept (exception() keeps only text)
            query.awaitTermination()
        progress = query.recentProgress
        if len([p for p in progress if p["numInputRows"] > 0]) >= n:
            return
        time.sleep(0.2)
    raise TimeoutError(f"the streaming query did not complete {n} batches")


def test_follow_stopped_and_restarted_ends_with_exactly_the_nodes_entries(
    spark: SparkSession, live: LocalTopology, tmp_path: Path
) -> None:
    c1, c2 = live.client(1), live.client(2)
    for i in range(40):
        c1.xadd("s", {"i": str(i)})
        c2.xadd("t", {"i": str(i)})
    live.sync()
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    # 50 offsets a trigger: the first run stops after one batch, mid-history (80 records), and
    # the whole test runs three micro-batches (at 30 it ran five; each costs seconds of Spark on
    # 2 cores: 94 -> 58 s alone).
    def start() -> StreamingQuery:
        return follow(
            spark,
            live.bootstrap[1],
            str(out),
            str(checkpoint),
            trigger_seconds=0.1,
            max_offsets_per_trigger=50,
        )

    run_until(start, lambda query: _wait_batches(query, 1))
    first_batches = len(list((out / OPS_DIR).glob("batch_id=*")))
    assert first_batches >= 1
    # more history while the query is down: deletes, trims, new keys
    c1.xtrim("s", maxlen=25)
    c2.delete("t")
    c2.xadd("t", {"after": "del"})
    for i in range(10):
        c2.xadd("u", {"i": str(i)})
    c1.xdel("u", c1.xrange("u", count=1)[0][0]) if c1.xrange("u", count=1) else None
    live.sync()
    run_until(start, lambda query: query.processAllAvailable())
    got = read_back(out)
    assert _comparable(got) == xrange_all(c1, [b"s", b"t", b"u"])
    offsets = stored_records(out)
    assert len(offsets) == len(set(offsets))  # no batch processed twice
    vector = live.vector(1)
    assert len(offsets) == vector["r1"] + vector["r2"]  # none missing
    batches = sorted(int(p.name.split("=")[1]) for p in (out / OPS_DIR).glob("batch_id=*"))
    assert batches[0] == 0 and len(batches) > first_batches  # resumed, not restarted from 0
