"""Issue 37, part A, on the stack users deploy (Apache Kafka + MirrorMaker 2): with a `[retention]`
policy, after several snapshots the low offsets of every op log are gone (each partition's low
watermark moved), a node killed and started again serves with the same digest (it boots from its
snapshot; the log no longer reaches the beginning), `streams replay` of a truncated range says what
it cannot show, and a node whose snapshots are all gone refuses to start, saying why.

One two-region topology for the whole module (JVMs are slow to start on 2 cores).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.cli import main as streams_main
from streams.config import load
from tests.apache_kafka.conftest import require_kafka
from topology.local import LocalTopology
from topology.node_procs import TopologyError

pytestmark = [pytest.mark.slow, pytest.mark.apache_kafka]

ROUNDS = 3
PER_ROUND = 200


def _lows(bootstrap: str, topics: list[str]) -> dict[str, tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "retention-test"})
    try:
        return {
            t: consumer.get_watermark_offsets(TopicPartition(t, 0), timeout=10, cached=False)
            for t in topics
        }
    finally:
        consumer.close()


def _write_round(topo: LocalTopology, r: int) -> None:
    for i in (1, 2):
        pipe = topo.client(i).pipeline(transaction=False)
        for k in range(PER_ROUND):
            pipe.xadd(f"s{k % 7}", {"f": f"r{i}-{r}-{k}"})
        pipe.xdel("s0", "0-1")  # a tombstone-making op in the mix (nothing to delete: fine)
        pipe.execute()


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    require_kafka()
    topology = LocalTopology(
        regions=2,
        broker="kafka",
        mirror="mm2",
        retention={"snapshots": 2, "tail_seconds": 0},
    )
    with topology:
        before = {i: _lows(topology.bootstrap[i], ["r1.oplog", "r2.oplog"]) for i in (1, 2)}
        assert all(low == 0 for lows in before.values() for low, _high in lows.values())
        for r in range(ROUNDS):
            _write_round(topology, r)
            topology.sync()
            for i in (1, 2):
                topology.client(i).execute_command("CRDT.SNAPSHOT")
        started = time.monotonic()
        topology.report = topology.apply_retention()  # type: ignore[attr-defined]
        topology.apply_s = time.monotonic() - started  # type: ignore[attr-defined]
        yield topology


def test_after_several_snapshots_the_low_offsets_of_every_op_log_are_gone(
    topo: LocalTopology,
) -> None:
    report = topo.report  # type: ignore[attr-defined]
    print(f"\nretention applied in {topo.apply_s:.1f} s:")  # type: ignore[attr-defined]
    for trim in report.trims:
        print("  " + trim.text())
    assert not report.unsupported
    for i in (1, 2):
        lows = _lows(topo.bootstrap[i], ["r1.oplog", "r2.oplog"])
        print(f"  cluster r{i}: (low, high) watermarks {lows}")
        for topic, (low, high) in lows.items():
            assert 0 < low < high, (i, topic, low, high)  # the oldest records went, a tail stays
    # The cut is the second newest snapshot's position: the newest round's records are kept.
    assert report.deleted > 0


def test_applying_again_deletes_nothing_more_without_a_new_snapshot(topo: LocalTopology) -> None:
    again = topo.apply_retention()
    assert again.deleted == 0


def test_a_node_killed_and_started_again_serves_with_the_same_digest(topo: LocalTopology) -> None:
    digest = topo.client(1).execute_command("CRDT.DIGEST")
    assert digest == topo.client(2).execute_command("CRDT.DIGEST")
    topo.kill_node(1)
    topo.start_node(1)
    client = topo.client(1)
    assert client.execute_command("CRDT.DIGEST") == digest
    info = client.execute_command("CRDT.INFO")
    fields = {info[k].decode(): info[k + 1] for k in range(0, len(info), 2)}
    assert b"snapshot" in fields["booted_from"], fields["booted_from"]
    client.xadd("after", {"f": "v"})  # and takes writes again
    topo.sync()
    assert topo.client(2).xlen("after") == 1
    assert client.execute_command("CRDT.DIGEST") == topo.client(2).execute_command("CRDT.DIGEST")


def test_replay_starts_from_a_stored_snapshot_and_says_what_it_cannot_show(
    topo: LocalTopology, capsys: pytest.CaptureFixture[str]
) -> None:
    b1 = topo.bootstrap[1]
    digest = topo.client(1).execute_command("CRDT.DIGEST").decode()
    # The logs no longer reach the beginning: the replay starts from r1's stored snapshot.
    assert streams_main(["replay", "--bootstrap", b1, "--region", "r1", "--digest"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == digest
    assert "replayed from snapshot" in err and "r1.snapshot" in err
    # A position before every stored snapshot: what it cannot show is said, exit 3.
    at = "r1=100,r2=100"
    assert streams_main(["replay", "--bootstrap", b1, "--region", "r1", "--at", at]) == 3
    err = capsys.readouterr().err
    print(err)
    assert "deleted by the retention policy" in err
    assert "cannot show the ops of those" in err
    # history must see every op of a key: refused the same way.
    assert streams_main(["history", "--bootstrap", b1, "--region", "r1", "s1"]) == 3
    assert "deleted by the retention policy" in capsys.readouterr().err
    # diff folds both clusters from the beginning: refused, naming the log.
    b2 = topo.bootstrap[2]
    diff = ["diff", "--bootstrap", b1, "--bootstrap", b2, "--region", "r1", "--region", "r2"]
    assert streams_main(diff) == 3
    err = capsys.readouterr().err
    assert "deleted by the retention policy" in err and "streams diff" in err
    # a listing of a log from 0 says where it now starts
    assert streams_main(["log", "--bootstrap", b1, "--topic", "r1.oplog"]) == 0
    assert "starts at offset" in capsys.readouterr().err


def test_the_spark_jobs_folding_from_the_beginning_refuse_a_truncated_log(
    topo: LocalTopology,
) -> None:
    from streams.pipeline import kafka_io

    with kafka_io.planning(topo.bootstrap[1], "retention-test") as (opts, consumer):
        tps = kafka_io.partitions_of(opts, consumer)
        with pytest.raises(kafka_io.SourceError, match="deleted by the retention policy"):
            kafka_io.refuse_truncated(consumer, tps, "snapshot")


def test_a_node_whose_snapshots_are_gone_refuses_to_start_and_says_why(
    topo: LocalTopology,
) -> None:
    """Last in the module: it deletes r2's snapshots for good."""
    bootstrap = topo.bootstrap[2]
    (_low, high) = _lows(bootstrap, ["r2.snapshot"])["r2.snapshot"]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition("r2.snapshot", 0, high)]).values():
        future.result(timeout=15)
    topo.kill_node(2)
    with pytest.raises(TopologyError):
        topo.start_node(2)
    text = (topo.workdir / "node-r2.log").read_text()
    assert "deleted by the retention policy" in text
    assert "from the log's beginning" in text


def test_a_region_that_left_no_longer_holds_back_the_others_logs(topo: LocalTopology) -> None:
    """Last: r2 (its node down since the previous test) leaves; MirrorMaker 2 is rebuilt
    without it, and r1's home log is trimmed on r1's snapshots alone."""
    with pytest.raises(TopologyError, match="retention policy deleted records"):
        topo.add_region()  # over truncated logs with MirrorMaker 2: refused, nothing changed
    assert load(topo.topology_path).names == ["r1", "r2"]
    with pytest.raises(TopologyError, match="force=True"):
        topo.remove_region(2)  # its node cannot say how far it wrote
    topo.remove_region(2, force=True)
    r1 = topo.client(1)
    flat = r1.execute_command("CRDT.INFO")
    info = {flat[k].decode(): flat[k + 1] for k in range(0, len(flat), 2)}
    assert (info["regions"], info["removed_regions"]) == (b"r1", b"r2")
    with pytest.raises(TopologyError, match="was removed"):
        topo.client(2)
    before = _lows(topo.bootstrap[1], ["r1.oplog"])["r1.oplog"]
    for _round in range(2):
        r1.xadd("alone", {"f": "v"})
        r1.execute_command("CRDT.SNAPSHOT")
    report = topo.apply_retention()
    after = _lows(topo.bootstrap[1], ["r1.oplog"])["r1.oplog"]
    print(f"\nr1.oplog (low, high) {before} -> {after} with r2 removed")
    assert after[0] > before[0]
    assert all(t.region == "r1" for t in report.trims)
