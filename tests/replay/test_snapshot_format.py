"""The snapshot file: exact round trip, bounded records, and fail-closed reading."""

from __future__ import annotations

import io

import fastavro
import pytest

from streams.crdt import ops
from streams.crdt.region import Region
from streams.ids import MIN_ID
from streams.replay.describe import local_state
from streams.snapshot import MAX_CHUNK_ITEMS, SnapshotError, read_snapshot, write_snapshot

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
    records = list(fastavro.reader(io.BytesIO(_bytes(_region())), return_record_name=True))
    chunks = [r["item"][1] for r in records if r["item"][0].endswith("EntryChunk")]
    assert max(len(c["entries"]) for c in chunks) <= MAX_CHUNK_ITEMS
    assert sum(len(c["entries"]) for c in chunks if c["key"] == b"big") == 2501


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
