"""Avro binary encoding by hand, for the few places that write it faster than fastavro's generic
writer or below it: the op log's XAdd fast path and the snapshot file's blocks. Also the mapping
of Redis's unsigned 64-bit ID parts onto Avro's signed `long`, which the op log, the snapshot
records and the snapshot file share.

Why by hand at all: fastavro writes any schema, and pays for that per datum; the op log's
commonest record and the snapshot file's block headers have fixed shapes, written here in a few
lines each and checked byte for byte against fastavro by the tests.
"""

from __future__ import annotations

from typing import Final

from streams.ids import U64_MAX

I64_MIN: Final = -(1 << 63)
I64_MAX: Final = (1 << 63) - 1
_TWO_64: Final = 1 << 64


def signed_u64(v: int) -> int:
    """An ID part (0..2^64-1) as the Avro `long` with the same two's-complement bits."""
    if not 0 <= v <= U64_MAX:
        raise ValueError(f"stream ID part {v} is outside 0..2^64-1")
    return v - _TWO_64 if v > I64_MAX else v


def unsigned_u64(v: int) -> int:
    """The inverse of `signed_u64`."""
    return v + _TWO_64 if v < 0 else v


def write_long(out: bytearray, value: int) -> None:
    """Appends Avro's zig-zag varint of a signed 64-bit integer.

    The bytes of a longer varint are gathered in one integer and appended at once: an append
    per byte was 5 % of a compiled node at pipeline 16 (a timestamp or an ID's millisecond part
    takes six)."""
    if not I64_MIN <= value <= I64_MAX:
        raise ValueError(f"{value} does not fit in a long")
    n = (value << 1) ^ (value >> 63)
    if n < 0x80:
        out.append(n)
        return
    packed = 0
    shift = 0
    while n > 0x7F:
        packed |= ((n & 0x7F) | 0x80) << shift
        shift += 8
        n >>= 7
    packed |= n << shift
    out += packed.to_bytes((shift >> 3) + 1, "little")


def long_bytes(value: int) -> bytes:
    """Avro's zig-zag varint of a signed 64-bit integer, as bytes."""
    out = bytearray()
    write_long(out, value)
    return bytes(out)


def write_bytes(out: bytearray, value: bytes) -> None:
    """Appends an Avro `bytes` value: its length, then the bytes."""
    if not isinstance(value, bytes):
        raise TypeError(f"{value!r} is not bytes")
    write_long(out, len(value))
    out += value


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    """One zig-zag varint at `pos`: (value, next position); ValueError past 64 bits (IndexError
    when the data ends inside it)."""
    b = data[pos]
    pos += 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
    if n >> 64:
        raise ValueError("varint beyond 64 bits")
    return (n >> 1) ^ -(n & 1), pos
