"""Issue 37, part C, on the light stack, beyond the fault test's single shard
(`tests/faults/test_region_join.py`): a region joins a topology of 2 shards over 2 node processes
per region, syncing by hand (the mirrors copy only in `sync()`); and `streams region add` does
the file, the wait for the running nodes and the seed files for an operator, who then starts the
mirrors and the node."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from streams.cli import main
from streams.config import load
from topology.brokers import make_broker
from topology.local import LocalTopology
from topology.ports import free_port
from topology.replication import make_replication


def _info(client: redis.Redis) -> dict[str, bytes]:
    flat = client.execute_command("CRDT.INFO")
    return {flat[k].decode(): flat[k + 1] for k in range(0, len(flat), 2)}


def test_a_region_joins_a_sharded_topology_synced_by_hand() -> None:
    with LocalTopology(regions=2, shards=2, nodes=2) as topo:
        for i in (1, 2):
            cluster = topo.cluster_client(i)
            for k in range(20):
                cluster.xadd(f"k{k}", {"from": f"r{i}"})
        topo.sync()
        peer = topo.cluster_client(1)  # the region the new one's snapshot comes from
        peer.xgroup_create("k0", "g", id="0")
        peer.xreadgroup("g", "c", {"k0": ">"})  # pending in r1 only (local)
        topo.sync()
        assert peer.xpending("k0", "g")["pending"] == 2
        new = topo.add_region()
        assert new == 3
        fresh = topo.cluster_client(3)
        # It serves the peer's state at once, before any copy reached its cluster.
        assert fresh.xlen("k5") == 2
        assert fresh.xpending("k0", "g")["pending"] == 0  # r1's PEL is r1's own
        assert len(fresh.xreadgroup("g", "c3", {"k0": ">"})[0][1]) == 2
        for k in range(20):
            fresh.xadd(f"k{k}", {"from": "r3"})
        topo.cluster_client(1).xadd("k0", {"from": "r1", "after": "join"})
        topo.sync()
        digests = {i: topo._node_client(i, 0).execute_command("CRDT.DIGEST") for i in (1, 2, 3)}
        assert len(set(digests.values())) == 1, digests
        assert topo.cluster_client(1).xlen("k7") == 3
        assert fresh.xlen("k0") == 4
        assert peer.xpending("k0", "g")["pending"] == 2
        for node in (0, 1):
            info = _info(topo._node_client(1, node))
            assert info["regions"] == b"r1 r2 r3"


def test_streams_region_add_for_an_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LocalTopology(regions=2, manual_sync=False) as topo:
        topo.client(1).xadd("s", {"f": "1"})
        topo.client(2).xadd("s", {"f": "2"})
        topo.sync()
        broker = make_broker("tansu", "r3")
        broker.start()
        topo.brokers[3] = broker  # stopped with the topology
        port = free_port()
        path = str(topo.topology_path)
        argv = ["region", "add", "r3", "--bootstrap", broker.bootstrap, "--port", str(port)]
        assert main([*argv, "--topology", path, "--seed-dir", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "r3 (id 3) added" in out and "--snapshot" in out
        assert _info(topo.client(1))["regions"] == b"r1 r2 r3"
        seed = tmp_path / "r3-join-shard0.snapshot"
        assert seed.exists()
        # The operator: mirrors with the new region, then its node from the seed.
        topology = load(path)
        assert topo.replication is not None
        topo.replication.stop()
        topo.replication = make_replication("embedded", topology, topo.workdir)
        topo.replication.start(copying=True)
        node = subprocess.Popen(
            [sys.executable, "-m", "streams.node", "--topology", path, "--region", "r3"]
            + ["--snapshot", str(seed)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            client = redis.Redis(port=port)
            deadline = time.monotonic() + 60
            while True:
                try:
                    assert client.xlen("s") == 2
                    break
                except (redis.ConnectionError, redis.BusyLoadingError):
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            client.xadd("s", {"f": "3"})
            deadline = time.monotonic() + 30
            while topo.client(1).xlen("s") < 3 or topo.client(2).xlen("s") < 3:
                assert time.monotonic() < deadline, "r3's write did not reach the others"
                time.sleep(0.1)
            digests = {topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 2)}
            assert digests == {client.execute_command("CRDT.DIGEST")}
            capsys.readouterr()
            main(["status", "--topology", path])
            assert "regions: r1, r2, r3" in capsys.readouterr().out
            client.close()
        finally:
            node.terminate()
            node.wait(timeout=20)
