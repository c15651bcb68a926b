"""A real region node answers like redis-server 7.0, byte for byte, over raw sockets.

Hypothesis generates command sequences over three stream keys from the stream command subset
(XADD with explicit, millisecond-only, `ms-*` and `*` IDs, NOMKSTREAM, MAXLEN / MINID with `=` /
`~` / LIMIT; XLEN, XRANGE, XREVRANGE, XREAD without BLOCK, XDEL, XTRIM, XSETID; XGROUP CREATE /
SETID / DESTROY / CREATECONSUMER / DELCONSUMER; XREADGROUP, XACK, XPENDING, XCLAIM (mostly
JUSTID), XAUTOCLAIM; XINFO GROUPS / CONSUMERS / STREAM [FULL]; DEL, EXISTS, TYPE) plus malformed
variants (wrong arity, bad IDs, bad options and numbers, unknown subcommands, missing keys and
groups). Each command goes over a socket to a real single-region node (a module-scoped
`LocalTopology`, liberal ID mode: Kafka writer, materializer, RESP server; one shard, four shards
in one process, and four shards over two processes speaking the cluster protocol) and to the real
redis-server of the session; an example speaks RESP2 or RESP3 (HELLO 3 on both) as hypothesis
chooses. After every step both sides must also hold the same entries in every key.

Both sides use the same key names (they appear in replies): a fresh prefix per example, because a
DEL on the node replicates through Kafka and state there is not reset; on redis the keys are
deleted after the example.

Normalised, and only this:
- IDs that come from a clock. XADD `*` (and everything placed relative to such an entry) gives
  different IDs on the two servers. Every XADD reply pairs the node's ID with redis's for that
  key, and the node's replies are translated through those pairs (per key, XREAD replies key by
  key) before the byte comparison. To keep the two streams ordered alike, an ID placeholder
  anchored on a key that holds such an entry resolves only to an existing entry's exact ID (or
  strictly above / exactly at the top, for XADD and XSETID): an offset between two clock IDs could
  fall between entries on one side and not on the other.
- Idle times and delivery / seen times (XPENDING's idle, XINFO CONSUMERS idle, XINFO STREAM FULL
  delivery and seen times): equal within `CLOCK_SLACK_MS`. Min-idle thresholds and XCLAIM
  IDLE/TIME values are drawn far from every real idle time, so which entries qualify never
  depends on how fast a step ran.

Known deviations, left out of the comparison:
- A stream emptied by XDEL / XTRIM / MAXLEN 0 (or whose last group is destroyed while it is
  empty) disappears in our model (EXISTS 0, TYPE none), while Redis keeps an empty stream. When
  redis holds such a husk after a step, the key is deleted on both sides, so the two stay alike.
- XSETID never moves the last ID back (active-active): when the node refuses with that error the
  command is not sent to redis.
- XADD `ms-*` on a key whose last ID is `ms-18446744073709551615`: Redis 7.0 answers "Elements
  are too large to be stored" (a 7.0 bug); we answer "equal or smaller than the target stream top
  item" like later versions.
- `XTRIM MINID ~` while the last entry added to the key has been deleted: Redis compares with the
  deleted entry's ID still held in its radix-tree node; the step is sent to neither side.
- XINFO STREAM's radix-tree-keys / radix-tree-nodes are estimated from the length (Redis's memory
  layout has no counterpart here). For an empty stream that keeps groups, Redis shows 1 / 2 when
  its last entries were trimmed while the node's last entry had been XDELed (the node stays),
  where the estimate says 0 / 1; that one pair is accepted.
"""

from __future__ import annotations

import functools
import itertools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import hiredis
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from support import RawClient

from differential.redis8_fields import redis7_view
from streams import errors
from streams.ids import U64_MAX, StreamID
from streams.slots import shard_of
from topology.local import LocalTopology

from .redis_server import RedisServer
from .strategies import rarely as _rarely
from .strategies import weighted

T = TypeVar("T")
rarely = functools.partial(_rarely, odds=6)  # this suite draws the rare branch 1 in 7
CLOCK_SLACK_MS = 2000
FUTURE_MS = 10**13
MAX_ID = b"18446744073709551615-18446744073709551615"
NKEYS = 3
GROUPS = (b"g1", b"g2")
CONSUMERS = (b"c1", b"c2", b"c3")
_examples = itertools.count()


# --- placeholders ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """Key `index` of the example (NKEYS is a key nothing ever writes)."""

    index: int


@dataclass(frozen=True)
class Near:
    """An ID near key `key`'s state on each side: near its last ID (`anchor` None) or near its
    entry number `anchor` (mod length). `form`: full, ms, ms-*, (full, (ms."""

    key: int
    anchor: int | None
    dms: int
    dseq: int
    form: str


Arg = bytes | Key | Near
Command = list[Arg]


# --- strategies --------------------------------------------------------------------------------


def case(word: str) -> st.SearchStrategy[bytes]:
    return st.sampled_from([word.upper().encode(), word.lower().encode(), word.title().encode()])


def num(n: int) -> bytes:
    return b"%d" % n


BIG_MS = [2**63 - 1, U64_MAX - 1, U64_MAX, FUTURE_MS, FUTURE_MS + 1]
ms_value = st.one_of(st.integers(0, 6), st.sampled_from(BIG_MS))
seq_value = st.one_of(st.integers(0, 3), st.sampled_from([U64_MAX - 1, U64_MAX]))
literal_id = st.one_of(
    st.builds(lambda ms, seq: b"%d-%d" % (ms, seq), ms_value, seq_value),
    st.builds(lambda ms: b"%d" % ms, ms_value),
    st.sampled_from([b" 1", b"+1", b"00003", b"1-+2", b"3-1\x00x"]),
)
bad_id = st.sampled_from(
    [
        b"",
        b"-",
        b"+",
        b"abc",
        b"1-",
        b"-1",
        b"1-a",
        b"18446744073709551616",
        b"1.5",
        b"(1",
        b"$",
        b">",
        b"*",
        b"1-*",
        b"1-2-3",
        b"\x00",
    ]
)
garbage_number = st.sampled_from(
    [b"", b"abc", b"1.5", b"-0", b"01", b" 1", b"9223372036854775808", b"0x10"]
)
small_count = st.one_of(st.integers(-2, 5).map(num), garbage_number)
good_count = st.integers(0, 5).map(num)
mostly_good_count = rarely(good_count, small_count)
key_index = st.sampled_from([0, 0, 0, 1, 1, 2])
any_key_index = rarely(key_index, st.just(NKEYS))
group_key = weighted((4, st.just(0)), (2, any_key_index))
group = rarely(
    st.sampled_from([GROUPS[0], GROUPS[0], GROUPS[0], GROUPS[1]]),
    st.sampled_from([b"nogroup", b"g\x00x", b"\xffg"]),
)
consumer = st.sampled_from(CONSUMERS)
# Thresholds far from any real idle time: 0, 10**9 ms (every TIME/IDLE-set entry passes, no
# fresh one does), and never.
min_idle = rarely(st.sampled_from([b"0", b"0", b"1000000000", b"5000000000000"]), small_count)


def above_top(k: int) -> st.SearchStrategy[Near]:
    return st.builds(
        Near,
        st.just(k),
        st.none(),
        st.sampled_from([1, 1, 0, 2]),
        st.sampled_from([1, 1, 2, 0, -1]),
        st.sampled_from(["full", "full", "ms", "ms-*"]),
    )


def on_entry(k: int, forms: list[str]) -> st.SearchStrategy[Near]:
    return st.builds(
        Near,
        st.just(k),
        st.integers(0, 40),
        st.sampled_from([0, 0, 0, 1]),
        st.integers(-1, 1),
        st.sampled_from(forms),
    )


def exact_entry(k: int) -> st.SearchStrategy[Near]:
    return st.builds(Near, st.just(k), st.integers(0, 40), st.just(0), st.just(0), st.just("full"))


def valid_id(k: int) -> st.SearchStrategy[Arg]:
    return weighted((3, exact_entry(k)), (2, on_entry(k, ["full", "ms"])), (1, literal_id))


def any_id(k: int) -> st.SearchStrategy[Arg]:
    return rarely(valid_id(k), bad_id)


@st.composite
def trim_options(draw: st.DrawFn, k: int, *, required: bool) -> list[Arg]:
    out: list[Arg] = []
    if required or draw(st.integers(0, 4)) == 0:
        op: list[Arg] = draw(st.sampled_from([[], [b"="], [b"~"]]))
        if draw(st.booleans()):
            maxlen = rarely(st.integers(1, 12).map(num), st.one_of(st.just(b"0"), small_count))
            out += [draw(case("maxlen"))] + op + [draw(maxlen)]
        else:
            out += [draw(case("minid"))] + op + [draw(any_id(k))]
    roll = draw(st.integers(0, 29))
    if roll == 0:
        out += [b"LIMIT", draw(small_count)]
    elif roll <= 8 and len(out) > 1 and out[1] == b"~":
        out += [b"LIMIT", draw(mostly_good_count)]
    return out


@st.composite
def xadd(draw: st.DrawFn) -> Command:
    k = draw(key_index)
    args: Command = [draw(case("xadd")), Key(k)]
    if draw(st.integers(0, 7)) == 0:
        args.append(b"NOMKSTREAM")
    args += draw(trim_options(k, required=False))
    xadd_id: st.SearchStrategy[Arg] = weighted(
        (8, above_top(k)),
        (3, st.just(b"*")),
        (1, literal_id),
        (1, bad_id),
        (1, st.sampled_from([b"0-*", b"5-*"])),
    )
    args.append(draw(xadd_id))
    pairs = draw(st.integers(1, 2))
    for _ in range(pairs):
        args += [draw(st.sampled_from([b"f", b"g", b""])), draw(st.binary(max_size=3))]
    if draw(st.integers(0, 29)) == 0:
        args.pop()
    return args


@st.composite
def xrange(draw: st.DrawFn) -> Command:
    k = draw(any_key_index)

    def bound() -> st.SearchStrategy[Arg]:
        return weighted(
            (3, st.sampled_from([b"-", b"+"])),
            (3, valid_id(k)),
            (2, on_entry(k, ["(full", "(ms"])),
            (1, st.sampled_from([b"(-", b"(+", b"(0-0", b"(" + MAX_ID])),
            (1, bad_id),
        )

    args: Command = [draw(st.one_of(case("xrange"), case("xrevrange"))), Key(k)]
    args += [draw(bound()), draw(bound())]
    roll = draw(st.integers(0, 9))
    if roll <= 3:
        args += [draw(case("count")), draw(mostly_good_count)]
    elif roll == 4:
        args += [draw(st.sampled_from([b"COUNT", b"foo"]))]
    return args


@st.composite
def read_streams(draw: st.DrawFn, special: list[bytes]) -> Command:
    nkeys = draw(st.sampled_from([1, 1, 1, 2, 3]))
    keys = [draw(weighted((4, st.just(0)), (2, any_key_index))) for _ in range(nkeys)]
    ids: Command = [
        draw(weighted((6, st.sampled_from(special)), (2, valid_id(k)), (1, bad_id))) for k in keys
    ]
    out: Command = [draw(case("streams")), *[Key(k) for k in keys], *ids]
    if draw(st.integers(0, 29)) == 0:
        out.pop()  # unbalanced
    return out


@st.composite
def xread(draw: st.DrawFn) -> Command:
    args: Command = [draw(case("xread"))]
    roll = draw(st.integers(0, 19))
    if roll <= 8:
        args += [draw(case("count")), draw(mostly_good_count)]
    elif roll == 9:
        args += [b"BLOCK", draw(st.sampled_from([b"-1", b"abc", b""]))]
    elif roll == 10:
        args += [draw(st.sampled_from([b"NOACK", b"foo", b"COUNT"]))]
    return args + draw(read_streams([b"0", b"0", b"$", b">", b"+"]))


@st.composite
def xdel(draw: st.DrawFn) -> Command:
    k = draw(any_key_index)
    head: Command = [draw(case("xdel")), Key(k)]
    return head + draw(st.lists(any_id(k), min_size=1, max_size=3))


@st.composite
def xtrim(draw: st.DrawFn) -> Command:
    k = draw(any_key_index)
    args: Command = [draw(case("xtrim")), Key(k)]
    args += draw(trim_options(k, required=draw(st.integers(0, 19)) > 0))
    if len(args) < 4 or draw(st.integers(0, 19)) == 0:
        args.append(b"foo")
    return args


@st.composite
def xsetid(draw: st.DrawFn) -> Command:
    k = draw(any_key_index)
    args: Command = [draw(case("xsetid")), Key(k)]
    args.append(draw(weighted((3, above_top(k)), (2, valid_id(k)), (1, bad_id))))
    if draw(st.integers(0, 4)) == 0:
        args += [b"ENTRIESADDED", draw(st.integers(0, 60).map(num))]
    if draw(st.integers(0, 6)) == 0:
        args += [b"MAXDELETEDID", draw(valid_id(k))]
    return args


@st.composite
def xgroup(draw: st.DrawFn) -> Command:
    k = draw(group_key)
    sub = draw(
        weighted(
            (5, st.just("create")),
            (2, st.just("setid")),
            (2, st.just("destroy")),
            (2, st.just("createconsumer")),
            (2, st.just("delconsumer")),
            (1, st.just("other")),
        )
    )
    if sub == "other":
        return draw(
            st.sampled_from(
                [
                    [b"XGROUP"],
                    [b"XGROUP", b"FOO", Key(k)],
                    [b"XGROUP", b"HELP"],
                    [b"XGROUP", b"CREATE", Key(k)],
                    [b"XGROUP", b"DESTROY", Key(k)],
                    [b"XGROUP", b"CREATECONSUMER", Key(k), b"g1"],
                    [b"XGROUP", b"CREATE", Key(k), b"g1", b"0", b"F\xffOO"],
                ]
            )
        )
    args: Command = [draw(case("xgroup")), draw(case(sub)), Key(k), draw(group)]
    start = weighted((3, st.sampled_from([b"$", b"0"])), (2, valid_id(k)), (1, bad_id))
    if sub == "create":
        args.append(draw(start))
        if draw(st.integers(0, 2)) == 0:
            args.append(b"MKSTREAM")
        if draw(st.integers(0, 4)) == 0:
            args += [b"ENTRIESREAD", draw(rarely(st.integers(-1, 6).map(num), small_count))]
    elif sub == "setid":
        args.append(draw(start))
        if draw(st.integers(0, 3)) == 0:
            args += [b"ENTRIESREAD", draw(rarely(st.integers(-1, 6).map(num), small_count))]
    elif sub in ("createconsumer", "delconsumer"):
        args.append(draw(consumer))
    return args


@st.composite
def xreadgroup(draw: st.DrawFn) -> Command:
    args: Command = [draw(case("xreadgroup"))]
    if draw(st.integers(0, 29)) > 0:
        args += [b"GROUP", draw(group), draw(consumer)]
    if draw(st.integers(0, 2)) == 0:
        args += [b"COUNT", draw(mostly_good_count)]
    if draw(st.integers(0, 5)) == 0:
        args.append(b"NOACK")
    if draw(st.integers(0, 39)) == 0:
        args += [b"BLOCK", draw(st.sampled_from([b"-1", b"abc"]))]
    return args + draw(read_streams([b">"] * 8 + [b"0", b"0", b"$"]))


@st.composite
def xack(draw: st.DrawFn) -> Command:
    k = draw(group_key)
    ids = draw(st.lists(any_id(k), min_size=1, max_size=3))
    head: Command = [draw(case("xack")), Key(k), draw(group)]
    return head + ids


@st.composite
def xpending(draw: st.DrawFn) -> Command:
    k = draw(group_key)
    args: Command = [draw(case("xpending")), Key(k), draw(group)]
    if draw(st.integers(0, 3)) == 0:
        return args
    if draw(st.integers(0, 3)) == 0:
        args += [b"IDLE", draw(min_idle)]
    bound = weighted((2, st.sampled_from([b"-", b"+"])), (2, valid_id(k)), (1, bad_id))
    args += [draw(bound), draw(bound), draw(mostly_good_count)]
    if draw(st.booleans()):
        args.append(draw(consumer))
    if draw(st.integers(0, 29)) == 0:
        args.append(b"extra")
    return args


@st.composite
def xclaim(draw: st.DrawFn) -> Command:
    k = draw(group_key)
    args: Command = [draw(case("xclaim")), Key(k), draw(group), draw(consumer), draw(min_idle)]
    args += draw(st.lists(any_id(k), min_size=1, max_size=3))
    if draw(st.integers(0, 4)) > 0:
        args.append(b"JUSTID")
    options = [
        [b"FORCE"],
        [b"IDLE", b"0"],
        [b"IDLE", b"100"],
        [b"IDLE", b"2000000000"],
        [b"IDLE", b"-5"],
        [b"TIME", b"1"],
        [b"TIME", b"2000000000"],
        [b"TIME", b"x"],
        [b"RETRYCOUNT", b"7"],
        [b"RETRYCOUNT", b"-1"],
        [b"LASTID", b"5-0"],
        [b"foo"],
        [b"\xff\x00x"],
    ]
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        args += draw(st.sampled_from(options))
    return args


@st.composite
def xautoclaim(draw: st.DrawFn) -> Command:
    k = draw(group_key)
    args: Command = [draw(case("xautoclaim")), Key(k), draw(group), draw(consumer)]
    args += [draw(min_idle), draw(weighted((2, st.just(b"0-0")), (2, valid_id(k)), (1, bad_id)))]
    if draw(st.booleans()):
        args += [b"COUNT", draw(rarely(st.integers(1, 4).map(num), small_count))]
    if draw(st.booleans()):
        args.append(b"JUSTID")
    return args


@st.composite
def xinfo(draw: st.DrawFn) -> Command:
    k = draw(group_key)
    which = draw(st.sampled_from(["groups", "consumers", "stream", "full", "other"]))
    if which == "groups":
        return [b"XINFO", draw(case("groups")), Key(k)]
    if which == "consumers":
        return [b"XINFO", draw(case("consumers")), Key(k), draw(group)]
    if which == "stream":
        return [b"XINFO", draw(case("stream")), Key(k)]
    if which == "full":
        tail: Command = draw(
            st.sampled_from(
                [
                    [],
                    [b"COUNT", b"0"],
                    [b"COUNT", b"1"],
                    [b"COUNT", b"-1"],
                    [b"COUNT"],
                    [b"COUNT", b"x"],
                ]
            )
        )
        return [b"XINFO", b"STREAM", Key(k), b"FULL", *tail]
    return draw(
        st.sampled_from(
            [
                [b"XINFO"],
                [b"XINFO", b"FOO"],
                [b"XINFO", b"HELP"],
                [b"XINFO", b"STREAM", Key(k), b"foo"],
                [b"XINFO", b"GROUPS"],
            ]
        )
    )


def keys_command(word: str) -> st.SearchStrategy[Command]:
    return st.builds(
        lambda name, keys: [name, *[Key(k) for k in keys]],
        case(word),
        st.lists(any_key_index, min_size=1, max_size=3),
    )


WRONG_ARITY: list[Command] = [
    [b"XLEN"],
    [b"XADD", Key(0)],
    [b"XRANGE", Key(0), b"-"],
    [b"XDEL", Key(0)],
    [b"XTRIM", Key(0), b"MAXLEN"],
    [b"XSETID", Key(0)],
    [b"TYPE"],
    [b"DEL"],
    [b"EXISTS"],
    [b"XREAD", b"STREAMS", Key(0)],
    [b"XACK", Key(0), b"g1"],
    [b"XPENDING", Key(0)],
    [b"XCLAIM", Key(0), b"g1", b"c1", b"0"],
    [b"XAUTOCLAIM", Key(0), b"g1", b"c1", b"0"],
    [b"XREADGROUP", b"GROUP", b"g1", b"c1", b"STREAMS", Key(0)],
    [b"XINFO", b"GROUPS", Key(0), b"x"],
    [b"XINFO", b"CONSUMERS", Key(0)],
]

command: st.SearchStrategy[Command] = weighted(
    (10, xadd()),
    (1, st.builds(lambda name, k: [name, Key(k)], case("xlen"), any_key_index)),
    (2, xrange()),
    (2, xread()),
    (2, xdel()),
    (2, xtrim()),
    (1, xsetid()),
    (1, keys_command("del")),
    (1, keys_command("exists")),
    (1, st.builds(lambda name, k: [name, Key(k)], case("type"), any_key_index)),
    (4, xgroup()),
    (10, xreadgroup()),
    (4, xack()),
    (3, xpending()),
    (3, xclaim()),
    (2, xautoclaim()),
    (2, xinfo()),
    (1, st.sampled_from(WRONG_ARITY)),
)


@st.composite
def history(draw: st.DrawFn) -> list[Command]:
    """A few entries and a group or two first, so that most group commands find something."""
    setup: list[Command] = []
    for k in range(draw(st.integers(1, NKEYS))):
        for _ in range(draw(st.integers(0, 4))):
            setup.append([b"XADD", Key(k), draw(above_top(k)), b"f", b"v"])
    for k in range(draw(st.integers(1, NKEYS))):
        for name in GROUPS[: draw(st.integers(1, 2))]:
            start = draw(st.sampled_from([b"0", b"0", b"$"]))
            setup.append([b"XGROUP", b"CREATE", Key(k), name, start, b"MKSTREAM"])
    return setup + draw(st.lists(command, min_size=20, max_size=60))


# --- RESP values, parsed and re-encoded exactly --------------------------------------------------


class Incomplete(Exception):
    pass


@dataclass
class Value:
    """One RESP value: `kind` is its type byte; `data` bytes (simple, bulk, error, double...),
    int, a list of Values (array, set, push), a list of (Value, Value) (map), or None (nulls)."""

    kind: bytes
    data: Any


def parse(buf: bytes, pos: int = 0) -> tuple[Value, int]:
    if pos >= len(buf):
        raise Incomplete
    kind = buf[pos : pos + 1]
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Incomplete
    body, pos = buf[pos + 1 : end], end + 2
    if kind in (b"+", b"-", b",", b"#", b"("):
        return Value(kind, body), pos
    if kind == b":":
        return Value(kind, int(body)), pos
    if kind == b"_":
        return Value(kind, None), pos
    if kind in (b"$", b"="):
        n = int(body)
        if n < 0:
            return Value(kind, None), pos
        return Value(kind, buf[pos : pos + n]), pos + n + 2
    if kind in (b"*", b"~", b">"):
        n = int(body)
        if n < 0:
            return Value(kind, None), pos
        items = []
        for _ in range(n):
            item, pos = parse(buf, pos)
            items.append(item)
        return Value(kind, items), pos
    if kind == b"%":
        pairs = []
        for _ in range(int(body)):
            k, pos = parse(buf, pos)
            v, pos = parse(buf, pos)
            pairs.append((k, v))
        return Value(kind, pairs), pos
    raise AssertionError(f"unexpected RESP type {kind!r} in {buf!r}")


def dump(value: Value) -> bytes:
    kind, data = value.kind, value.data
    if data is None:
        return b"_\r\n" if kind == b"_" else kind + b"-1\r\n"
    if kind in (b"+", b"-", b",", b"#", b"("):
        return kind + bytes(data) + b"\r\n"
    if kind == b":":
        return b":%d\r\n" % data
    if kind in (b"$", b"="):
        return kind + b"%d\r\n" % len(data) + bytes(data) + b"\r\n"
    if kind in (b"*", b"~", b">"):
        return kind + b"%d\r\n" % len(data) + b"".join(dump(v) for v in data)
    assert kind == b"%"
    return b"%%%d\r\n" % len(data) + b"".join(dump(k) + dump(v) for k, v in data)


def pairs_of(value: Value) -> list[tuple[Value, Value]]:
    """A key/value reply as pairs, whether a RESP3 map or a RESP2 flat array."""
    if value.kind == b"%":
        return list(value.data)
    if value.kind == b"*" and value.data and len(value.data) % 2 == 0:
        items = value.data
        return [(items[i], items[i + 1]) for i in range(0, len(items), 2)]
    return []


def field_value(value: Value, name: bytes) -> Value | None:
    for k, v in pairs_of(value):
        if k.data == name:
            return v
    return None


# --- clock-bearing numbers ---------------------------------------------------------------------


def clock_values(args: list[bytes], reply: Value) -> list[Value]:
    """The integers of `reply` that come from a clock (to compare within CLOCK_SLACK_MS)."""
    name = [a.upper() for a in args[:2]]
    found: list[Value] = []

    def rows(value: Value | None, column: int) -> None:
        if value is not None and value.kind == b"*" and value.data:
            for row in value.data:
                if row.kind == b"*" and row.data and len(row.data) > column:
                    found.append(row.data[column])

    if reply.kind == b"-":
        return found
    if name[0] == b"XPENDING" and len(args) > 3:
        rows(reply, 2)
    elif name == [b"XINFO", b"CONSUMERS"] and reply.kind == b"*":
        for row in reply.data or []:
            idle = field_value(row, b"idle")
            if idle is not None:
                found.append(idle)
    elif name == [b"XINFO", b"STREAM"] and len(args) > 3:
        groups = field_value(reply, b"groups")
        for grp in (groups.data or []) if groups is not None else []:
            rows(field_value(grp, b"pending"), 2)
            consumers = field_value(grp, b"consumers")
            for cons in (consumers.data or []) if consumers is not None else []:
                seen = field_value(cons, b"seen-time")
                if seen is not None:
                    found.append(seen)
                rows(field_value(cons, b"pending"), 1)
    return [v for v in found if v.kind == b":"]


# --- one side: a connection and what we know about its keys -------------------------------------


def query(conn: RawClient, args: list[bytes]) -> Any:
    reader = hiredis.Reader()
    reader.feed(conn.call(args))
    return reader.gets()


def parse_id_text(raw: bytes) -> StreamID | None:
    """A canonical ID from a strict `ms` or `ms-seq` text (None for anything else)."""
    head, _, tail = raw.partition(b"-")
    if not head.isdigit() or (tail and not tail.isdigit()):
        return None
    return int(head), int(tail or b"0")


def id_text(sid: StreamID) -> bytes:
    return b"%d-%d" % sid


@dataclass
class Side:
    name: str
    conn: RawClient  # the example's connection, RESP2 or RESP3
    probe: RawClient  # RESP2, for looking at state
    cache: dict[bytes, tuple[list[StreamID], StreamID | None]] = field(default_factory=dict)

    def state(self, key: bytes) -> tuple[list[StreamID], StreamID | None]:
        """(entry IDs in order, last ID or None) of `key` as this side holds it."""
        if key not in self.cache:
            entries = query(self.probe, [b"XRANGE", key, b"-", b"+"])
            ids = [parse_id_text(e[0]) for e in entries]
            info = query(self.probe, [b"XINFO", b"STREAM", key])
            top = None
            if isinstance(info, list):
                raw = dict(zip(info[::2], info[1::2], strict=True))[b"last-generated-id"]
                top = parse_id_text(raw)
            self.cache[key] = ([i for i in ids if i is not None], top)
        return self.cache[key]

    def resolve(self, near: Near, key: bytes, clocked: bool) -> bytes:
        entries, top = self.state(key)
        dms, dseq, form = near.dms, near.dseq, near.form
        base: StreamID = (0, 0)
        if near.anchor is None:
            base = top or (0, 0)
            if clocked and dms == 0 and (dseq <= 0 or form == "ms"):
                dseq, form = 0, "full"  # exactly the top: both sides equally refuse or accept
        else:
            if entries:
                base = entries[near.anchor % len(entries)]
            if clocked:
                dms, dseq = 0, 0
                form = "(full" if form.startswith("(") else "full"
        ms = min(base[0] + dms, U64_MAX)
        seq = max(0, min(base[1] + dseq if dms == 0 else dseq, U64_MAX))
        if form.endswith("ms-*"):
            text = b"%d-*" % ms
        elif form.endswith("ms"):
            text = b"%d" % ms
        else:
            text = b"%d-%d" % (ms, seq)
        return b"(" + text if form.startswith("(") else text


# --- the differential run ----------------------------------------------------------------------


WRITES = frozenset(b"xadd xdel xtrim xsetid del xgroup xreadgroup xack xclaim xautoclaim".split())


@dataclass
class Differential:
    node: Side
    redis: Side
    keys: list[bytes]
    proto: int
    # Per key: the node's ID -> redis's ID, for IDs that differ between the two (clock IDs).
    xlat: dict[bytes, dict[bytes, bytes]] = field(default_factory=dict)
    last_added: dict[bytes, bytes] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def fail(self, message: str) -> NoReturn:
        history = "\n".join(self.log[-50:])
        raise AssertionError(f"{message}\nproto {self.proto}; history (node side):\n{history}")

    def clocked(self, key: bytes) -> bool:
        return any(a != b for a, b in self.xlat.get(key, {}).items())

    def resolve(self, cmd: Command) -> tuple[list[bytes], list[bytes]]:
        node: list[bytes] = []
        redis: list[bytes] = []
        for arg in cmd:
            if isinstance(arg, Key):
                node.append(self.keys[arg.index])
                redis.append(self.keys[arg.index])
            elif isinstance(arg, Near):
                key = self.keys[arg.key]
                clocked = self.clocked(key)
                node.append(self.node.resolve(arg, key, clocked))
                redis.append(self.redis.resolve(arg, key, clocked))
            else:
                node.append(arg)
                redis.append(arg)
        return node, redis

    def step(self, cmd: Command) -> None:
        node_args, redis_args = self.resolve(cmd)
        name = node_args[0].lower()
        if self._sent_to_neither(name, redis_args):
            self.log.append(f"  skipped {node_args!r}")
            return
        ours = redis7_view(self.node.conn.call(node_args))
        self.log.append(f"{node_args!r} -> {ours!r}")
        if name == b"xsetid" and ours == _error(errors.XSETID_BELOW_LAST):
            return  # active-active never moves the last ID back; Redis would
        theirs = self.redis.conn.call(redis_args)
        if name in WRITES:
            self.node.cache.clear()
            self.redis.cache.clear()
        self._learn(cmd, node_args, redis_args, ours, theirs)
        self._compare(node_args, ours, theirs)
        self._after(cmd)

    def _sent_to_neither(self, name: bytes, args: list[bytes]) -> bool:
        if name == b"xtrim" and b"~" in args and any(a.lower() == b"minid" for a in args):
            key = args[1]
            last = self.last_added.get(key)
            return last is not None and not query(self.redis.probe, [b"XRANGE", key, last, last])
        return False

    def _learn(
        self,
        cmd: Command,
        node_args: list[bytes],
        redis_args: list[bytes],
        ours: bytes,
        theirs: bytes,
    ) -> None:
        """Pair the node's clock IDs with redis's: XADD replies, and the IDs XSETID, XGROUP
        CREATE / SETID and XCLAIM LASTID set (XINFO shows them)."""
        name = node_args[0].lower()
        if ours.startswith(b"-") or theirs.startswith(b"-"):
            return
        if name == b"xadd" and ours.startswith(b"$") and theirs.startswith(b"$"):
            key = node_args[1]
            mine, their = parse(ours)[0].data, parse(theirs)[0].data
            if mine is not None and their is not None:
                self._check_clock_pair(node_args, mine, their)
                self.xlat.setdefault(key, {}).setdefault(mine, their)
                self.last_added[key] = their
            return
        if name not in (b"xsetid", b"xgroup", b"xclaim"):
            return
        for arg, mine_raw, their_raw in zip(cmd, node_args, redis_args, strict=True):
            if isinstance(arg, Near) and mine_raw != their_raw:
                mine_id, their_id = parse_id_text(mine_raw), parse_id_text(their_raw)
                if mine_id is not None and their_id is not None:
                    key = self.keys[arg.key]
                    self.xlat.setdefault(key, {}).setdefault(id_text(mine_id), id_text(their_id))

    def _check_clock_pair(self, args: list[bytes], mine: bytes, their: bytes) -> None:
        """Two different IDs for the same XADD may differ only as two clocks read at about the
        same time do: in the millisecond part by at most CLOCK_SLACK_MS, and in the sequence."""
        if mine == their:
            return
        mine_id, their_id = parse_id_text(mine), parse_id_text(their)
        if mine_id is None or their_id is None or abs(mine_id[0] - their_id[0]) > CLOCK_SLACK_MS:
            self.fail(f"{args!r}: node generated {mine!r}, redis {their!r}")

    def _translate(self, args: list[bytes], reply: Value) -> Value:
        """The node's reply with its clock IDs replaced by redis's, key by key."""
        name = args[0].lower()
        if name in (b"xread", b"xreadgroup"):
            if reply.kind == b"%":
                reply.data = [(k, self._ids(v, self.xlat.get(k.data, {}))) for k, v in reply.data]
            elif reply.kind == b"*" and reply.data:
                for pair in reply.data:
                    pair.data[1] = self._ids(pair.data[1], self.xlat.get(pair.data[0].data, {}))
            return reply
        key_at = 2 if name in (b"xinfo", b"xgroup") else 1
        table = self.xlat.get(args[key_at], {}) if len(args) > key_at else {}
        return self._ids(reply, table)

    def _ids(self, value: Value, table: dict[bytes, bytes]) -> Value:
        if not table:
            return value
        if value.kind in (b"$", b"+") and value.data in table:
            value.data = table[value.data]
        elif value.kind in (b"*", b"~") and value.data:
            value.data = [self._ids(v, table) for v in value.data]
        elif value.kind == b"%":
            value.data = [(self._ids(k, table), self._ids(v, table)) for k, v in value.data]
        return value

    def _alike(self, args: list[bytes], ours: bytes, theirs: bytes) -> bool:
        """Equal once the node's clock IDs are translated and clock values are within slack."""
        mine = self._translate(args, parse(ours)[0])
        their = parse(theirs)[0]
        for a, b in zip(clock_values(args, mine), clock_values(args, their), strict=False):
            if abs(a.data - b.data) <= CLOCK_SLACK_MS:
                a.data = b.data
        if [a.upper() for a in args[:2]] == [b"XINFO", b"STREAM"]:
            _kept_empty_node(mine, their)
        return dump(mine) == theirs

    def _compare(self, args: list[bytes], ours: bytes, theirs: bytes) -> None:
        if ours == theirs or self._alike(args, ours, theirs):
            return
        name = args[0].lower()
        if (
            name == b"xadd"
            and ours == _error(errors.XADD_ID_TOO_SMALL)
            and theirs == REDIS_70_SEQ_OVERFLOW
            and any(a.endswith(b"-*") for a in args)
        ):
            return
        self.fail(f"{args!r}:\n  node  {ours!r}\n  redis {theirs!r}")

    def _after(self, cmd: Command) -> None:
        """Keep both sides alike: a husk (empty stream Redis keeps) is deleted on both; then the
        entries of every key must be equal."""
        for key in self.keys:
            exists = query(self.redis.probe, [b"EXISTS", key])
            if exists and query(self.redis.probe, [b"XLEN", key]) == 0:
                info = query(self.redis.probe, [b"XINFO", b"STREAM", key])
                groups = dict(zip(info[::2], info[1::2], strict=True))[b"groups"]
                if groups == 0:
                    self.node.probe.call([b"DEL", key])
                    self.redis.probe.call([b"DEL", key])
                    self.node.cache.clear()
                    self.redis.cache.clear()
                    self.xlat.pop(key, None)
                    self.last_added.pop(key, None)
                    self.log.append(f"  (husk {key!r} deleted on both sides)")
            for probe in PROBES(key):
                ours = redis7_view(self.node.probe.call(probe))
                theirs = self.redis.probe.call(probe)
                if ours != theirs and not self._alike(probe, ours, theirs):
                    self.fail(
                        f"after the step, {probe!r} differs:\n  node  {ours!r}\n  redis {theirs!r}"
                    )


def _kept_empty_node(mine: Value, their: Value) -> None:
    """An empty stream (it has groups, or it would be gone) shows radix-tree-keys 1 / nodes 2 in
    Redis when its last entries were trimmed while the node's last entry had been XDELed before
    (the node stays); our estimate from the length says 0 / 1, as for every other empty stream.
    Accept exactly that pair."""
    length = field_value(their, b"length")
    if length is None or length.data != 0:
        return
    names = (b"radix-tree-keys", b"radix-tree-nodes")
    mine_layout = [field_value(mine, name) for name in names]
    their_layout = [field_value(their, name) for name in names]
    shown = ([v.data for v in mine_layout if v], [v.data for v in their_layout if v])
    if shown == ([0, 1], [1, 2]):
        for m, t in zip(mine_layout, their_layout, strict=True):
            assert m is not None and t is not None
            m.data = t.data


def PROBES(key: bytes) -> list[list[bytes]]:  # noqa: N802 (a table, read like a constant)
    """What must be equal on both sides after every step."""
    return [
        [b"XRANGE", key, b"-", b"+"],
        [b"XINFO", b"STREAM", key, b"FULL", b"COUNT", b"0"],
        [b"XINFO", b"GROUPS", key],
    ]


def _error(text: str) -> bytes:
    return b"-%s\r\n" % text.encode()


REDIS_70_SEQ_OVERFLOW = _error("ERR Elements are too large to be stored")


# --- fixtures and the test ---------------------------------------------------------------------


SHAPES = {"one-shard": (1, 1), "4-shards": (4, 1), "4-shards-2-nodes": (4, 2)}
"""The region under test as (shards, node processes). In one process the example's keys fall in
different shards (multi-key commands run across shards); over two processes they share a hash
tag, as a cluster client's keys must, and the example talks to the node serving that slot."""


@dataclass
class Region:
    """The node side: one region of the given shape, and which node serves which key."""

    topo: LocalTopology
    nodes: int

    def keys(self, run_id: int) -> list[bytes]:
        tag = b"n%d.%d" % (int(time.time()), run_id)
        if self.nodes > 1:
            tag = b"{%s}" % tag
        return [b"%s:k%d" % (tag, i) for i in range(NKEYS + 1)]

    def port(self, key: bytes) -> int:
        assert self.topo.topology is not None
        region = self.topo.topology.region("r1")
        return region.owner(shard_of(key, self.topo.topology.shards)).resp_port


@pytest.fixture(scope="module", params=list(SHAPES))
def region(request: pytest.FixtureRequest) -> Iterator[Region]:
    shards, nodes = SHAPES[request.param]
    with LocalTopology(
        regions=1, manual_sync=True, id_mode="liberal", shards=shards, nodes=nodes
    ) as topo:
        yield Region(topo, nodes)


@pytest.fixture(scope="module")
def node_port() -> Iterator[int]:
    with LocalTopology(regions=1, manual_sync=True, id_mode="liberal") as topo:
        yield topo.ports[1]


@settings(
    max_examples=60,
    deadline=None,
    # No shrinking: every example writes through Kafka, and shrinking one takes minutes. A
    # failure reports the command that differed with the history of the example before it.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(history=history(), proto=st.sampled_from([2, 3]))
def test_node_replies_equal_redis_byte_for_byte(
    redis_server: RedisServer,
    region: Region,
    history: list[Command],
    proto: int,
) -> None:
    """One region of each shape (`SHAPES`) answers like redis-server."""
    run_example(region, redis_server, history, proto)


def run_example(
    region: Region, redis_server: RedisServer, history: list[Command], proto: int
) -> None:
    """One generated history, step by step on both sides (fresh keys of the example's own)."""
    keys = region.keys(next(_examples))
    port = region.port(keys[0])
    node_conn, redis_conn = RawClient(port), redis_server.connect()
    probes = (RawClient(port), redis_server.connect())
    try:
        if proto == 3:
            for conn in (node_conn, redis_conn):
                assert conn.call([b"HELLO", b"3"]).startswith(b"%")
        diff = Differential(
            Side("node", node_conn, probes[0]), Side("redis", redis_conn, probes[1]), keys, proto
        )
        for cmd in history:
            diff.step(cmd)
    finally:
        redis_conn.call([b"DEL", *keys])
        for conn in (node_conn, redis_conn, *probes):
            conn.close()


# --- client bytes quoted in error texts ----------------------------------------------------------

# Redis quotes names and options with `%s`: the text stops at a NUL byte, other bytes go out as
# they came (UTF-8 or not). Each case runs on a fresh key of both servers.
QUOTING_CASES: list[list[bytes]] = [
    [b"XPENDING", b"{k}\x00z\xff", b"g\x00\xffy"],
    [b"XPENDING", b"{k}\xffz", b"g\xffy"],
    [b"XREADGROUP", b"GROUP", b"g\xff\x00y", b"c", b"STREAMS", b"{k}\xff", b">"],
    [b"XINFO", b"CONSUMERS", b"{k}", b"g\xff\x00y"],
    [b"XGROUP", b"SETID", b"{k}", b"g\xff\x00y", b"0"],
    [b"XGROUP", b"CREATE", b"{k}", b"g", b"0", b"FOO\xff"],
    [b"XINFO", b"STREAM", b"{k}", b"F\xffULL"],
    [b"XCLAIM", b"{k}", b"g", b"c", b"0", b"0-1", b"\xff\x00"],
    [b"XCLAIM", b"{k}", b"g", b"c", b"0", b"0-1", b"JUSTID", b"op\xfft\x00ion"],
    [b"XAUTOCLAIM", b"{k}", b"g\x00x", b"c", b"0", b"0-0"],
    [b"XACK", b"{k}", b"g\xff", b"0-1"],
]
SUBCOMMAND_CASES: list[list[bytes]] = [
    # Not `CREATE\x00...`: Redis hashes the whole name with a random seed but compares it as a C
    # string, so a valid name before the NUL is found in about one bucket in eight (random).
    [b"XGROUP", b"CRE\x00\xffATE", b"{k}"],
    [b"XINFO", b"STR\x00EAM", b"{k}"],
    [b"XINFO", b"ST\xffREAM" + b"x" * 200, b"{k}"],
]


def _quoting_diffs(
    node_port: int, redis_server: RedisServer, cases: list[list[bytes]]
) -> list[str]:
    node, redis = RawClient(node_port), redis_server.connect()
    wrong: list[str] = []
    try:
        for i, case_args in enumerate(cases):
            key = b"q%s.%d:k" % (uuid.uuid4().hex.encode(), i)
            setup = [[b"XADD", key, b"0-1", b"f", b"v"], [b"XGROUP", b"CREATE", key, b"g", b"0"]]
            for args in setup:
                assert node.call(args) == redis.call(args)
            args = [a.replace(b"{k}", key) for a in case_args]
            ours, theirs = node.call(args), redis.call(args)
            if ours != theirs:
                wrong.append(f"{args!r}:\n  node  {ours!r}\n  redis {theirs!r}")
            redis.call([b"DEL", key, key + b"\xff", key + b"\x00z\xff", key + b"\xffz"])
    finally:
        node.close()
        redis.close()
    return wrong


def test_client_bytes_in_error_texts_are_quoted_as_redis_does(
    node_port: int, redis_server: RedisServer
) -> None:
    wrong = _quoting_diffs(node_port, redis_server, QUOTING_CASES)
    assert not wrong, "\n".join(wrong)


def test_unknown_subcommand_quotes_client_bytes_as_redis_does(
    node_port: int, redis_server: RedisServer
) -> None:
    wrong = _quoting_diffs(node_port, redis_server, SUBCOMMAND_CASES)
    assert not wrong, "\n".join(wrong)
