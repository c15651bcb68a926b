"""Stream IDs: parse, format, compare, increment, and the three active-active ID modes.

An ID is a plain `(ms, seq)` tuple of two unsigned 64-bit integers, so comparison is tuple
comparison and a million of them cost no more than a million small tuples. Parsing follows Redis 7's
`streamGenericParseIDOrReply` (including its `string2ull` leniency) so error cases match a real
server; ID generation follows the ID modes of README.md ("ID modes") and docs/architecture.md.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import Enum

from streams import errors
from streams.errors import CommandError
from streams.numbers import string2ll

StreamID = tuple[int, int]

U64_MAX = 2**64 - 1
MIN_ID: StreamID = (0, 0)
MAX_ID: StreamID = (U64_MAX, U64_MAX)

# Strict mode: the sequence part of a generated ID is congruent to the region id modulo this
# stride, so two regions never generate the same ID and the first entry of a millisecond from
# region k is `ms-k`, as the seeds show.
REGION_STRIDE = 256
MAX_REGION_ID = REGION_STRIDE - 1


class IdMode(Enum):
    STRICT = "strict"
    SEMI_STRICT = "semi-strict"
    LIBERAL = "liberal"

    @classmethod
    def parse(cls, text: str) -> IdMode:
        try:
            return cls(text.lower())
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown ID mode {text!r}: expected one of {choices}") from None


def format_id(sid: StreamID) -> bytes:
    return b"%d-%d" % sid


def format_id_str(sid: StreamID) -> str:
    return f"{sid[0]}-{sid[1]}"


def incr(sid: StreamID) -> StreamID | None:
    """The next ID, or None past the last possible one."""
    ms, seq = sid
    if seq < U64_MAX:
        return (ms, seq + 1)
    if ms < U64_MAX:
        return (ms + 1, 0)
    return None


def decr(sid: StreamID) -> StreamID | None:
    """The previous ID, or None below 0-0."""
    ms, seq = sid
    if seq > 0:
        return (ms, seq - 1)
    if ms > 0:
        return (ms - 1, U64_MAX)
    return None


_SPACE = set(string.whitespace.encode())


def parse_u64(raw: bytes) -> int | None:
    """Redis's `string2ull`: string2ll first, else C `strtoull` with its leniency."""
    value = string2ll(raw)
    if value is not None:
        return value if value >= 0 else None
    i = 0
    while i < len(raw) and raw[i] in _SPACE:
        i += 1
    negative = False
    if i < len(raw) and raw[i : i + 1] in (b"+", b"-"):
        negative = raw[i : i + 1] == b"-"
        i += 1
    digits = raw[i:]
    if not digits or not digits.isdigit():
        return None
    number = int(digits)
    if number > U64_MAX:
        return None
    return (-number) % 2**64 if negative else number


def _c_string(raw: bytes) -> bytes:
    """What C string functions see of an argument: everything before the first NUL byte.

    Redis copies an ID argument into a buffer and parses it with strchr / strtoull, so
    `5\x00-3` parses as `5`. The 127-byte limit applies to the whole argument first.
    """
    if len(raw) > 127:
        raise CommandError(errors.INVALID_ID)
    return raw.split(b"\x00", 1)[0]


def parse_id(raw: bytes, missing_seq: int = 0, *, strict: bool = True) -> StreamID:
    """An explicit `ms-seq` or `ms` ID; with strict=False also `-` and `+`."""
    raw = _c_string(raw)
    if not strict and len(raw) == 1:
        if raw == b"-":
            return MIN_ID
        if raw == b"+":
            return MAX_ID
    ms_part, dash, seq_part = raw.partition(b"-")
    ms = parse_u64(ms_part)
    if ms is None:
        raise CommandError(errors.INVALID_ID)
    if not dash:
        return (ms, missing_seq)
    seq = parse_u64(seq_part)
    if seq is None:
        raise CommandError(errors.INVALID_ID)
    return (ms, seq)


def parse_range_start(raw: bytes) -> StreamID:
    """Start of an interval: `-`, `ms`, `ms-seq`, or `(` exclusive."""
    if len(raw) > 1 and raw[:1] == b"(":
        sid = parse_id(raw[1:], 0, strict=True)
        nxt = incr(sid)
        if nxt is None:
            raise CommandError(errors.INVALID_START_ID)
        return nxt
    return parse_id(raw, 0, strict=False)


def parse_range_end(raw: bytes) -> StreamID:
    """End of an interval: `+`, `ms` (meaning ms-MAX), `ms-seq`, or `(` exclusive."""
    if len(raw) > 1 and raw[:1] == b"(":
        sid = parse_id(raw[1:], U64_MAX, strict=True)
        prev = decr(sid)
        if prev is None:
            raise CommandError(errors.INVALID_END_ID)
        return prev
    return parse_id(raw, U64_MAX, strict=False)


class XAddIdKind(Enum):
    AUTO = "*"
    MS_AUTO_SEQ = "ms-*"
    MS_ONLY = "ms"
    FULL = "ms-seq"


@dataclass(frozen=True, slots=True)
class XAddIdSpec:
    kind: XAddIdKind
    ms: int = 0
    seq: int = 0


_AUTO_ID = XAddIdSpec(XAddIdKind.AUTO)
"""`*`, nearly every XADD's: made once (a frozen dataclass's constructor costs ~1 us)."""


def parse_xadd_id(raw: bytes) -> XAddIdSpec:
    if raw[:1] == b"*" and raw[1:2] in (b"", b"\x00"):
        return _AUTO_ID  # Redis tests opt[0] == '*' && opt[1] == '\0'
    raw = _c_string(raw)
    ms_part, dash, seq_part = raw.partition(b"-")
    ms = parse_u64(ms_part)
    if ms is None:
        raise CommandError(errors.INVALID_ID)
    if not dash:
        return XAddIdSpec(XAddIdKind.MS_ONLY, ms, 0)
    if seq_part == b"*":
        return XAddIdSpec(XAddIdKind.MS_AUTO_SEQ, ms, 0)
    seq = parse_u64(seq_part)
    if seq is None:
        raise CommandError(errors.INVALID_ID)
    return XAddIdSpec(XAddIdKind.FULL, ms, seq)


def _region_seq_above(seq: int | None, region: int) -> int | None:
    """Smallest sequence number above `seq` that belongs to `region` (None when none fits)."""
    if seq is None:
        return region
    candidate = seq - seq % REGION_STRIDE + region
    if candidate <= seq:
        candidate += REGION_STRIDE
    return candidate if candidate <= U64_MAX else None


def _region_id_at_or_after(ms: int, top: StreamID | None, region: int) -> StreamID | None:
    """The first region-owned ID at millisecond `ms` or later that is above `top`."""
    if top is None or ms > top[0]:
        return (ms, region)
    seq = _region_seq_above(top[1], region)
    if seq is not None:
        return (top[0], seq)
    if top[0] < U64_MAX:
        return (top[0] + 1, region)
    return None


def next_xadd_id(
    spec: XAddIdSpec, mode: IdMode, region: int, now_ms: int, top: StreamID | None
) -> StreamID:
    """Resolve an XADD ID at the edge, so the op carries the concrete ID (never `*`).

    `top` is the highest ID this region has seen in the key (any origin, deleted entries
    included, XSETID included), or None for a fresh key.
    """
    if not 1 <= region <= MAX_REGION_ID:
        raise ValueError(f"region id {region} outside 1..{MAX_REGION_ID}")
    if mode is IdMode.LIBERAL:
        return _liberal_id(spec, now_ms, top)
    if spec.kind is XAddIdKind.FULL:
        if mode is IdMode.STRICT:
            raise CommandError(errors.STRICT_FULL_ID)
        return _check_explicit((spec.ms, spec.seq), top)
    if spec.kind is XAddIdKind.AUTO:
        ms = now_ms if top is None else max(now_ms, top[0])
        sid = _region_id_at_or_after(ms, top, region)
        if sid is None:
            raise CommandError(errors.STREAM_EXHAUSTED)
        return sid
    if top is not None and spec.ms < top[0]:
        raise CommandError(errors.XADD_ID_TOO_SMALL)
    sid = _region_id_at_or_after(spec.ms, top, region)
    if sid is None or sid[0] != spec.ms:
        raise CommandError(errors.XADD_ID_TOO_SMALL)
    return sid


def _check_explicit(sid: StreamID, top: StreamID | None) -> StreamID:
    if sid == MIN_ID:
        raise CommandError(errors.XADD_ID_ZERO)
    if top is not None and sid <= top:
        raise CommandError(errors.XADD_ID_TOO_SMALL)
    return sid


def _liberal_id(spec: XAddIdSpec, now_ms: int, top: StreamID | None) -> StreamID:
    """Open-source Redis 7 semantics (t_stream.c streamAppendItem)."""
    last = top if top is not None else MIN_ID
    if spec.kind is XAddIdKind.AUTO:
        if now_ms > last[0]:
            return (now_ms, 0)
        nxt = incr(last)
        if nxt is None:
            raise CommandError(errors.STREAM_EXHAUSTED)
        return nxt
    if spec.kind is XAddIdKind.MS_AUTO_SEQ:
        if spec.ms > last[0]:
            return (spec.ms, 0)
        if spec.ms == last[0] and last[1] < U64_MAX:
            return (spec.ms, last[1] + 1)
        raise CommandError(errors.XADD_ID_TOO_SMALL)
    return _check_explicit((spec.ms, spec.seq), top)
