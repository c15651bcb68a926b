"""The region stored in `data/snapshot_v1.avro`, a snapshot file of format version 1 as users'
`<region>.snapshot` topics hold them, so that the reader is tested on a file written by the
version 1 writer itself and not by today's code asked for version 1.

The file was written by `python tests/replay/v1_fixture.py tests/replay/data/snapshot_v1.avro`
with the tree of commit 9738208 (the last one writing version 1) on the import path; the
builder below is deterministic (no clock, no randomness), so a test rebuilds the same region and
compares it with what the file reads back as.
"""

from __future__ import annotations

import sys

from streams.crdt import ops
from streams.crdt.region import Region
from streams.ids import MIN_ID, IdMode

POSITIONS = {("r1.oplog", 0): 1203, ("r2.oplog", 0): 41, ("r3.oplog", 0): 9, ("r1.local", 0): 5}
T = 1_700_000_000_000


def fixture_region() -> Region:
    """Three origins in one key, deletions, trims, a DEL'd key, groups with pending entries and
    consumers, a destroyed group's tombstone, binary names and values, rows with their own
    field names: what a version 1 file can hold."""
    r = Region(1, IdMode.SEMI_STRICT)
    for i in range(1200):
        fields = (b"n", b"%d" % i) if i % 7 else (b"other", b"x" * (i % 300), b"n", b"%d" % i)
        r.issue(ops.XAdd(b"mixed", (T + i, 1), fields), T + i)
    for seq in range(1, 41):
        body = ops.XAdd(b"mixed", (T + 3 * seq, 2), (b"from", b"r2", b"i", b"%d" % seq))
        r.receive(ops.Op(2, seq, (), T, body))
    for seq in range(1, 10):
        body = ops.XAdd(b"\xff\x00bin", (2**64 - 1, seq), (b"\x00", b"\xff" * seq))
        r.receive(ops.Op(3, seq, (), T, body))
    r.issue(ops.XDel(b"mixed", tuple((T + i, 1) for i in range(100, 400, 3))), T)
    r.issue(ops.XTrim(b"mixed", ((1, (T + 50, 1)), (2, (T + 30, 2)))), T)
    r.issue(ops.XAdd(b"gone", (T, 1), (b"f", b"v")), T)
    r.issue(ops.Del(b"gone"), T)
    r.issue(ops.GroupCreate(b"mixed", b"g", MIN_ID, (), None), T)
    r.issue(ops.GroupCreate(b"mixed", b"old", MIN_ID, (), None), T)
    r.issue(ops.GroupDestroy(b"mixed", b"old"), T)
    refs = ((1, (T + 60, 1)), (2, (T + 33, 2)), (1, (T + 61, 1)))
    r.apply_local(r.issue_local(ops.Deliver(b"mixed", b"g", b"c1", T, refs, False, 3), T))
    r.apply_local(r.issue_local(ops.Ack(b"mixed", b"g", ((T + 61, 1),)), T + 5))
    return r


def main(path: str) -> None:
    from streams.snapshot import write_snapshot

    with open(path, "wb") as out:
        write_snapshot(fixture_region(), POSITIONS, out, region_name="r1", meta={"writer": "v1"})


if __name__ == "__main__":
    main(sys.argv[1])
