"""Issue 37, part B, on the light stack: a region leaves while the others serve. Before, a region
gone for good held back tombstone collection everywhere forever; removed, it is no longer waited
for, what it wrote stays, and it cannot come back under its id or name."""

from __future__ import annotations

import time

import pytest
import redis

from streams.config import TopologyError as ConfigError
from streams.config import load, loads
from topology.local import LocalTopology
from topology.node_procs import TopologyError

GC_WAIT_S = 12.0  # tombstones are collected every 5 s


def _info(client: redis.Redis) -> dict[str, bytes]:
    flat = client.execute_command("CRDT.INFO")
    return {flat[k].decode(): flat[k + 1] for k in range(0, len(flat), 2)}


def _collected(client: redis.Redis) -> int:
    return int(_info(client)["tombstones_collected"])


def test_a_region_leaves_and_the_others_collect_tombstones_again() -> None:
    with LocalTopology(regions=4) as topo:
        r1, r2 = topo.client(1), topo.client(2)
        # r4 leaves cleanly: what it wrote, not yet copied, reaches every other region first.
        topo.client(4).xadd("from4", {"f": "v"})
        started = time.monotonic()
        topo.remove_region(4)
        print(f"\nr4 removed (drained) in {time.monotonic() - started:.1f} s")
        assert r1.xlen("from4") == 1 and r2.xlen("from4") == 1
        assert _info(r1)["regions"] == b"r1 r2 r3"
        assert _info(r1)["removed_regions"] == b"r4"
        # r3 writes, its op reaches everyone, then it is gone for good (killed, not removed).
        topo.client(3).xadd("from3", {"f": "v"})
        topo.sync()
        topo.kill_node(3)
        # A tombstone the remaining regions have all applied ...
        r1.xadd("k", {"f": "v"})
        topo.sync([1, 2])
        r1.delete("k")
        topo.sync([1, 2])
        r2.xadd("later", {"f": "v"})  # r1 learns that r2 applied the DEL
        topo.sync([1, 2])
        r1.xadd("later", {"f": "v"})
        topo.sync([1, 2])
        time.sleep(GC_WAIT_S)
        assert _collected(r1) == 0, "collected while r3 was still a region"  # held back by r3
        # r3's node does not answer: a removal cannot check that its ops reached everyone.
        with pytest.raises(TopologyError, match="force=True"):
            topo.remove_region(3)
        started = time.monotonic()
        topo.remove_region(3, force=True)
        print(f"r3 removed (forced) in {time.monotonic() - started:.1f} s")
        deadline = time.monotonic() + GC_WAIT_S
        while _collected(r1) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _collected(r1) > 0, "r1 still waits for the removed r3"
        print(f"r1 collected {_collected(r1)} tombstone(s) once r3 was removed")
        # What it wrote before leaving stays; the others go on replicating between themselves.
        assert r1.xlen("from3") == 1 and r2.xlen("from3") == 1
        r2.xadd("after", {"f": "v"})
        topo.sync()
        assert r1.xlen("after") == 1
        assert r1.execute_command("CRDT.DIGEST") == r2.execute_command("CRDT.DIGEST")
        # The file says so, and the removed region cannot come back by accident.
        topology = load(topo.topology_path)
        assert topology.names == ["r1", "r2"]
        assert [(g.name, g.id) for g in topology.removed] == [("r4", 4), ("r3", 3)]
        with pytest.raises(TopologyError, match="was removed"):
            topo.start_node(3)
        text = topo.topology_path.read_text()
        back = (
            text + '\n[[region]]\nname = "r5"\nid = 3\nbootstrap = "127.0.0.1:1"\nresp_port = 7\n'
        )
        with pytest.raises(ConfigError, match="never used again"):
            loads(back)
        with pytest.raises(TopologyError, match="only region"):
            topo.remove_region(2)
            topo.remove_region(1)
