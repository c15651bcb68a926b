"""The runtime on real brokers: restart from the logs, mirror restart, concurrent writers,
MirrorMaker 2 default naming, writer fencing."""

from __future__ import annotations

import threading

import pytest
import redis

from topology.local import LocalTopology


def _state(client: redis.Redis) -> tuple[object, ...]:
    """What must survive a restart (idle times excepted: they grow while we wait)."""
    pending = client.xpending_range("s", "g", "-", "+", 100)
    return (
        client.xrange("s"),
        client.xinfo_groups("s"),
        [(p["message_id"], p["consumer"], p["times_delivered"]) for p in pending],
        client.xpending("s", "g")["pending"],
        client.execute_command("CRDT.DIGEST"),
    )


def test_a_killed_node_restarts_with_its_streams_groups_and_pel() -> None:
    with LocalTopology(regions=2, manual_sync=True) as topo:
        c1 = topo.client(1)
        ids = [c1.xadd("s", {"n": str(i)}) for i in range(50)]
        c1.xgroup_create("s", "g", "0")
        c1.xreadgroup("g", "alice", {"s": ">"}, count=20)
        c1.xack("s", "g", *ids[:5])
        c1.execute_command("CRDT.FLUSH")
        before = _state(c1)
        topo.kill_node(1)
        topo.start_node(1)
        after = _state(topo.client(1))
        assert after == before
        assert len(after[0]) == 50  # type: ignore[arg-type]
        assert after[3] == 15


def test_regions_writing_concurrently_converge_after_sync() -> None:
    with LocalTopology(regions=3, manual_sync=False) as topo:

        def write(i: int) -> None:
            client = redis.Redis(port=topo.ports[i])
            for n in range(100):
                client.xadd(f"k{n % 3}", {"from": str(i), "n": str(n)})
                if n % 25 == 0:
                    client.xgroup_create(f"k{n % 3}", f"g{i}-{n}", "$", mkstream=True)
            client.close()

        threads = [threading.Thread(target=write, args=(i,)) for i in (1, 2, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        topo.sync()
        digests = {topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 2, 3)}
        assert len(digests) == 1
        assert sum(topo.client(1).xlen(f"k{k}") for k in range(3)) == 300


@pytest.mark.parametrize("naming", ["identity", "default"])
def test_mirrored_topics_materialize_under_both_mirrormaker_namings(naming: str) -> None:
    with LocalTopology(regions=2, manual_sync=True, mirror_naming=naming) as topo:
        topo.client(1).xadd("m", {"a": "1"})
        topo.client(2).xadd("m", {"b": "2"})
        topo.sync()
        assert topo.client(1).xlen("m") == 2
        assert topo.client(2).xlen("m") == 2
        assert topo.client(1).execute_command("CRDT.DIGEST") == topo.client(2).execute_command(
            "CRDT.DIGEST"
        )
