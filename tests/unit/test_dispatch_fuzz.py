"""Fuzzing the command table: any argument list, for every command name, gets a reply.

`streams.commands.table.dispatch` turns `CommandError` into a reply and re-raises anything else
(the node then logs it and answers a generic error), so an exception escaping here is a handler
bug that client input can trigger. Arguments are drawn from random bytes mixed with the words,
IDs and numbers the parsers look for, so the examples get past the first checks; the state holds
streams from two regions, groups, consumers and pending entries, so handlers go deep. The ops a
command asks for are issued and replicated to the other region, so applying them is fuzzed too.
"""

from __future__ import annotations

from fuzz_words import OPTION_WORDS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.commands.base import Context
from streams.commands.execute import run
from streams.commands.table import TABLE, dispatch
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.resp.encode import encode
from streams.scenarios.sim import SimulatedRegions

NOW_MS = 1_000_000


def _names() -> list[tuple[bytes, ...]]:
    out: list[tuple[bytes, ...]] = []
    for name, cmd in sorted(TABLE.items()):
        out.append((name.encode(),))
        for sub in sorted(cmd.subcommands or ()):
            out.append((name.encode(), sub.encode()))
    return out


NAMES = _names()

KEYS = [b"s", b"t", b"missing", b"g", b"c1", b"c2", b"new"]
IDS = [
    b"0",
    b"0-0",
    b"0-1",
    b"1",
    b"1-1",
    b"1000-1",
    b"1000-*",
    b"2000",
    b"999999-0",
    b"(1000-1",
    b"18446744073709551615-18446744073709551615",
    b"18446744073709551615-*",
    b"18446744073709551616",
    b"-1",
    b"1-",
    b"-1-1",
    b"1-1-1",
    b"1.5",
    b"0x10",
]
NUMBERS = [
    b"0",
    b"1",
    b"2",
    b"-1",
    b"10",
    b"100",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"1e3",
    b"",
    b" 1",
    b"01",
    b"+1",
    b"\x00",
]

token = st.one_of(
    st.sampled_from(OPTION_WORDS),
    st.sampled_from(KEYS),
    st.sampled_from(IDS),
    st.sampled_from(NUMBERS),
    st.binary(max_size=12),
)


@st.composite
def command_args(draw: st.DrawFn) -> list[bytes]:
    name = list(draw(st.sampled_from(NAMES)))
    if draw(st.booleans()):
        name[0] = name[0].upper()
    return name + draw(st.lists(token, max_size=12))


def populated(mode: IdMode) -> SimulatedRegions:
    """Two regions with streams from both, a group, consumers and pending entries."""
    sim = SimulatedRegions(2, mode)
    for region, key in ((1, b"s"), (2, b"s"), (1, b"t")):
        for i in range(3):
            sim.execute(region, (b"XADD", key, b"*", b"f", b"%d" % i), NOW_MS + i)
    sim.sync()
    sim.execute(1, (b"XGROUP", b"CREATE", b"s", b"g", b"0"), None)
    sim.execute(
        1, (b"XREADGROUP", b"GROUP", b"g", b"c1", b"COUNT", b"2", b"STREAMS", b"s", b">"), None
    )
    sim.execute(1, (b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"c2"), None)
    sim.sync()
    return sim


def check(region: Region, other: Region, args: list[bytes]) -> None:
    ctx = Context(region.state, region.id, region.mode, NOW_MS + 10)
    result = dispatch(ctx, args)  # raises only on a handler bug
    encode(result.reply, 2)
    encode(result.reply, 3)
    done = run(region, args, NOW_MS + 10)  # and issue its ops (the state may have moved on)
    encode(done.reply, 2)
    for op in done.replicated:
        other.receive(op)
    region.state.digest()
    other.state.digest()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(IdMode)), st.lists(command_args(), min_size=1, max_size=4))
def test_any_arguments_to_any_command_get_a_reply(
    mode: IdMode, commands: list[list[bytes]]
) -> None:
    sim = populated(mode)
    for args in commands:
        check(sim.regions[1], sim.regions[2], args)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=10), min_size=1, max_size=8))
def test_random_bytes_as_a_whole_command(args: list[bytes]) -> None:
    sim = populated(IdMode.STRICT)
    check(sim.regions[1], sim.regions[2], args)


def test_every_command_name_is_fuzzed() -> None:
    assert {n[0].decode() for n in NAMES} == set(TABLE)
