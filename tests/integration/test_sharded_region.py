"""A region sharded over Kafka partitions and node processes (docs/architecture.md, "Shards"):
convergence under a random workload over many keys in three regions, a node process lost takes
only its shards down, a second process for the same shards fences the first shard by shard, a
key of another process's slot is redirected and never answered wrongly, and a topology whose
shard count disagrees with the topics' partitions is refused at start."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from support import answers, free_port, wait_until

from streams.config import dumps, load
from streams.slots import key_slot, shard_of
from topology.local import LocalTopology

KEYS = [f"stream:{i}".encode() for i in range(200)]


def _random_workload(
    clients: dict[int, RedisCluster], rng: random.Random, steps: int, stamp: dict[int, int]
) -> None:
    """Appends, deletes, trims and group changes over many keys, from every region."""
    for _ in range(steps):
        region = rng.choice(sorted(clients))
        c = clients[region]
        key = rng.choice(KEYS)
        roll = rng.random()
        if roll < 0.6:
            c.xadd(key, {b"r": b"%d" % region, b"n": b"%d" % stamp[region]})
            stamp[region] += 1
        elif roll < 0.7:
            c.delete(key)
        elif roll < 0.8:
            c.xtrim(key, maxlen=rng.randint(0, 3))
        elif roll < 0.9:
            try:
                c.xgroup_create(key, b"g", id=b"0", mkstream=True)
            except redis.ResponseError as exc:
                assert "BUSYGROUP" in str(exc)
        elif c.exists(key):
            c.xgroup_destroy(key, b"g")


def test_a_random_workload_over_many_keys_converges_in_three_sharded_regions() -> None:
    rng = random.Random(20261124)
    with LocalTopology(regions=3, shards=4, nodes=2, manual_sync=True) as topo:
        clients = {i: topo.cluster_client(i) for i in (1, 2, 3)}
        stamp = {i: 0 for i in clients}
        for round_ in range(3):
            _random_workload(clients, rng, 300, stamp)
            topo.sync(regions=[1, 2] if round_ == 0 else None)  # r3 partitioned, then healed
        digests = {i: topo.client(i).execute_command("CRDT.DIGEST") for i in clients}
        assert len(set(digests.values())) == 1, digests
        for key in rng.sample(KEYS, 20):
            ranges = {i: clients[i].xrange(key) for i in clients}
            assert ranges[1] == ranges[2] == ranges[3], key
        shards_seen = {shard_of(k, 4) for k in KEYS if clients[1].exists(k)}
        assert shards_seen == {0, 1, 2, 3}  # the workload really spanned every shard


def test_a_lost_node_process_takes_down_only_its_shards() -> None:
    with LocalTopology(regions=1, shards=4, nodes=2, manual_sync=True) as topo:
        assert topo.topology is not None
        region = topo.topology.region("r1")
        on_node = {n: [k for k in KEYS if region.owner(shard_of(k, 4)).index == n] for n in (0, 1)}
        cluster = topo.cluster_client(1)
        for key in on_node[0][:5] + on_node[1][:5]:
            cluster.xadd(key, {b"f": b"v"})
        topo.kill_node(1, node=1)
        first = redis.Redis(port=topo.node_ports[1][0])
        for key in on_node[0][:5]:  # node 0 serves its shards as before, reads and writes
            assert first.xlen(key) == 1
            first.xadd(key, {b"f": b"again"})
        dead = redis.Redis(port=topo.node_ports[1][1], socket_timeout=2)
        with pytest.raises(redis.ConnectionError):
            dead.xlen(on_node[1][0])
        with pytest.raises(redis.exceptions.MovedError):  # still sent to its (dead) owner
            first.xlen(on_node[1][0])
        topo.start_node(1, node=1)
        back = redis.Redis(port=topo.node_ports[1][1])
        for key in on_node[1][:5]:  # its shards come back from the log
            assert back.xlen(key) == 1
        for key in on_node[0][:5]:
            assert first.xlen(key) == 2


def test_a_key_of_another_node_is_redirected_never_answered() -> None:
    with LocalTopology(regions=1, shards=4, nodes=2, manual_sync=True) as topo:
        assert topo.topology is not None
        region = topo.topology.region("r1")
        owner_port = {k: region.owner(shard_of(k, 4)).resp_port for k in KEYS}
        cluster = topo.cluster_client(1)
        for key in KEYS:
            cluster.xadd(key, {b"f": key})
        for port in topo.node_ports[1]:
            plain = redis.Redis(port=port)
            for key in KEYS:
                if owner_port[key] == port:
                    assert plain.xlen(key) == 1
                    continue
                with pytest.raises(redis.exceptions.MovedError) as moved:
                    plain.xlen(key)
                assert str(moved.value) == f"{key_slot(key)} 127.0.0.1:{owner_port[key]}"
            with pytest.raises(redis.exceptions.ClusterCrossSlotError):
                plain.delete(*KEYS[:10])


def test_a_second_process_for_the_same_shards_fences_the_first_shard_by_shard(
    tmp_path: Path,
) -> None:
    with LocalTopology(regions=1, shards=4, nodes=2, manual_sync=True) as topo:
        assert topo.topology is not None
        region = topo.topology.region("r1")
        second = region.nodes[1]
        keys = [k for k in KEYS if shard_of(k, 4) in second.shards]
        old = redis.Redis(port=second.resp_port)
        old.xadd(keys[0], {b"f": b"before"})
        port = free_port()
        log = open(tmp_path / "takeover.log", "wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streams.node",
                "--topology",
                str(topo.topology_path),
                "--region",
                "r1",
                "--node",
                "1",
                "--port",
                str(port),
                "--takeover",  # the first process is live: without it the start is refused
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        try:
            new = redis.Redis(port=port)
            wait_until(lambda: answers(new), timeout=60)
            assert new.xlen(keys[0]) == 1
            new.xadd(keys[0], {b"f": b"after"})
            for key in keys[:8]:  # every shard of the old node is fenced, one writer each
                with pytest.raises(redis.ResponseError, match="fenced|took over"):
                    old.xadd(key, {b"f": b"zombie"})
            assert new.xlen(keys[0]) == 2
            wait_until(lambda: old.xlen(keys[0]) == 2, timeout=30)  # the old one reads on
        finally:
            proc.terminate()
            proc.wait(timeout=15)
            log.close()


def test_a_topology_whose_shard_count_disagrees_with_the_topics_is_refused(
    tmp_path: Path,
) -> None:
    with LocalTopology(regions=1, shards=2, manual_sync=True) as topo:
        topology = load(topo.topology_path)
        resharded = tmp_path / "four.toml"
        text = dumps(topology).replace("shards = 2", "shards = 4")
        resharded.write_text(text)
        assert load(resharded).shards == 4
        started = time.monotonic()
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "streams.node",
                "--topology",
                str(resharded),
                "--region",
                "r1",
                "--port",
                str(free_port()),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode != 0
        assert "r1.oplog" in out.stderr and "2 partition" in out.stderr, out.stderr
        assert time.monotonic() - started < 120
