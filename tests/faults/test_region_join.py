"""Issue 37, part C, on the light stack: a region joins a running topology under a steady write
load. Three regions write; `add_region()` runs while they go on; the fourth region boots from a
peer's snapshot, converges (CRDT.DIGEST equal) and its own writes reach the others; r2 then
leaves (`remove_region(2)`), and a DEL made afterwards has its tombstone collected in every
remaining region (the new one counted, the removed one not); no acknowledged write is lost
anywhere, and the ids in the topology file are never reused."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from faults.workload import Writer, check_no_loss, prepare, settle, vector_of
from streams.config import load
from topology.local import LocalTopology
from topology.node_procs import TopologyError

RATE = 40.0
GC_WAIT_S = 20.0  # tombstones are collected every 5 s


def _info(topo: LocalTopology, i: int) -> dict[str, bytes]:
    flat = topo.client(i).execute_command("CRDT.INFO")
    return {flat[k].decode(): flat[k + 1] for k in range(0, len(flat), 2)}


def _tombstones_held(topo: LocalTopology, i: int) -> float:
    url = f"http://127.0.0.1:{topo.metrics_ports[i]}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "streams_tombstones"
    )


def _caught_up(topo: LocalTopology, readers: list[int], writers: list[int]) -> float:
    """Seconds until every region of `readers` applied what each of `writers` had written (its
    own seq) when called, while the load goes on."""
    started = time.monotonic()
    target = {f"r{j}": vector_of(topo.client(j))[f"r{j}"] for j in writers}
    while True:
        behind = {
            (i, name): got
            for i in readers
            for name, seq in target.items()
            if (got := vector_of(topo.client(i)).get(name, 0)) < seq
        }
        if not behind:
            return time.monotonic() - started
        assert time.monotonic() - started < 60, f"not caught up with {target}: {behind}"
        time.sleep(0.05)


def test_a_region_joins_under_load_and_another_leaves() -> None:
    with LocalTopology(regions=3, manual_sync=False, metrics=True) as topo:
        prepare(topo)
        writers = [Writer(topo, r, RATE) for r in (1, 2, 3)]
        for w in writers:
            w.start()
        time.sleep(2.0)
        began = time.monotonic()
        new = topo.add_region()
        joined = time.monotonic() - began
        print(f"\nr{new} added in {joined:.1f} s under load: {topo.timings}")
        assert new == 4
        for i in (1, 2, 3, 4):
            assert _info(topo, i)["regions"] == b"r1 r2 r3 r4"
        assert "snapshot file" in _info(topo, 4)["booted_from"].decode()
        writers.append(Writer(topo, 4, RATE))
        writers[-1].start()
        time.sleep(3.0)
        # The new region catches up with the others while everyone writes, and theirs with it.
        took = _caught_up(topo, [4], [1, 2, 3])
        print(f"r4 applied what r1-r3 had written when it started serving {took:.1f} s later")
        took = _caught_up(topo, [1, 2, 3], [4])
        print(f"r1-r3 applied what r4 had written {took:.1f} s later")
        # ... and once the load stops, holds exactly what they hold (CRDT.DIGEST equal), every
        # acknowledged write of theirs and of its own.
        ledgers = [w.stop() for w in writers]
        settle(topo)
        counts = check_no_loss(topo, ledgers, regions=[1, 2, 3, 4])
        print(f"four regions, no loss: {counts}")
        # Writes again (new ledgers); r2 stops writing and leaves while the others go on.
        writers = [Writer(topo, r, RATE, tag=f"{r}b") for r in (1, 2, 3, 4)]
        for w in writers:
            w.start()
        time.sleep(2.0)
        ledger2 = writers[1].stop()
        topo.remove_region(2)
        for i in (1, 3, 4):
            info = _info(topo, i)
            assert (info["regions"], info["removed_regions"]) == (b"r1 r3 r4", b"r2")
        time.sleep(1.0)
        ledgers += [ledger2, *(w.stop() for w in (writers[0], writers[2], writers[3]))]
        settle(topo, regions=[1, 3, 4])
        counts = check_no_loss(topo, ledgers, regions=[1, 3, 4])
        print(f"after r2 left, no loss: {counts}")
        assert ledgers[3].added and ledgers[-1].added, "the new region acknowledged no write"
        # A DEL made after the removal: collected everywhere once every remaining region (the
        # new one included) has applied it and said so in an op of its own.
        r1 = topo.client(1)
        r1.xadd("after-removal", {"f": "v"})
        settle(topo, regions=[1, 3, 4])
        r1.delete("after-removal")
        settle(topo, regions=[1, 3, 4])
        for i in (3, 4, 1):
            topo.client(i).xadd(f"later:{i}", {"f": "v"})
            settle(topo, regions=[1, 3, 4])
        deadline = time.monotonic() + GC_WAIT_S
        held = {i: _tombstones_held(topo, i) for i in (1, 3, 4)}
        while any(held.values()) and time.monotonic() < deadline:
            time.sleep(0.5)
            held = {i: _tombstones_held(topo, i) for i in (1, 3, 4)}
        assert not any(held.values()), f"tombstones still held: {held}"
        digests = {i: topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 3, 4)}
        assert len(set(digests.values())) == 1, digests
        # The file: r4 in, r2 removed; the next region gets an id no region ever had.
        topology = load(topo.topology_path)
        assert topology.names == ["r1", "r3", "r4"]
        assert [(g.name, g.id) for g in topology.removed] == [("r2", 2)]
        assert topology.region("r4").id == 4
        with pytest.raises(TopologyError, match="was removed"):
            topo.start_node(2)
