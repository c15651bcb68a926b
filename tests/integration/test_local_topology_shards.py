"""`LocalTopology(shards=S, nodes=M)`: the topology file the nodes get, every node's port, the
region totals `sync()` and `vector()` judge convergence on, cluster clients, and killing and
starting one node of a region.

The multi-node test needs `python -m streams.node --node K`; it is skipped, saying so, on a node
build without that option."""

from __future__ import annotations

import pytest
import redis

from streams.config import load
from streams.slots import key_slot, shard_of
from topology.local import LocalTopology, TopologyError
from topology.mm2 import EXAMPLE_TOPOLOGY


def keys_per_shard(shards: int, per_shard: int) -> dict[int, list[bytes]]:
    """`per_shard` keys that hash to each shard (found by counting up: deterministic)."""
    found: dict[int, list[bytes]] = {s: [] for s in range(shards)}
    n = 0
    while any(len(keys) < per_shard for keys in found.values()):
        key = b"k%d" % n
        n += 1
        if len(found[shard_of(key, shards)]) < per_shard:
            found[shard_of(key, shards)].append(key)
    return found


def test_arguments_are_checked_before_anything_starts() -> None:
    with pytest.raises(ValueError, match=r"3 nodes cannot each own some of 2 shards"):
        LocalTopology(regions=1, shards=2, nodes=3)
    with pytest.raises(ValueError, match=r"shards must be within 1\.\.1024, not 0"):
        LocalTopology(regions=1, shards=0)
    with pytest.raises(ValueError, match="come from the topology file"):
        LocalTopology(external=load(EXAMPLE_TOPOLOGY), shards=2)


def test_shards_on_one_node_per_region_replicate() -> None:
    with LocalTopology(regions=2, shards=2, manual_sync=True) as topo:
        assert topo.topology is not None and topo.topology.shards == 2
        written = load(topo.topology_path)
        assert written.shards == 2
        assert [len(r.nodes) for r in written.regions] == [1, 1]
        assert "[[region.node]]" not in topo.topology_path.read_text()
        assert topo.node_ports == {1: [topo.ports[1]], 2: [topo.ports[2]]}
        with pytest.raises(TopologyError, match="runs one node, which does not speak the Redis"):
            topo.cluster_client(1)
        keys = keys_per_shard(2, 3)
        c1 = topo.client(1)
        for shard_keys in keys.values():
            for key in shard_keys:
                c1.xadd(key, {b"f": key})
        topo.sync()
        c2 = topo.client(2)
        for shard_keys in keys.values():
            for key in shard_keys:
                assert [fields for _, fields in c2.xrange(key)] == [{b"f": key}]
        assert topo.vector(2)["r1"] == topo.vector(1)["r1"] >= 6
        assert c1.execute_command("CRDT.DIGEST") == c2.execute_command("CRDT.DIGEST")
        assert (topo.workdir / "node-r1.log").exists()


def test_several_nodes_per_region() -> None:
    with LocalTopology(regions=2, shards=4, nodes=2, manual_sync=True) as topo:
        assert topo.topology is not None
        for i in (1, 2):
            ports = topo.node_ports[i]
            assert len(ports) == 2 and len(set(ports)) == 2 and ports[0] == topo.ports[i]
            region = topo.topology.region(f"r{i}")
            assert [n.shards for n in region.nodes] == [(0, 1), (2, 3)]
            assert [n.resp_port for n in region.nodes] == ports
        assert load(topo.topology_path) == topo.topology
        assert set(topo.node_ports[1]).isdisjoint(topo.node_ports[2])

        keys = keys_per_shard(4, 5)
        writer = topo.cluster_client(1)
        for shard_keys in keys.values():
            for key in shard_keys:
                writer.xadd(key, {b"f": key})
        # A plain client on the first node is sent to the node owning a later shard's key.
        with pytest.raises(redis.exceptions.MovedError, match=f"^{key_slot(keys[3][0])} "):
            topo.client(1).xrange(keys[3][0])

        topo.sync()
        reader = topo.cluster_client(2)
        for shard_keys in keys.values():
            for key in shard_keys:
                assert [fields for _, fields in reader.xrange(key)] == [{b"f": key}]
        # Every node answers CRDT.VECTOR and CRDT.DIGEST for its whole region (asking the other
        # node); every op was applied in both regions.
        for i in (1, 2):
            vectors = {
                tuple(redis.Redis(port=port).execute_command("CRDT.VECTOR"))
                for port in topo.node_ports[i]
            }
            digests = {
                redis.Redis(port=port).execute_command("CRDT.DIGEST") for port in topo.node_ports[i]
            }
            assert vectors == {(b"r1", topo.vector(1)["r1"], b"r2", 0)} and len(digests) == 1
        assert topo.vector(1)["r1"] == topo.vector(2)["r1"] == 20
        assert topo.client(1).execute_command("CRDT.DIGEST") == topo.client(2).execute_command(
            "CRDT.DIGEST"
        )

        # One node of a region dies and comes back; its shards' keys are served again.
        topo.kill_node(1, node=1)
        topo.start_node(1, node=1)
        after = topo.cluster_client(1)
        assert [fields for _, fields in after.xrange(keys[3][0])] == [{b"f": keys[3][0]}]
        assert (topo.workdir / "node-r1.log").exists()
        assert (topo.workdir / "node-r1-n1.log").exists()
        assert (topo.workdir / "node-r2-n1.log").exists()
