"""Byte sizes of Redis 7.0 listpack elements, so blocks close where Redis closes its nodes.

Redis opens a new stream node when the tail listpack's size plus the new entry's field and value
lengths reaches `stream-node-max-bytes` (t_stream.c streamAppendItem). To close blocks at the same
entries we need the listpack's exact byte count, which depends on how each element is encoded:
strings that read as canonical int64 decimals are stored as integers (listpack.c
lpStringToInt64 / lpEncodeGetType), and each element carries a back-length of 1 to 5 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from streams.numbers import string2ll

LP_EMPTY = 7
"""lpNew: a 6-byte header (total bytes, element count) and the end byte."""

_I64_MAX = (1 << 63) - 1


def _backlen(size: int) -> int:
    if size <= 127:
        return 1
    if size < 16383:
        return 2
    if size < 2097151:
        return 3
    if size < 268435455:
        return 4
    return 5


def int_size(v: int) -> int:
    """Bytes of an integer element (encoding + back-length)."""
    if 0 <= v <= 127:
        enc = 1
    elif -4096 <= v <= 4095:
        enc = 2
    elif -32768 <= v <= 32767:
        enc = 3
    elif -8388608 <= v <= 8388607:
        enc = 4
    elif -2147483648 <= v <= 2147483647:
        enc = 5
    else:
        enc = 9
    return enc + 1  # every integer encoding is at most 9 bytes: a 1-byte back-length


def str_size(s: bytes) -> int:
    """Bytes of a string element as lpAppend stores it (as an integer when it reads as one)."""
    n = len(s)
    if n <= _INT64_DIGITS:
        return _short_str_size(s)
    if n < 64:
        enc = 1 + n
    elif n < 4096:
        enc = 2 + n
    else:
        enc = 5 + n
    return enc + _backlen(enc)


_INT64_DIGITS = 20
"""The longest string that can read as an int64 ("-9223372036854775808")."""


@lru_cache(maxsize=1 << 16)
def _short_str_size(s: bytes) -> int:
    """`str_size` of a string short enough to read as an integer: field names and small values
    repeat from entry to entry, and `string2ll` was most of the cost of sizing an entry."""
    v = string2ll(s)  # lpStringToInt64 is a copy of string2ll
    if v is not None:
        return int_size(v)
    enc = 1 + len(s)
    return enc + _backlen(enc)


def signed64(v: int) -> int:
    """A uint64 difference as C casts it to int64 (Redis stores ID deltas that way)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v > _I64_MAX else v


def master_size(names: Sequence[bytes]) -> int:
    """The master entry without its two counters: num-fields, the names, the zero terminator."""
    return int_size(len(names)) + sum(str_size(f) for f in names) + int_size(0)


def entry_size(fields: Sequence[bytes], ms_delta: int, seq_delta: int, same: bool) -> int:
    """One entry: flags, ID deltas, [num-fields], [field] value..., lp-count. (Small integers,
    the common case of every part, are sized inline: this runs for every entry applied.)"""
    n = len(fields) // 2
    ms = signed64(ms_delta)
    seq = signed64(seq_delta)
    size = 2 + (2 if 0 <= ms <= 127 else int_size(ms)) + (2 if 0 <= seq <= 127 else int_size(seq))
    short = _short_str_size
    if same:
        for k in range(1, len(fields), 2):
            f = fields[k]
            size += short(f) if len(f) <= _INT64_DIGITS else str_size(f)
        count = n + 3
    else:
        size += 2 if n <= 127 else int_size(n)
        for f in fields:
            size += short(f) if len(f) <= _INT64_DIGITS else str_size(f)
        count = n + 3 + n + 1
    return size + (2 if count <= 127 else int_size(count))
