"""The XAdd fast path of the op-log codec: the Avro bytes of an `Op` with an `XAdd` body, written
by hand.

Why: nearly every op a busy node writes is an XAdd, and fastavro's generic writer was the largest
single cost of a write on the node (about a sixth of its GIL time at pipeline 16). This writes
the same bytes under one schema version: the record's fields in schema order (enum and union
indexes and longs as zig-zag varints, bytes length-prefixed, an array as one block and the 0 that
ends it). tests/unit/test_codec.py checks it byte for byte against fastavro over generated ops;
`streams.ops.codec.Codec` uses it only for the schema version named here.
"""

from __future__ import annotations

from streams.avro_binary import signed_u64, write_bytes, write_long
from streams.crdt.ops import Op, XAdd

XADD_FAST_PATH_FINGERPRINT = "7e7a41339d378ccc"
"""The schema version the fast path writes (its fingerprint): a codec of any other schema uses
fastavro, so a new schema version is never written wrongly, only slower until this is updated
(tests/unit/test_codec.py fails to say so)."""
_XADD_BRANCH = 0
"""The index of XAdd in the body union of that schema."""


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
