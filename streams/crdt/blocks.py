"""Blocks: one origin log's entries packed as Redis packs a stream's listpack nodes.

A block closes where Redis closes a node (t_stream.c streamAppendItem): when the node already
holds `stream-node-max-entries` slots, deleted ones included, or when its listpack size plus the
new entry's field and value lengths would reach `stream-node-max-bytes`; the listpack size is
computed exactly (`streams.crdt.listpack`). A deleted entry keeps its slot (a bit in the block's
`dead` mask) until its block goes.

Each block but the open tail one is one bytes object (marshal of a small tuple): the master
entry's field names, ID and dot-seq deltas against the block's first entry as packed integer
arrays, and per entry either its values only (field names as the master's, Redis's SAMEFIELDS)
or its whole field list. Decoding a block costs one `marshal.loads`; the last blocks decoded are
cached, so scans and repeated reads of a block pay it once. The node limits are Redis's CONFIG
settings (`set_node_limits`), read when a block is filled.

Export and import (`PackedBlock`): a snapshot stores each block as it is (its payload bytes and
the few numbers the log indexes by), as Redis's RDB stores each listpack node, so a restart
installs blocks without re-inserting entries and keeps their boundaries. `BLOCK_FORMAT` names the
payload encoding; an import checks what the log relies on (slot count, first and last ID, the
dead mask's range) against the payload itself, and refuses a block that does not agree.
"""

from __future__ import annotations

import marshal
import sys
from array import array
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from mypy_extensions import mypyc_attr

from streams.crdt.listpack import LP_EMPTY, entry_size, int_size, master_size
from streams.crdt.ops import Fields
from streams.ids import StreamID

LISTPACK_MAX_SIZE = 1 << 30
"""Redis's STREAM_LISTPACK_MAX_SIZE: the byte limit when stream-node-max-bytes is 0 or above."""

_limits = {"bytes": 4096, "entries": 100}


def set_node_limits(*, max_bytes: int | None = None, max_entries: int | None = None) -> None:
    """CONFIG SET stream-node-max-bytes / stream-node-max-entries: applies to blocks opened or
    appended to from now on, as in Redis (existing nodes are not re-packed)."""
    if max_bytes is not None:
        if max_bytes < 0:
            raise ValueError("stream-node-max-bytes must be >= 0")
        _limits["bytes"] = max_bytes
    if max_entries is not None:
        if max_entries < 0:
            raise ValueError("stream-node-max-entries must be >= 0")
        _limits["entries"] = max_entries


def node_limits() -> tuple[int, int]:
    """(stream-node-max-bytes, stream-node-max-entries) in force."""
    return _limits["bytes"], _limits["entries"]


BLOCK_FORMAT = f"marshal-tuple-1/{sys.byteorder}/marshal-{marshal.version}"
"""The payload encoding a snapshot names, so that a build holding blocks otherwise refuses them:
`Payload`'s layout (version 1), its integer arrays in this machine's byte order, written by
marshal format `marshal.version` (which a Python release may change)."""

READABLE_FORMATS = frozenset(
    {BLOCK_FORMAT} | ({f"marshal-tuple-1/{sys.byteorder}"} if marshal.version == 4 else set())
)
"""Payload encodings this build reads: its own, and the name snapshots had before the marshal
version was part of it (those were written by marshal version 4, Python 3.11's)."""


class BlockError(ValueError):
    """A packed block (from a snapshot) that the log cannot hold as it is."""


# --- block encoding ----------------------------------------------------------------------------

Slots = tuple[Sequence[StreamID], Sequence[int], Sequence[Fields]]
"""A block's slots: IDs, dot seqs, fields (deleted slots included; see the block's mask)."""


class Payload(NamedTuple):
    """A closed block's payload: `marshal.dumps` of this tuple, field by field.

        +--------+-----+------+------+-----------+------------+------------+------+------+
        | master | ms0 | seq0 | dot0 | ms deltas | seq deltas | dot deltas | rows | same |
        +--------+-----+------+------+-----------+------------+------------+------+------+
         names    first ID    its    per slot, against the first      per slot  bit i:
         of the   (ms, seq)   dot    (`_pack_ints`: typecode + array  values or row i is
         first                seq    bytes, or a tuple of ints)       fields    values only

    As Redis's listpack node (t_stream.c, above streamAppendItem) keeps a master entry and flags
    an entry whose field names are the master's (SAMEFIELDS) so that it stores values only, a
    row whose names are `master` holds its values only and its bit in `same` is set; other rows
    hold their whole field list. Deleted slots stay until the block goes (the block's `dead`
    mask, outside the payload). `BLOCK_FORMAT` names this layout; change it and the name."""

    master: tuple[bytes, ...]
    ms0: int
    seq0: int
    dot0: int
    ms_deltas: Any
    seq_deltas: Any
    dot_deltas: Any
    rows: tuple[tuple[bytes, ...], ...]
    same: int


def payload_of(data: bytes) -> Payload:
    """A payload's fields (one `marshal.loads`; raises what marshal raises, or TypeError)."""
    return Payload._make(marshal.loads(data))


_TYPECODES = (("b", 1 << 7), ("h", 1 << 15), ("i", 1 << 31), ("q", 1 << 63))


def _pack_ints(values: list[int]) -> Any:
    """Integers as the narrowest signed array's bytes (a tuple if some exceed int64)."""
    lo, hi = min(values), max(values)
    for code, bound in _TYPECODES:
        if -bound <= lo and hi < bound:
            return code + ":", array(code, values).tobytes()
    return tuple(values)


def _unpack_ints(packed: Any) -> Sequence[int]:
    if isinstance(packed, tuple) and len(packed) == 2 and isinstance(packed[0], str):
        return array(packed[0][0], packed[1])
    result: Sequence[int] = packed
    return result


def _encode(ids: Sequence[StreamID], dots: Sequence[int], fields: Sequence[Fields]) -> bytes:
    ms0, seq0 = ids[0]
    dot0 = dots[0]
    master = fields[0][0::2]
    n = len(master)
    rows: list[Fields] = []
    same = 0
    for i, f in enumerate(fields):
        if len(f) == 2 * n and f[0::2] == master:
            same |= 1 << i
            rows.append(f[1::2])
        else:
            rows.append(f)
    return marshal.dumps(
        tuple(
            Payload(
                master,
                ms0,
                seq0,
                dot0,
                _pack_ints([sid[0] - ms0 for sid in ids]),
                _pack_ints([sid[1] - seq0 for sid in ids]),
                _pack_ints([d - dot0 for d in dots]),
                tuple(rows),
                same,
            )
        )
    )


@lru_cache(maxsize=64)
def _decode(payload: bytes) -> Slots:
    master, ms0, seq0, dot0, msd, seqd, dotd, rows, same = payload_of(payload)
    ids = tuple(
        [(ms0 + a, seq0 + b) for a, b in zip(_unpack_ints(msd), _unpack_ints(seqd), strict=True)]
    )
    dots = tuple([dot0 + d for d in _unpack_ints(dotd)])
    n = len(master)
    fields: list[Fields] = []
    for i, row in enumerate(rows):
        if same >> i & 1:
            if n == 1:
                fields.append((master[0], row[0]))
            else:
                flat: list[bytes] = [b""] * (2 * n)
                flat[0::2] = master
                flat[1::2] = row
                fields.append(tuple(flat))
        else:
            fields.append(row)
    return ids, dots, tuple(fields)


# Compiled: serializable for `Block.__new__` (installed blocks), copy (the undo journal) and
# pickle; subclassable so that a Block built from interpreted code runs its __init__ (as Group).
@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Block:
    """One node: slots in ID order, `dead` a bit per deleted slot, `lp_base` the listpack bytes
    of everything but the header, the end byte and the two counters (live, deleted)."""

    __slots__ = ("first", "last", "slots", "live", "dead", "lp_base", "payload", "open")

    def __init__(self, sid: StreamID, dot: int, fields: Fields) -> None:
        self.first = sid
        self.last = sid
        self.slots = 1
        self.live = 1
        self.dead = 0
        names = fields[0::2]
        self.lp_base = master_size(names) + entry_size(fields, 0, 0, True)
        self.payload: bytes | None = None
        self.open: tuple[list[StreamID], list[int], list[Fields], Fields] | None = (
            [sid],
            [dot],
            [fields],
            names,
        )

    def decoded(self) -> Slots:
        if self.open is not None:
            return self.open[0], self.open[1], self.open[2]
        assert self.payload is not None
        return _decode(self.payload)

    def lp_bytes(self) -> int:
        """lpBytes of the Redis node: what streamAppendItem compares with the byte limit."""
        return LP_EMPTY + self.lp_base + int_size(self.live) + int_size(self.slots - self.live)

    def seal(self) -> None:
        if self.open is not None:
            ids, dots, fields, _names = self.open
            self.payload = _encode(ids, dots, fields)
            self.open = None

    def reopen(self) -> tuple[list[StreamID], list[int], list[Fields], Fields]:
        if self.open is None:
            ids, dots, fields = self.decoded()
            self.open = (list(ids), list(dots), list(fields), fields[0][0::2])
            self.payload = None
        return self.open

    def append(self, sid: StreamID, dot: int, fields: Fields) -> None:
        ids, dots, rows, names = self.reopen()
        same = len(fields) == 2 * len(names) and fields[0::2] == names
        self.lp_base += entry_size(fields, sid[0] - self.first[0], sid[1] - self.first[1], same)
        ids.append(sid)
        dots.append(dot)
        rows.append(fields)
        self.last = sid
        self.slots += 1
        self.live += 1

    def is_dead(self, i: int) -> bool:
        return bool(self.dead >> i & 1)

    def kill(self, i: int) -> None:
        self.dead |= 1 << i
        self.live -= 1

    def live_slots(self) -> Iterator[int]:
        dead = self.dead
        return (i for i in range(self.slots) if not dead >> i & 1)

    def last_live(self) -> int | None:
        dead = self.dead
        for i in range(self.slots - 1, -1, -1):
            if not dead >> i & 1:
                return i
        return None


class PackedBlock(NamedTuple):
    """A block as a snapshot stores it: `payload` is `_encode`'s bytes (the open tail encoded
    too), `dead` the mask of deleted slots, `lp_base` what decides where Redis would close it."""

    first: StreamID
    last: StreamID
    slots: int
    dead: int
    lp_base: int
    payload: bytes


def packed(block: Block) -> PackedBlock:
    """The block as it is, without changing it (an open tail is encoded, not sealed)."""
    payload = block.payload
    if block.open is not None:
        ids, dots, fields, _names = block.open
        payload = _encode(ids, dots, fields)
    assert payload is not None
    return PackedBlock(block.first, block.last, block.slots, block.dead, block.lp_base, payload)


def unpacked(p: PackedBlock) -> Block:
    """A closed block from its packed form, after checking it against its own payload (one
    `marshal.loads`, no entry decoded): the slot count, the first and last ID, the dead mask's
    range. Raises BlockError."""
    if p.slots < 1 or p.dead < 0 or p.dead.bit_length() > p.slots or p.lp_base <= 0:
        raise BlockError(f"block at {p.first}: {p.slots} slots, dead mask or size out of range")
    if p.first > p.last or (p.first == p.last) != (p.slots == 1):
        raise BlockError(f"block at {p.first}: last ID {p.last} does not fit {p.slots} slots")
    try:
        _master, ms0, seq0, _dot0, msd, seqd, dotd, rows, _same = payload_of(p.payload)
        ms_deltas, seq_deltas = _unpack_ints(msd), _unpack_ints(seqd)
        counts = {len(ms_deltas), len(seq_deltas), len(_unpack_ints(dotd)), len(rows)}
        last = (ms0 + ms_deltas[-1], seq0 + seq_deltas[-1])
    except Exception as exc:  # marshal raises EOFError, ValueError, TypeError ...: no base
        raise BlockError(f"block at {p.first}: payload does not decode ({exc!r})") from exc
    if counts != {p.slots} or (ms0, seq0) != p.first or last != p.last:
        raise BlockError(f"block at {p.first}: payload disagrees with its first/last ID or slots")
    block = Block.__new__(Block)
    block.first, block.last, block.slots = p.first, p.last, p.slots
    block.dead, block.lp_base, block.payload, block.open = p.dead, p.lp_base, p.payload, None
    block.live = p.slots - p.dead.bit_count()
    return block


def rebuilt(ids: list[StreamID], dots: list[int], fields: list[Fields]) -> Block:
    """A block holding these live entries (the slow path for an out-of-order insert)."""
    block = Block(ids[0], dots[0], fields[0])
    for sid, dot, f in zip(ids[1:], dots[1:], fields[1:], strict=True):
        block.append(sid, dot, f)
    return block
