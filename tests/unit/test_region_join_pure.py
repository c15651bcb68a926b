"""The pure parts of a region joining (issue 37, part C): its id is one no region ever had
(`streams.config.joining`), the file names it, and the state it starts from is a peer's with the
region-local part dropped (`streams.crdt.join`); a running node's topology watch takes additions
(`streams.node.topology_watch`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streams.config import RegionConfig, TopologyError, dumps, loads
from streams.config.joining import next_region_id, with_region
from streams.crdt import ops
from streams.crdt.join import joining_region
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.node.topology_watch import TopologyWatch

TEXT = '\n[topology]\nmirror_naming = "identity"\n'


def _region(name: str, rid: int) -> str:
    return (
        f'\n[[region]]\nname = "{name}"\nid = {rid}\n'
        f'bootstrap = "127.0.0.1:9{rid}"\nresp_port = 70{rid}\n'
    )


def _config(name: str, rid: int) -> RegionConfig:
    return RegionConfig(name=name, id=rid, bootstrap=f"127.0.0.1:8{rid}", resp_port=7000 + rid)


def test_the_new_id_is_above_every_id_ever_used_and_names_are_never_reused() -> None:
    topology = loads(TEXT + _region("r1", 1) + _region("r2", 2) + _region("r3", 3))
    assert next_region_id(topology) == 4
    left = topology.without("r3")
    assert next_region_id(left) == 4  # r3's id is never given again
    joined = with_region(left, _config("r4", 4))
    assert joined.names == ["r1", "r2", "r4"]
    again = loads(dumps(joined))
    assert again == joined and [g.id for g in again.removed] == [3]
    for name, rid, why in (
        ("r9", 3, "never used again"),
        ("r3", 9, "never used again"),
        ("r9", 2, "already in the topology"),
        ("r2", 9, "already in the topology"),
    ):
        with pytest.raises(TopologyError, match=why):
            with_region(joined, _config(name, rid))
    assert next_region_id(joined) == 5
    last = with_region(topology, _config("z", 255))
    with pytest.raises(TopologyError, match="no region id is left"):
        next_region_id(last)


def test_the_joining_state_is_the_peers_replicated_part() -> None:
    peer = Region(1, IdMode.STRICT)
    other = Region(2, IdMode.STRICT)
    peer.issue(ops.XAdd(b"s", (10, 1), (b"f", b"a")), 10)
    peer.issue(ops.XAdd(b"s", (11, 1), (b"f", b"b")), 11)
    peer.issue(ops.GroupCreate(b"s", b"g", (0, 0), (), 0), 12)
    peer.receive(other.issue(ops.XAdd(b"o", (5, 2), (b"f", b"c")), 5))
    # Delivered and pending in the peer (local), one of them covered by an XACK effect.
    peer.issue_local(ops.Deliver(b"s", b"g", b"c1", 13, ((1, (10, 1)), (1, (11, 1))), False, 2), 13)
    peer.issue(ops.AckEffect(b"s", b"g", ((1, (10, 1)),)), 14)
    group = peer.state.group(b"s", b"g")
    assert group is not None and len(group.pel) == 2 and group.cursor(1) == (11, 1)
    digest = peer.state.digest()
    vector = peer.vector
    joined = joining_region(peer, 4, IdMode.STRICT)
    assert joined.id == 4 and joined.local_seq == 0
    assert joined.vector == vector and 4 not in joined.vector
    assert joined.state.digest() == digest
    fresh = joined.state.group(b"s", b"g")
    assert fresh is not None
    assert not fresh.pel and not fresh.consumers and fresh.entries_read is None
    assert fresh.cursor(1) == (10, 1)  # the announced frontier, not the peer's deliveries
    assert fresh.region_acks == {1: {1: (10, 1)}}
    # Its own first op follows the peer's state and carries its vector as context.
    op = joined.issue(ops.XAdd(b"s", (20, 4), (b"f", b"d")), 20)
    assert (op.origin, op.seq) == (4, 1) and dict(op.ctx) == vector
    with pytest.raises(ValueError, match="no region ever had"):
        joining_region(Region(1, IdMode.STRICT), 1, IdMode.STRICT)


def test_a_running_node_takes_an_added_region(tmp_path: Path) -> None:
    path = tmp_path / "topology.toml"
    first = loads(TEXT + _region("r1", 1) + _region("r2", 2))
    path.write_text(dumps(first))
    watch = TopologyWatch(path, first)
    assert watch.poll() is None
    path.write_text(dumps(with_region(first, _config("r3", 3))))
    os.utime(path, ns=(1, 1))  # a new stamp even within the file system's time resolution
    fresh = watch.poll()
    assert fresh is not None and fresh.names == ["r1", "r2", "r3"]
    assert watch.poll() is None


def test_streams_region_add_refuses_a_removed_name_or_id_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from streams.cli import main

    path = tmp_path / "topology.toml"
    text = dumps(loads(TEXT + _region("r1", 1) + _region("r2", 2)).without("r2"))
    path.write_text(text)
    for extra, why in (
        (["r2"], "never used again"),
        (["r5", "--id", "2"], "never used again"),
        (["r1"], "already in the topology"),
    ):
        argv = ["region", "add", *extra, "--bootstrap", "127.0.0.1:1", "--port", "7777"]
        assert main([*argv, "--topology", str(path), "--timeout", "0.1"]) == 3
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1, err
        assert path.read_text() == text


def test_a_counted_region_that_said_nothing_holds_every_tombstone_back() -> None:
    """Why the running nodes count the new region before its peer's snapshot is taken: from then
    on nothing is stable until the new region's own ops say how far it applied."""
    r1, r2 = Region(1, IdMode.STRICT), Region(2, IdMode.STRICT)
    r1.receive(r2.issue(ops.XAdd(b"k", (1, 2), (b"f", b"v")), 1))
    r2.receive(r1.issue(ops.Del(b"k"), 2))
    r1.receive(r2.issue(ops.XAdd(b"later", (3, 2), (b"f", b"v")), 3))  # r2 applied the DEL
    assert r1.stable_vector([1, 2, 3])[1] == 0  # r3 counted, never heard from
    assert r1.collect_tombstones([1, 2, 3]) == 0
    r3 = joining_region(_copy(r1), 3, IdMode.STRICT)
    r1.receive(r3.issue(ops.XAdd(b"from3", (4, 3), (b"f", b"v")), 4))  # its context: the DEL
    assert r1.collect_tombstones([1, 2, 3]) == 1


def _copy(region: Region) -> Region:
    """An independent copy, as a snapshot written and read back gives the joining region."""
    import io

    from streams.snapshot import read_snapshot, write_snapshot

    out = io.BytesIO()
    write_snapshot(region, {}, out)
    return read_snapshot(io.BytesIO(out.getvalue()))[0]


def test_a_log_read_from_its_first_record_held_must_follow_on_from_the_boot_state() -> None:
    from streams.node.kafka.materializer import Materializer
    from streams.node.runtime.oplog import Decoded

    reader = Materializer(
        "127.0.0.1:1", "r3.local", lambda batch: None, lambda exc: None, covered={1: 3}
    )
    try:

        def op(seq: int) -> ops.Op:
            return ops.Op(1, seq, (), 1, ops.XAdd(b"k", (1, seq), (b"f", b"v")))

        reader._check_follows(Decoded("r1.oplog", 0, 7, op(4)))  # the next op: fine
        reader._check_follows(Decoded("r1.oplog", 0, 7, op(2)))  # covered: dropped by seq
        with pytest.raises(RuntimeError, match=r"r1.oplog partition 0 now starts at offset 7"):
            reader._check_follows(Decoded("r1.oplog", 0, 7, op(6)))  # 4 and 5 are gone
    finally:
        reader.stop()
