"""The XAdd fast path of the op-log codec: the Avro bytes of an `Op` with an `XAdd` body, written
and read by hand.

Why: nearly every op a busy node writes is an XAdd, and fastavro's generic writer was the largest
single cost of a write on the node (about a sixth of its GIL time at pipeline 16). This writes
the same bytes under one schema version: the record's fields in schema order (enum and union
indexes and longs as zig-zag varints, bytes length-prefixed, an array as one block and the 0 that
ends it). tests/unit/test_codec.py checks it byte for byte against fastavro over generated ops;
`streams.ops.codec.Codec` uses it only for the schema version named here.

Reading: a node's restart and `streams replay` decode every record of the log, and fastavro's
generic reader (about 13 us per XAdd) was their largest cost. `xadd_from_payload` reads an XAdd
op written under that schema version (any valid Avro encoding of it: arrays in any number of
blocks, negative block counts with their sizes) and returns None for anything else (another op
type, a local op, bytes it does not understand), so the caller decodes those with fastavro and
its error texts stay the only ones. tests/unit/test_codec.py checks both readers agree.
"""

from __future__ import annotations

from streams.avro_binary import read_long as _long
from streams.avro_binary import signed_u64, unsigned_u64, write_bytes, write_long
from streams.crdt.ops import Op, XAdd

XADD_FAST_PATH_FINGERPRINT = "15a34f48a3ed56fd"
"""The schema version the fast path writes (its fingerprint; version 2, whose XAdd and envelope
are version 1's: the body union grew after XAdd): a codec of any other schema uses fastavro, so
a new schema version is never written wrongly, only slower until this is updated
(tests/unit/test_codec.py fails to say so)."""
_XADD_BRANCH = 0
"""The index of XAdd in the body union of that schema."""
_XADD_BRANCH_BYTE = _XADD_BRANCH << 1
"""That index as its one-byte zig-zag varint."""


def xadd_payload(op: Op, body: XAdd) -> bytearray:
    """The Avro binary datum (without the single-object header); ValueError or TypeError for a
    value the schema cannot hold, as fastavro would refuse it."""
    out = bytearray(b"\x00")  # kind: op (enum index 0)
    write_long(out, op.origin)
    write_long(out, op.seq)
    write_long(out, op.ts_ms)
    if op.ctx:
        write_long(out, len(op.ctx))
        for region, seq in op.ctx:
            write_long(out, region)
            write_long(out, seq)
    out.append(0)  # end of the ctx array
    write_long(out, _XADD_BRANCH)
    write_bytes(out, body.key)
    ms, seq = body.id
    write_long(out, signed_u64(ms))
    write_long(out, signed_u64(seq))
    fields = body.fields
    if fields:
        write_long(out, len(fields))
        for item in fields:
            write_bytes(out, item)
    out.append(0)  # end of the fields array
    return out


def _count(data: bytes, pos: int) -> tuple[int, int]:
    """An array block's item count (a negative count is followed by the block's byte size)."""
    count, pos = _long(data, pos)
    if count < 0:
        count = -count
        _size, pos = _long(data, pos)
    return count, pos


def _bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    size, pos = _long(data, pos)
    end = pos + size
    if size < 0 or end > len(data):
        raise ValueError("bytes beyond the record")
    return data[pos:end], end


def xadd_from_payload(data: bytes, pos: int) -> Op | None:
    """The XAdd op whose Avro datum starts at `pos` and ends exactly at the end of `data`; None
    if it is not one, or is not well formed (the caller's generic reader says why). Varints of
    one byte (most origins, seqs, counts and lengths) are read inline: a call each was half the
    cost."""
    try:
        if data[pos] != 0:  # kind: only replicated ops carry an XAdd
            return None
        origin, pos = _long(data, pos + 1)
        seq, pos = _long(data, pos)
        ts_ms, pos = _long(data, pos)
        ctx: list[tuple[int, int]] = []
        count, pos = _count(data, pos)
        while count:
            for _ in range(count):
                region, pos = _long(data, pos)
                at, pos = _long(data, pos)
                ctx.append((region, at))
            count, pos = _count(data, pos)
        if data[pos] != _XADD_BRANCH_BYTE:
            return None
        size = data[pos + 1]
        if size < 0x80:
            pos += 2
            end = pos + (size >> 1)
            if size & 1 or end > len(data):
                return None
            key = data[pos:end]
            pos = end
        else:
            key, pos = _bytes(data, pos + 1)
        ms, pos = _long(data, pos)
        id_seq, pos = _long(data, pos)
        fields: list[bytes] = []
        count, pos = _count(data, pos)
        n = len(data)
        while count:
            for _ in range(count):
                size = data[pos]
                if size < 0x80:
                    pos += 1
                    end = pos + (size >> 1)
                    if size & 1 or end > n:
                        return None
                    fields.append(data[pos:end])
                    pos = end
                else:
                    item, pos = _bytes(data, pos)
                    fields.append(item)
            count, pos = _count(data, pos)
        if pos != n:
            return None
    except (IndexError, ValueError):
        return None
    body = XAdd(key, (unsigned_u64(ms), unsigned_u64(id_seq)), tuple(fields))
    return Op(origin, seq, tuple(ctx), ts_ms, body)
