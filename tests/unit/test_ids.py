"""Stream IDs: parsing as Redis 7.0 parses, formatting, interval edges, and the three ID modes."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams import errors
from streams.errors import CommandError
from streams.ids import (
    MAX_ID,
    MAX_REGION_ID,
    MIN_ID,
    REGION_STRIDE,
    U64_MAX,
    IdMode,
    StreamID,
    XAddIdKind,
    decr,
    format_id,
    format_id_str,
    incr,
    next_xadd_id,
    parse_id,
    parse_range_end,
    parse_range_start,
    parse_u64,
    parse_xadd_id,
)

u64 = st.integers(0, U64_MAX)
stream_id = st.tuples(u64, u64)


def fails_with(text: str) -> AbstractContextManager[object]:
    """The error reply must be exactly `text`."""
    return pytest.raises(CommandError, match=f"^{re.escape(text)}$")


# --- parse / format --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(sid=stream_id)
def test_format_then_parse_gives_the_id_back(sid: StreamID) -> None:
    assert parse_id(format_id(sid)) == sid
    assert format_id_str(sid).encode() == format_id(sid)


def test_a_millisecond_only_id_takes_the_missing_sequence() -> None:
    assert parse_id(b"5") == (5, 0)
    assert parse_id(b"5", 7) == (5, 7)


def test_dash_and_plus_are_ids_only_where_not_strict() -> None:
    assert parse_id(b"-", strict=False) == MIN_ID
    assert parse_id(b"+", strict=False) == MAX_ID
    for raw in (b"-", b"+"):
        with fails_with(errors.INVALID_ID):
            parse_id(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"abc",
        b"1-",
        b"-1",
        b"1--1",
        b"1-a",
        b"1.5",
        b"1 ",
        b"1-2-3",
        b"0x10",
        b"(1",
        b"*",
        b"1-*",
        b"18446744073709551616",
        b"1-18446744073709551616",
        b"-18446744073709551616",
        b"9" * 128,
    ],
)
def test_malformed_ids_are_refused_with_the_redis_text(raw: bytes) -> None:
    with fails_with(errors.INVALID_ID):
        parse_id(raw)


def test_64_bit_bounds_are_exact() -> None:
    assert parse_id(b"18446744073709551615-18446744073709551615") == MAX_ID
    assert parse_u64(b"18446744073709551615") == U64_MAX
    assert parse_u64(b"18446744073709551616") is None
    assert parse_u64(b"9223372036854775808") == 2**63  # beyond int64: strtoull takes it


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b" 1", 1),  # strtoull skips leading white space
        (b"\t2", 2),
        (b"+3", 3),
        (b"007", 7),  # string2ll refuses leading zeros, strtoull does not
        (b"-0", 0),
        (b"-18446744073709551615", 1),  # strtoull negates modulo 2**64
        (b"0000000000000000000000004", 4),  # longer than string2ll looks at
    ],
)
def test_redis_string2ull_leniency_is_kept(raw: bytes, value: int) -> None:
    assert parse_u64(raw) == value


def test_a_nul_byte_ends_the_id_as_in_c() -> None:
    assert parse_id(b"5\x00-3") == (5, 0)
    assert parse_id(b"3-1\x00junk") == (3, 1)
    assert parse_id(b"-\x00", strict=False) == MIN_ID
    with fails_with(errors.INVALID_ID):
        parse_id(b"\x005")


def test_ids_longer_than_127_bytes_are_refused_even_when_numeric() -> None:
    assert parse_id(b"0" * 126 + b"1") == (1, 0)
    with fails_with(errors.INVALID_ID):
        parse_id(b"0" * 127 + b"1")


# --- intervals -------------------------------------------------------------------------------


def test_interval_bounds_fill_the_missing_sequence_towards_the_outside() -> None:
    assert parse_range_start(b"5") == (5, 0)
    assert parse_range_end(b"5") == (5, U64_MAX)
    assert parse_range_start(b"-") == MIN_ID
    assert parse_range_end(b"+") == MAX_ID


def test_exclusive_bounds_step_over_the_named_id() -> None:
    assert parse_range_start(b"(5-3") == (5, 4)
    assert parse_range_end(b"(5-3") == (5, 2)
    assert parse_range_start(b"(5") == (5, 1)  # (5-0 excluded
    assert parse_range_end(b"(5") == (5, U64_MAX - 1)  # (5-MAX excluded
    assert parse_range_start(b"(5-18446744073709551615") == (6, 0)
    assert parse_range_end(b"(6-0") == (5, U64_MAX)


def test_exclusive_bounds_past_the_ends_of_the_id_space_are_refused() -> None:
    with fails_with(errors.INVALID_START_ID):
        parse_range_start(b"(18446744073709551615-18446744073709551615")
    with fails_with(errors.INVALID_END_ID):
        parse_range_end(b"(0-0")
    assert parse_range_end(b"(0") == (0, U64_MAX - 1)
    assert parse_range_start(b"(18446744073709551615") == (U64_MAX, 1)


def test_exclusive_bounds_take_no_dash_or_plus() -> None:
    for raw in (b"(-", b"(+", b"(", b"(("):
        with fails_with(errors.INVALID_ID):
            parse_range_start(raw)
        with fails_with(errors.INVALID_ID):
            parse_range_end(raw)


def test_incr_and_decr_carry_between_ms_and_seq_and_stop_at_the_ends() -> None:
    assert incr((1, U64_MAX)) == (2, 0)
    assert decr((2, 0)) == (1, U64_MAX)
    assert incr(MAX_ID) is None
    assert decr(MIN_ID) is None


# --- XADD ID specs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "kind", "ms", "seq"),
    [
        (b"*", XAddIdKind.AUTO, 0, 0),
        (b"7", XAddIdKind.MS_ONLY, 7, 0),
        (b"7-*", XAddIdKind.MS_AUTO_SEQ, 7, 0),
        (b"7-3", XAddIdKind.FULL, 7, 3),
    ],
)
def test_xadd_id_forms(raw: bytes, kind: XAddIdKind, ms: int, seq: int) -> None:
    spec = parse_xadd_id(raw)
    assert (spec.kind, spec.ms, spec.seq) == (kind, ms, seq)


@pytest.mark.parametrize("raw", [b"*-1", b"**", b"7-**", b"-", b"+", b"", b"7-"])
def test_malformed_xadd_ids_are_refused(raw: bytes) -> None:
    with fails_with(errors.INVALID_ID):
        parse_xadd_id(raw)


def nxt(
    raw: bytes, mode: IdMode, top: StreamID | None, region: int = 1, now: int = 1000
) -> StreamID:
    return next_xadd_id(parse_xadd_id(raw), mode, region, now, top)


# --- liberal: open-source Redis --------------------------------------------------------------


def test_liberal_mode_is_open_source_redis() -> None:
    lib = IdMode.LIBERAL
    assert nxt(b"*", lib, None, now=1000) == (1000, 0)
    assert nxt(b"*", lib, (1000, 4), now=1000) == (1000, 5)
    assert nxt(b"*", lib, (2000, 4), now=1000) == (2000, 5)  # the clock went back
    assert nxt(b"7", lib, (5, 9)) == (7, 0)  # millisecond-only: seq 0
    assert nxt(b"7-*", lib, (7, 2)) == (7, 3)
    assert nxt(b"8-*", lib, (7, 2)) == (8, 0)
    assert nxt(b"0-*", lib, None) == (0, 1)
    assert nxt(b"7-3", lib, (7, 2)) == (7, 3)


def test_liberal_mode_refuses_ids_at_or_below_the_top_and_0_0() -> None:
    lib = IdMode.LIBERAL
    for raw, top in [(b"7-2", (7, 2)), (b"7", (7, 0)), (b"6-*", (7, 2)), (b"7-*", (7, U64_MAX))]:
        with fails_with(errors.XADD_ID_TOO_SMALL):
            nxt(raw, lib, top)
    for raw in (b"0-0", b"0"):
        with fails_with(errors.XADD_ID_ZERO):
            nxt(raw, lib, None)


def test_liberal_auto_id_overflows_the_sequence_into_the_next_millisecond() -> None:
    assert nxt(b"*", IdMode.LIBERAL, (5000, U64_MAX), now=1000) == (5001, 0)


def test_liberal_auto_id_on_the_last_possible_id_is_an_exhausted_stream() -> None:
    with fails_with(errors.STREAM_EXHAUSTED):
        nxt(b"*", IdMode.LIBERAL, MAX_ID)


# --- strict and semi-strict: region-owned sequences ------------------------------------------


def test_strict_first_entry_of_a_millisecond_from_region_k_is_ms_k() -> None:
    for region in (1, 2, 3, MAX_REGION_ID):
        assert nxt(b"*", IdMode.STRICT, None, region=region, now=1000) == (1000, region)
        assert nxt(b"1000", IdMode.STRICT, None, region=region) == (1000, region)
        assert nxt(b"1000", IdMode.STRICT, (999, 7), region=region) == (1000, region)


def test_strict_ids_in_one_millisecond_step_by_the_region_stride() -> None:
    assert nxt(b"*", IdMode.STRICT, (1000, 1), region=1, now=1000) == (1000, 1 + REGION_STRIDE)
    # above another region's entry in the same millisecond, on this region's own residue
    assert nxt(b"*", IdMode.STRICT, (1000, 2), region=1, now=1000) == (1000, 1 + REGION_STRIDE)
    assert nxt(b"*", IdMode.STRICT, (1000, 2), region=3, now=1000) == (1000, 3)
    assert nxt(b"1000", IdMode.STRICT, (1000, 300), region=2) == (1000, 2 + 2 * REGION_STRIDE)


def test_strict_auto_id_never_goes_below_the_top_when_the_clock_is_behind() -> None:
    assert nxt(b"*", IdMode.STRICT, (5000, 9), region=2, now=1000) == (5000, 2 + REGION_STRIDE)


def test_strict_refuses_full_ids_and_semi_strict_takes_them() -> None:
    with fails_with(errors.STRICT_FULL_ID):
        nxt(b"7-3", IdMode.STRICT, None)
    assert nxt(b"7-3", IdMode.SEMI_STRICT, None) == (7, 3)
    with fails_with(errors.XADD_ID_TOO_SMALL):
        nxt(b"7-3", IdMode.SEMI_STRICT, (7, 3))
    # semi-strict otherwise generates like strict
    assert nxt(b"*", IdMode.SEMI_STRICT, None, region=4, now=9) == (9, 4)
    assert nxt(b"9", IdMode.SEMI_STRICT, (9, 4), region=4) == (9, 4 + REGION_STRIDE)


def test_strict_millisecond_only_below_the_top_millisecond_is_too_small() -> None:
    with fails_with(errors.XADD_ID_TOO_SMALL):
        nxt(b"999", IdMode.STRICT, (1000, 1))


def test_strict_sequence_overflow_moves_auto_ids_to_the_next_millisecond() -> None:
    top = (1000, U64_MAX - 3)
    assert nxt(b"*", IdMode.STRICT, top, region=5, now=1000) == (1001, 5)
    # a millisecond-only ID names its millisecond: no room left there is an error
    with fails_with(errors.XADD_ID_TOO_SMALL):
        nxt(b"1000", IdMode.STRICT, top, region=5)


def test_strict_auto_id_with_no_room_anywhere_is_an_exhausted_stream() -> None:
    with fails_with(errors.STREAM_EXHAUSTED):
        nxt(b"*", IdMode.STRICT, (U64_MAX, U64_MAX - 3), region=5)
    assert nxt(b"*", IdMode.STRICT, (U64_MAX, U64_MAX - 300), region=5)[0] == U64_MAX


@settings(max_examples=300, deadline=None)
@given(
    top=st.one_of(
        st.none(),
        st.tuples(st.integers(0, 3), st.integers(0, 2000)),
        st.tuples(st.integers(0, 3), st.integers(U64_MAX - 600, U64_MAX)),
    ),
    now=st.integers(0, 4),
    spec=st.sampled_from([b"*", b"0", b"1", b"2", b"3", b"4"]),
    regions=st.lists(st.integers(1, MAX_REGION_ID), min_size=2, max_size=4, unique=True),
    mode=st.sampled_from([IdMode.STRICT, IdMode.SEMI_STRICT]),
)
def test_strict_ids_of_different_regions_never_collide_and_stay_above_the_top(
    top: StreamID | None, now: int, spec: bytes, regions: list[int], mode: IdMode
) -> None:
    made: dict[StreamID, int] = {}
    for region in regions:
        try:
            sid = nxt(spec, mode, top, region=region, now=now)
        except CommandError:
            continue
        assert top is None or sid > top
        assert sid[1] % REGION_STRIDE == region
        assert made.setdefault(sid, region) == region


def test_region_ids_outside_the_stride_are_a_configuration_error() -> None:
    for region in (0, MAX_REGION_ID + 1):
        with pytest.raises(ValueError):
            nxt(b"*", IdMode.STRICT, None, region=region)


def test_id_modes_parse_case_insensitively_and_name_the_choices() -> None:
    assert IdMode.parse("Semi-Strict") is IdMode.SEMI_STRICT
    with pytest.raises(ValueError, match="strict, semi-strict, liberal"):
        IdMode.parse("lenient")
