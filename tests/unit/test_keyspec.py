"""`streams.commands.keyspec`: the keys of a request, as Redis's two key finders give them.

The expected values are redis-server 7.0.15's (tests/differential/test_cluster_vs_redis.py asks
a real server COMMAND GETKEYS for the same requests and routes the same requests in a cluster).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams import errors
from streams.commands import table
from streams.commands.catalogue import spec as catalogued
from streams.commands.keyspec import command_keys, getkeys
from streams.errors import CommandError


def _args(text: str) -> list[bytes]:
    return [w.encode() for w in text.split(" ")]


ROUTING = [
    ("xadd", "XADD k * f v", ["k"]),
    ("xrange", "XRANGE k - +", ["k"]),
    ("del", "DEL a b c", ["a", "b", "c"]),
    ("del", "DEL", []),
    ("exists", "EXISTS a", ["a"]),
    ("rename", "RENAME a b", ["a", "b"]),
    ("xgroup|create", "XGROUP CREATE k g $ MKSTREAM", ["k"]),
    ("xinfo|stream", "XINFO STREAM k FULL", ["k"]),
    ("xinfo|help", "XINFO HELP", []),
    ("xgroup", "XGROUP", []),
    ("keys", "KEYS *", []),
    ("ping", "PING", []),
    ("crdt.info", "CRDT.INFO", []),
    ("xread", "XREAD STREAMS a 0", ["a"]),
    ("xread", "XREAD COUNT 1 BLOCK 0 STREAMS a b 0 0", ["a", "b"]),
    ("xread", "XREAD STREAMS a b 0", []),
    ("xread", "XREAD STREAMS", []),
    ("xread", "XREAD a STREAMS b 0", []),
    ("xread", "XREAD COUNT streams STREAMS a 0", ["a"]),
    ("xread", "XREAD streams streams 0", ["streams"]),
    ("xreadgroup", "XREADGROUP GROUP g c STREAMS a >", ["a"]),
    ("xreadgroup", "XREADGROUP GROUP streams c STREAMS a >", ["a"]),
    ("xreadgroup", "XREADGROUP GROUP g c NOACK STREAMS a b > >", ["a", "b"]),
    ("xreadgroup", "XREADGROUP GROUP g c x y z", []),
]


@pytest.mark.parametrize(("name", "request_text", "keys"), ROUTING)
def test_command_keys_as_getkeysfromcommand(name: str, request_text: str, keys: list[str]) -> None:
    assert command_keys(name, _args(request_text)) == [k.encode() for k in keys]


def test_a_nul_ends_a_keyword_as_strcasecmp_reads_it() -> None:
    args = [b"XREAD", b"STREAMS\x00x", b"a", b"0"]
    assert command_keys("xread", args) == [b"a"]
    assert getkeys("xread", args) == [b"a"]


GETKEYS = [
    ("xread", "XREAD STREAMS a b 0", ["a"]),
    ("xread", "XREAD STREAMS a b c 0", ["a", "b"]),
    ("xread", "XREAD COUNT streams STREAMS a 0", ["STREAMS"]),
    ("xread", "xread streams streams 0", ["streams"]),
    ("xreadgroup", "XREADGROUP GROUP streams c STREAMS a >", ["a"]),
    ("xreadgroup", "XREADGROUP GROUP g streams STREAMS a >", ["a"]),
    ("xreadgroup", "XREADGROUP GROUP g c streams STREAMS a", ["STREAMS"]),
    ("xreadgroup", "XREADGROUP GROUP g c COUNT STREAMS a >", ["a"]),
    ("xreadgroup", "XREADGROUP GROUP g c NOACK STREAMS a b > >", ["a", "b"]),
    ("del", "DEL a b c", ["a", "b", "c"]),
    ("xautoclaim", "XAUTOCLAIM a g c 0 0", ["a"]),
    ("eval", "EVAL x 0", []),
]


@pytest.mark.parametrize(("name", "request_text", "keys"), GETKEYS)
def test_getkeys_as_command_getkeys(name: str, request_text: str, keys: list[str]) -> None:
    assert getkeys(name, _args(request_text)) == [k.encode() for k in keys]


@pytest.mark.parametrize(
    ("name", "request_text", "error"),
    [
        ("ping", "PING x", errors.GETKEYS_NO_KEYS),
        ("keys", "KEYS", errors.GETKEYS_NO_KEYS),
        ("xadd", "XADD a", errors.GETKEYS_INVALID_ARITY),
        ("rename", "RENAME a", errors.GETKEYS_INVALID_ARITY),
        ("xread", "XREAD a b STREAMS", errors.GETKEYS_INVALID_ARGS),
        ("xread", "XREAD a b c", errors.GETKEYS_INVALID_ARGS),
        ("xread", "XREAD x STREAMS a", errors.GETKEYS_INVALID_ARGS),
        ("xreadgroup", "XREADGROUP GROUP g c x y z", errors.GETKEYS_INVALID_ARGS),
    ],
)
def test_getkeys_errors_in_redis_order(name: str, request_text: str, error: str) -> None:
    with pytest.raises(CommandError) as caught:
        getkeys(name, _args(request_text))
    assert caught.value.text == error


def _served() -> list[str]:
    names = []
    for cmd in table.TABLE.values():
        names.append(cmd.name)
        names.extend(sub.name for sub in (cmd.subcommands or {}).values())
    return names


@pytest.mark.parametrize("name", [n for n in _served() if n not in ("xread", "xreadgroup")])
def test_both_finders_agree_on_well_formed_requests_of_every_served_command(name: str) -> None:
    """Outside XREAD / XREADGROUP, a served command's keys are its catalogue range: a request
    just long enough for its arity has them where the range says, for both finders."""
    spec = catalogued(name)
    first, last, step = spec.keys
    args = [part.encode() for part in name.split("|")]
    args += [b"arg%d" % i for i in range(len(args), max(abs(spec.arity), last + 1))]
    expected = [] if first == 0 else args[first : last % len(args) + 1 : step]
    assert command_keys(name, args) == expected
    if expected:
        assert getkeys(name, args) == expected


_WORDS = st.sampled_from([b"STREAMS", b"streams", b"COUNT", b"BLOCK", b"GROUP", b"NOACK", b"k"])


@given(st.lists(_WORDS, max_size=9))
def test_xread_routing_keys_are_half_of_what_follows_streams(words: list[bytes]) -> None:
    """What xreadGetKeys finds is the first half of the arguments after a STREAMS word, and
    each key is found in both finders' answers alike when the request parses."""
    args = [b"XREAD", *words]
    keys = command_keys("xread", args)
    if keys:
        streams = len(args) - 2 * len(keys) - 1
        assert args[streams].lower() == b"streams"
        assert keys == args[streams + 1 : streams + 1 + len(keys)]
