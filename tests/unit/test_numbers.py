"""`string2ll`, the one integer rule (request parser, IDs, listpack sizes, command arguments)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.commands.base import parse_int
from streams.errors import CommandError
from streams.numbers import LLONG_MAX, LLONG_MIN, string2ll

_CANONICAL = re.compile(rb"0|-?[1-9][0-9]{0,19}")


def _reference(raw: bytes) -> int | None:
    """util.c's string2ll as a rule: canonical decimal, at most 20 bytes, int64."""
    if len(raw) > 20 or not _CANONICAL.fullmatch(raw):
        return None
    value = int(raw)
    return value if LLONG_MIN <= value <= LLONG_MAX else None


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b"0", 0),
        (b"-1", -1),
        (b"42", 42),
        (b"9223372036854775807", LLONG_MAX),
        (b"-9223372036854775808", LLONG_MIN),
        (b"9223372036854775808", None),
        (b"-9223372036854775809", None),
        (b"-0", None),
        (b"01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"", None),
        (b"-", None),
        (b"1.0", None),
        (b"\xd9\xa1", None),
        (b"00000000000000000001", None),
        (b"1e3", None),
    ],
)
def test_string2ll_cases(raw: bytes, value: int | None) -> None:
    assert string2ll(raw) == value == _reference(raw)


@given(st.one_of(st.binary(max_size=24), st.integers().map(lambda n: b"%d" % n)))
def test_string2ll_is_the_rule(raw: bytes) -> None:
    assert string2ll(raw) == _reference(raw)


def test_parse_int_raises_the_given_error() -> None:
    assert parse_int(b"-7") == -7
    with pytest.raises(CommandError, match="not an integer"):
        parse_int(b"07")
    with pytest.raises(CommandError, match="custom"):
        parse_int(b"x", "ERR custom")
