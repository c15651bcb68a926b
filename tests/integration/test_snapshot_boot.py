"""A node boots from a snapshot file and reads only the logs' tails: same state as a full replay,
and the same listpack nodes as before it stopped (snapshots store them as they are).

The snapshot is written by `streams snapshot` (the replay tool) from the region's own cluster; more
writes follow it (the tail); the node is killed and started with `--snapshot FILE`.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from confluent_kafka import Producer

from topology.local import LocalTopology


def write(client: redis.Redis, n: int, tag: bytes) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(b"snap:%d" % (i % 4), {b"t": tag, b"i": b"%d" % i})
    pipe.execute()
    read = client.xreadgroup(b"g", b"c-" + tag, {b"snap:0": b">"}, count=25)
    ids = [eid for _s, entries in read for eid, _f in entries]
    client.xack(b"snap:0", b"g", *ids[::3])
    client.xdel(b"snap:1", *[eid for eid, _f in client.xrange(b"snap:1", count=5)])


def state(client: redis.Redis) -> dict[str, object]:
    return {
        "digest": client.execute_command("CRDT.DIGEST"),
        "xlen": [client.xlen(b"snap:%d" % k) for k in range(4)],
        "pending": [
            {k: v for k, v in p.items() if k != "time_since_delivered"}
            for p in client.xpending_range(b"snap:0", b"g", "-", "+", 1000)
        ],
        "groups": [(g["name"], g["pending"]) for g in client.xinfo_groups(b"snap:0")],
        "vector": client.execute_command("CRDT.VECTOR"),
    }


def info(client: redis.Redis) -> dict[bytes, object]:
    flat = client.execute_command("CRDT.INFO")
    return dict(zip(flat[::2], flat[1::2], strict=True))


def test_a_node_booted_from_a_snapshot_reads_only_the_tail_and_holds_the_same_state(
    tmp_path: Path,
) -> None:
    with LocalTopology(regions=1, manual_sync=False) as topo:
        client = topo.client(1)
        client.xgroup_create(b"snap:0", b"g", id="0", mkstream=True)
        write(client, 3000, b"before")
        client.execute_command("CRDT.FLUSH")
        snapshot = tmp_path / "r1.snapshot"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "streams.cli",
                "snapshot",
                "--bootstrap",
                topo.bootstrap[1],
                "--region",
                "r1",
                "--out",
                str(snapshot),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        write(client, 500, b"after")  # the tail
        client.execute_command("CRDT.FLUSH")
        before = state(client)
        topo.kill_node(1)
        topo.start_node(1, ["--snapshot", str(snapshot)])
        booted = topo.client(1)
        assert state(booted) == before
        facts = info(booted)
        assert b"snapshot file" in facts[b"booted_from"]  # type: ignore[operator]
        assert 0 < int(facts[b"boot_records_read"]) < 1000  # type: ignore[call-overload]
        topo.kill_node(1)
        topo.start_node(1)  # and a full replay agrees
        assert state(topo.client(1)) == before


def test_a_snapshot_of_another_region_is_refused_clearly(tmp_path: Path) -> None:
    with LocalTopology(regions=2, manual_sync=False) as topo:
        topo.client(2).xadd(b"k", {b"f": b"v"})
        snapshot = tmp_path / "r2.snapshot"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "streams.cli",
                "snapshot",
                "--bootstrap",
                topo.bootstrap[2],
                "--region",
                "r2",
                "--out",
                str(snapshot),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        topo.kill_node(1)
        with pytest.raises(Exception, match="snapshot of region id 2"):
            topo.start_node(1, ["--snapshot", str(snapshot)])


def nodes(client: redis.Redis) -> list[int]:
    """Each key's listpack node count (XINFO STREAM radix-tree-keys)."""
    return [client.xinfo_stream(b"snap:%d" % k)["radix-tree-keys"] for k in range(4)]


def test_the_node_snapshots_to_kafka_and_boots_from_the_newest_that_reads_back() -> None:
    args = ["--snapshot-every-ops", "1000", "--snapshot-every-s", "0"]
    with LocalTopology(regions=1, manual_sync=False, node_args=args) as topo:
        client = topo.client(1)
        client.xgroup_create(b"snap:0", b"g", id="0", mkstream=True)
        client.config_set("stream-node-max-entries", 7)  # nodes a re-pack would not make again
        write(client, 2500, b"one")
        deadline = time.monotonic() + 30
        while int(info(client)[b"snapshots_taken"]) < 1:  # type: ignore[call-overload]
            assert time.monotonic() < deadline, info(client)
            time.sleep(0.1)
        taken = client.execute_command("CRDT.SNAPSHOT")  # and one on demand
        client.config_set("stream-node-max-entries", 100)  # what a restarted node has
        write(client, 300, b"two")  # the tail
        client.execute_command("CRDT.FLUSH")
        before = state(client)
        nodes_before = nodes(client)
        topo.kill_node(1)
        topo.start_node(1)
        booted = topo.client(1)
        assert state(booted) == before
        assert nodes(booted) == nodes_before  # the snapshot kept the nodes as they were
        facts = info(booted)
        assert facts[b"booted_from"] == b"snapshot %s from r1.snapshot" % taken
        assert 0 < int(facts[b"boot_records_read"]) < 1500  # type: ignore[call-overload]
        # A newer snapshot that does not read back (bad bytes, right digest) is reported and
        # the previous one is used: never a wrong state.
        bad = b"not an avro container"
        producer = Producer({"bootstrap.servers": topo.bootstrap[1]})
        producer.produce(
            "r1.snapshot",
            key=b"9999999999999-1",
            value=bad,
            headers=[
                ("snapshot.id", b"9999999999999-1"),
                ("snapshot.chunk", b"0"),
                ("snapshot.chunks", b"1"),
                ("snapshot.sha256", hashlib.sha256(bad).hexdigest().encode()),
            ],
        )
        producer.flush(10)
        topo.kill_node(1)
        topo.start_node(1)
        assert state(topo.client(1)) == before
        assert info(topo.client(1))[b"booted_from"] == b"snapshot %s from r1.snapshot" % taken


def test_a_region_that_only_receives_snapshots_too_and_restarts_from_it() -> None:
    """r2 writes nothing: its snapshots are due on the ops it applied from r1's log, or its
    restart would read every log from the start (r2 and r3 read 1,000,064 ops after a 1M-XADD
    history in r1 before this was counted)."""
    args = ["--snapshot-every-ops", "1000", "--snapshot-every-s", "0"]
    with LocalTopology(regions=2, manual_sync=False, node_args=args) as topo:
        writer, receiver = topo.client(1), topo.client(2)
        writer.xgroup_create(b"snap:0", b"g", id="0", mkstream=True)
        write(writer, 2500, b"one")
        topo.sync()
        deadline = time.monotonic() + 30
        while int(info(receiver)[b"snapshots_taken"]) < 1:  # type: ignore[call-overload]
            assert time.monotonic() < deadline, info(receiver)
            time.sleep(0.1)
        write(writer, 300, b"two")  # the tail
        topo.sync()
        before = receiver.execute_command("CRDT.DIGEST")
        topo.kill_node(2)
        topo.start_node(2)
        facts = info(topo.client(2))
        assert facts[b"booted_from"].startswith(b"snapshot "), facts  # type: ignore[attr-defined]
        assert int(facts[b"boot_records_read"]) < 2000, facts  # type: ignore[call-overload]
        assert topo.client(2).execute_command("CRDT.DIGEST") == before


def test_a_clean_stop_snapshots_so_the_restart_reads_no_tail() -> None:
    """As Redis saves on shutdown: 12,000 ops since the last snapshot (the periodic one is every
    100,000) are snapshotted when the node stops on SIGTERM, and the restart reads none of them
    again. After a SIGKILL the next start reads the tail as before."""
    with LocalTopology(regions=1, manual_sync=False) as topo:
        client = topo.client(1)
        client.xgroup_create(b"snap:0", b"g", id="0", mkstream=True)
        for _ in range(4):
            write(client, 3000, b"one")
        client.execute_command("CRDT.FLUSH")
        before = state(client)
        assert int(info(client)[b"snapshots_taken"]) == 0  # type: ignore[call-overload]
        topo.stop_node(1)
        topo.start_node(1)
        facts = info(topo.client(1))
        assert facts[b"booted_from"].startswith(b"snapshot "), facts  # type: ignore[attr-defined]
        assert int(facts[b"boot_records_read"]) < 10, facts  # type: ignore[call-overload]
        assert state(topo.client(1)) == before
        write(topo.client(1), 50, b"two")  # a short tail: no snapshot at the next stop
        topo.kill_node(1)
        topo.start_node(1)
        assert 0 < int(info(topo.client(1))[b"boot_records_read"]) < 100  # type: ignore[call-overload]
