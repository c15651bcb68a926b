"""The snapshot file: exact round trip, bounded records, and fail-closed reading; version 1
files (entries one by one) still read, version 2 files (packed blocks) keep node boundaries."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import fastavro
import pytest

from replay.v1_fixture import POSITIONS as V1_POSITIONS
from replay.v1_fixture import fixture_region
from streams.crdt import ops
from streams.crdt.blocks import PackedBlock
from streams.crdt.entries import node_limits, set_node_limits
from streams.crdt.region import Region
from streams.ids import MIN_ID, IdMode
from streams.replay.describe import local_state
from streams.snapshot import (
    MAX_CHUNK_BYTES,
    MAX_CHUNK_ITEMS,
    SnapshotError,
    read_snapshot,
    write_snapshot,
)
from streams.snapshot.format import _PARSED, _block_crc, _id_in

V1_FILE = Path(__file__).parent / "data" / "snapshot_v1.avro"

POSITIONS = {("r1.oplog", 0): 2503, ("r2.oplog", 0): 7, ("r1.local", 0): 3}


def _region() -> Region:
    r1 = Region(1)
    t = 1_700_000_000_000
    for i in range(2500):
        r1.issue(ops.XAdd(b"big", (t + i, 1), (b"n", b"%d" % i, b"blob", b"x" * (i % 50))), t)
    r1.receive(ops.Op(2, 1, (), t, ops.XAdd(b"big", (t, 2), (b"from", b"r2"))))
    r1.issue(ops.GroupCreate(b"big", b"g", MIN_ID, (), None), t)
    r1.issue(ops.Del(b"gone"), t)
    r1.issue(ops.XAdd(b"\xff\x00bin", (2**64 - 1, 2**64 - 2), (b"\x00", b"\xff")), t)
    r1.issue_local(ops.Deliver(b"big", b"g", b"c1", t, ((1, (t, 1)), (2, (t, 2))), False, 2), t)
    r1.issue_local(ops.Ack(b"big", b"g", ((t, 2),)), t + 5)
    return r1


def _bytes(region: Region) -> bytes:
    buf = io.BytesIO()
    write_snapshot(region, POSITIONS, buf, region_name="r1", meta={"writer": "test"})
    return buf.getvalue()


def test_round_trip_keeps_state_vector_local_part_and_positions() -> None:
    region = _region()
    back, positions, meta = read_snapshot(io.BytesIO(_bytes(region)))
    assert positions == POSITIONS
    assert meta["writer"] == "test" and meta["region_name"] == "r1"
    assert back.id == 1 and back.mode == region.mode
    assert back.vector == region.vector and back.local_seq == region.local_seq == 2
    assert back.state.digest() == region.state.digest()
    assert local_state(back) == local_state(region)
    gone = back.state.raw(b"gone")
    assert gone is not None and gone.del_tombstones == [(1, 2502)]
    # The restored region goes on like the original: the next own op gets the next seq.
    assert back.prepare(ops.Del(b"x"), 0).seq == region.prepare(ops.Del(b"x"), 0).seq


def test_large_keys_are_written_in_bounded_chunks() -> None:
    region = _region()
    for i in range(200):  # one 8 KB entry per block: 1.6 MB of blocks, more than one record
        region.issue(ops.XAdd(b"huge", (i + 1, 1), (b"v", b"%08d" % i * 1000)), 0)
    records = [r["item"] for r in _records(_bytes(region))]
    chunks = [body for name, body in records if name.endswith("EntryBlocks")]
    assert not [name for name, _body in records if name.endswith("EntryChunk")]
    assert max(len(c["blocks"]) for c in chunks) <= MAX_CHUNK_ITEMS
    for c in chunks:
        sizes = [len(b["payload"]) for b in c["blocks"]]
        assert sum(sizes) - sizes[-1] < MAX_CHUNK_BYTES
    assert len([c for c in chunks if c["key"] == b"huge"]) > 1
    assert sum(_live(c) for c in chunks if c["key"] == b"big") == 2501
    back = read_snapshot(io.BytesIO(_bytes(region)))[0]
    assert back.state.digest() == region.state.digest()


def _records(data: bytes) -> list[dict[str, Any]]:
    return list(fastavro.reader(io.BytesIO(data), return_record_name=True))


def _live(chunk: dict[str, Any]) -> int:
    return sum(
        b["slots"] - int.from_bytes(b["dead"], "little").bit_count() for b in chunk["blocks"]
    )


@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9, 0.999])
def test_a_truncated_snapshot_is_refused(keep: float) -> None:
    data = _bytes(_region())
    with pytest.raises(SnapshotError):
        read_snapshot(io.BytesIO(data[: int(len(data) * keep)]))


def test_a_snapshot_cut_at_a_block_boundary_is_refused() -> None:
    """Drop the trailer's block: every remaining block is intact, the file still ends early."""
    buf = io.BytesIO()
    region = _region()
    write_snapshot(region, POSITIONS, buf)
    full = buf.getvalue()
    reader = fastavro.block_reader(io.BytesIO(full))
    header_sync = reader._header["sync"]  # the 16-byte marker that ends every block
    last_block_end = full.rfind(header_sync, 0, len(full) - 16) + 16
    assert 0 < last_block_end < len(full)
    with pytest.raises(SnapshotError, match="truncated|trailer"):
        read_snapshot(io.BytesIO(full[:last_block_end]))


@pytest.mark.parametrize("where", [0.3, 0.5, 0.8])
def test_a_flipped_byte_is_refused(where: float) -> None:
    data = bytearray(_bytes(_region()))
    data[int(len(data) * where)] ^= 0x5A
    with pytest.raises(SnapshotError):
        read_snapshot(io.BytesIO(bytes(data)))


def test_not_a_snapshot_is_refused() -> None:
    with pytest.raises(SnapshotError, match="not a streams snapshot"):
        read_snapshot(io.BytesIO(b"hello world"))
    other = io.BytesIO()
    fastavro.writer(other, {"type": "record", "name": "X", "fields": []}, [{}])
    with pytest.raises(SnapshotError, match="format version"):
        read_snapshot(io.BytesIO(other.getvalue()))


# --- version 1 files, version 2 blocks ----------------------------------------------------------


def _same_state(a: Region, b: Region) -> None:
    assert a.state.digest() == b.state.digest()
    assert (a.id, a.mode, a.vector, a.local_seq) == (b.id, b.mode, b.vector, b.local_seq)
    assert local_state(a) == local_state(b)
    assert sorted(a.state.keys) == sorted(b.state.keys)
    for key, ka in a.state.keys.items():
        kb = b.state.keys[key]
        assert (ka.last_id, ka.entries_added, ka.max_deleted_id) == (
            kb.last_id,
            kb.entries_added,
            kb.max_deleted_id,
        )
        assert (ka.del_tombstones, ka.group_tombstones) == (kb.del_tombstones, kb.group_tombstones)
        assert ka.entries.origins() == kb.entries.origins()
        for origin in ka.entries.origins():  # the dots too: observed-remove compares them
            assert list(ka.entries.origin_entries(origin)) == list(
                kb.entries.origin_entries(origin)
            )


def _blocks(region: Region) -> dict[tuple[bytes, int], list[tuple[Any, ...]]]:
    return {
        (key, origin): [(b.first, b.last, b.slots, b.dead) for b in ks.entries.blocks(origin)]
        for key, ks in region.state.keys.items()
        for origin in ks.entries.origins()
    }


def test_a_version_1_file_written_by_the_version_1_writer_still_reads() -> None:
    expected = fixture_region()
    with V1_FILE.open("rb") as fp:
        back, positions, meta = read_snapshot(fp)
    assert positions == V1_POSITIONS and meta["writer"] == "v1"
    _same_state(back, expected)
    # Version 1 held live entries only: they are packed again, so the slots deleted in the
    # original blocks are gone (and the boundaries moved).
    assert all(b[3] == 0 for blocks in _blocks(back).values() for b in blocks)
    assert any(b[3] for blocks in _blocks(expected).values() for b in blocks)


def _random_region(seed: int) -> Region:
    """Entries from three origins over a few keys, XDELs, trims, DELs, groups with pending
    entries, the node limits changed on the way (CONFIG SET)."""
    rng = random.Random(seed)
    r = Region(1, IdMode.SEMI_STRICT)
    seqs = {2: 0, 3: 0}
    for step in range(1500):
        key = rng.choice([b"a", b"b", b"c"])
        origin = rng.choice([1, 1, 2, 3])
        roll = rng.random()
        if roll < 0.01:
            set_node_limits(max_entries=rng.choice([0, 5, 100]), max_bytes=rng.choice([0, 500]))
        ks = r.state.get(key)
        if roll < 0.75 or ks is None:
            fields = (b"f", b"%d" % step) if rng.random() < 0.9 else (b"g", b"x", b"h", b"y")
            body: ops.ReplicatedBody = ops.XAdd(key, (step + 1, origin), fields)
        elif roll < 0.9:
            ids = [sid for sid, _o, _f in ks.entries.range(MIN_ID, (2**64 - 1, 2**64 - 1))]
            body = ops.XDel(key, tuple(rng.sample(ids, min(3, len(ids)))))
        elif roll < 0.95:
            body = ops.XTrim(key, tuple((o, (step - 200, 0)) for o in (1, 2, 3)))
        elif roll < 0.97:
            body = ops.Del(key)
        else:
            body = ops.GroupCreate(key, b"g", MIN_ID, (), None)
        if origin == 1 or not isinstance(body, ops.XAdd):
            r.issue(body, step)
        else:
            seqs[origin] += 1
            r.receive(ops.Op(origin, seqs[origin], (), step, body))
    return r


@pytest.mark.parametrize("seed", range(4))
def test_both_versions_of_one_state_read_back_as_that_state(seed: int) -> None:
    saved = node_limits()
    try:
        region = _random_region(seed)
    finally:
        set_node_limits(max_bytes=saved[0], max_entries=saved[1])
    v1, v2 = io.BytesIO(), io.BytesIO()
    write_snapshot(region, POSITIONS, v1, format_version=1)
    write_snapshot(region, POSITIONS, v2)
    from_v1 = read_snapshot(io.BytesIO(v1.getvalue()))[0]
    from_v2 = read_snapshot(io.BytesIO(v2.getvalue()))[0]
    _same_state(from_v1, region)
    _same_state(from_v2, region)
    # Version 2 keeps the node boundaries and deleted slots, as Redis's RDB keeps its nodes.
    assert _blocks(from_v2) == _blocks(region)
    for key, ks in region.state.keys.items():
        assert from_v2.state.keys[key].entries.radix_tree()[0] == ks.entries.radix_tree()[0]


# --- a corrupt version 2 file is refused ----------------------------------------------------


def _rewrite(data: bytes, change: Any) -> bytes:
    """The file with `change(records)` applied to its decoded records, written again."""
    reader = fastavro.reader(io.BytesIO(data), return_record_name=True)
    records = list(reader)
    change(records)
    out = io.BytesIO()
    fastavro.writer(out, _PARSED, records, codec="deflate", metadata=dict(reader.metadata))
    return out.getvalue()


def _first_blocks(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return next(
        r["item"][1]["blocks"]
        for r in records
        if r["item"][0].endswith("EntryBlocks") and len(r["item"][1]["blocks"]) > 2
    )


def _recrc(block: dict[str, Any]) -> None:
    """Make the block's CRC agree with its (changed) fields: only the other checks remain."""
    dead = block["dead"]
    p = PackedBlock(
        _id_in(block["first"]),
        _id_in(block["last"]),
        block["slots"],
        int.from_bytes(dead, "little"),
        block["lp_base"],
        block["payload"],
    )
    block["crc32"] = _block_crc(p, dead)


def _flip_payload_byte(records: list[dict[str, Any]]) -> None:
    block = _first_blocks(records)[1]
    payload = bytearray(block["payload"])
    payload[len(payload) // 2] ^= 0x01
    block["payload"] = bytes(payload)


def _swap_payloads(records: list[dict[str, Any]]) -> None:
    blocks = _first_blocks(records)
    blocks[0]["payload"], blocks[1]["payload"] = blocks[1]["payload"], blocks[0]["payload"]
    _recrc(blocks[0])
    _recrc(blocks[1])


def _swap_blocks(records: list[dict[str, Any]]) -> None:
    blocks = _first_blocks(records)
    blocks[0], blocks[1] = blocks[1], blocks[0]


def _revive_a_slot(records: list[dict[str, Any]]) -> None:
    for r in records:
        if r["item"][0].endswith("EntryBlocks"):
            for block in r["item"][1]["blocks"]:
                dead = int.from_bytes(block["dead"], "little")
                if dead:
                    block["dead"] = (dead & (dead - 1)).to_bytes(len(block["dead"]), "little")
                    _recrc(block)
                    return
    raise AssertionError("no block with a deleted slot")


def _move_a_deletion(records: list[dict[str, Any]]) -> None:
    """Another slot of the block deleted instead: the counts agree, only the digest differs."""
    for r in records:
        if r["item"][0].endswith("EntryBlocks"):
            for block in r["item"][1]["blocks"]:
                dead = int.from_bytes(block["dead"], "little")
                if dead and ~dead & 1:
                    moved = (dead & (dead - 1)) | 1
                    block["dead"] = moved.to_bytes(len(block["dead"]), "little")
                    _recrc(block)
                    return
    raise AssertionError("no block with a deleted slot and a live first one")


def _other_block_format(records: list[dict[str, Any]]) -> None:
    records[0]["item"][1]["block_format"] = "marshal-tuple-1/big"


def _drop_a_block(records: list[dict[str, Any]]) -> None:
    del _first_blocks(records)[1]


@pytest.mark.parametrize(
    "change",
    [
        _flip_payload_byte,
        _swap_payloads,
        _swap_blocks,
        _revive_a_slot,
        _move_a_deletion,
        _other_block_format,
        _drop_a_block,
    ],
)
def test_a_corrupt_version_2_file_is_refused(change: Any) -> None:
    region = _region()
    region.issue(ops.XDel(b"big", ((1_700_000_000_000 + 5, 1),)), 0)
    data = _bytes(region)
    assert read_snapshot(io.BytesIO(_rewrite(data, lambda _r: None)))[0].state.digest() == (
        region.state.digest()
    )
    with pytest.raises(SnapshotError):
        read_snapshot(io.BytesIO(_rewrite(data, change)))


def test_a_file_whose_records_are_of_another_version_than_it_says_is_refused() -> None:
    v1 = io.BytesIO()
    write_snapshot(_region(), POSITIONS, v1, format_version=1)
    reader = fastavro.reader(io.BytesIO(v1.getvalue()), return_record_name=True)
    out = io.BytesIO()
    fastavro.writer(
        out,
        reader.writer_schema,
        list(reader),
        codec="deflate",
        metadata={"streams.snapshot.format_version": "2"},
    )
    with pytest.raises(SnapshotError, match="not that version's"):
        read_snapshot(io.BytesIO(out.getvalue()))
