"""Redis's integer parsing, once: `string2ll` (util.c), the rule for every integer a client
sends, from a multibulk count to XADD's MAXLEN.

A leaf module: the request parser (`streams.resp.parser`), stream IDs (`streams.ids`) and the
commands (`streams.commands.base.parse_int`, which raises Redis's error instead of None) all use
it.
"""

from __future__ import annotations

LLONG_MIN = -(2**63)
LLONG_MAX = 2**63 - 1


def string2ll(raw: bytes) -> int | None:
    """The value of `raw` as Redis's string2ll reads it, else None: an optional '-', then ASCII
    digits without a leading zero (a lone "0" aside; "-0" is refused), at most 20 bytes in all,
    within signed 64-bit. No '+', no spaces."""
    digits = raw[1:] if raw[:1] == b"-" else raw
    if (
        not digits.isdigit()  # bytes.isdigit: ASCII only, False when empty
        or len(raw) > 20
        or (digits[0] == 0x30 and len(raw) > 1)
    ):
        return None
    value = int(raw)
    if not LLONG_MIN <= value <= LLONG_MAX:
        return None
    return value


def wrap64(value: int) -> int:
    """`value` as a signed 64-bit C integer holds it after overflow (two's complement): Redis
    keeps a stream's entries-added as uint64 and a group's entries-read as long long, adds and
    subtracts them in C and answers them as signed, so 2**63 - 1 + 1 is -2**63 there."""
    return ((value - LLONG_MIN) % 2**64) + LLONG_MIN
