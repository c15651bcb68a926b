"""Single-region behaviour equals open-source Redis 7.0, byte for byte.

Hypothesis generates command sequences over three keys from the single-region subset (XADD with
explicit, millisecond-only and `ms-*` IDs, NOMKSTREAM, MAXLEN / MINID with `=` and `~`, LIMIT;
XLEN, XRANGE, XREVRANGE, XREAD without BLOCK, XDEL, XTRIM, XSETID, DEL, EXISTS, TYPE) plus
malformed variants (wrong arity, bad IDs, bad options, negative counts, garbage numbers). Every
command runs on `Region(1, IdMode.LIBERAL)` and on a real redis-server (FLUSHALL before each
example); the RESP2 bytes of the two replies must be equal. After every step both sides must also
hold the same entries in every key (XRANGE key - +).

Known deviations, and exactly what the test does about them:

- Empty streams. In our model a key exists iff it has an entry or a group (README.md,
  "Differences from open-source Redis 7"), so a stream emptied by XDEL, XTRIM or MAXLEN 0
  disappears, while Redis keeps an empty stream (its last ID included, which our model also
  keeps for ID generation). For a key that Redis holds as an empty stream (EXISTS 1 and XLEN 0
  after the previous step):
  * EXISTS and DEL: Redis counts the key, we do not; the test adds those keys to our count
    before comparing.
  * TYPE: Redis answers `stream`, we answer `none`; the test checks exactly that.
  * XRANGE / XREVRANGE with COUNT 0: Redis answers a null array (`*-1`), we answer an empty
    array (`*0`, as for a missing key); the test checks exactly that.
  * XDEL: Redis parses the IDs of an existing key (so a bad ID is an error), we answer 0 for a
    missing key first, as Redis does for a missing key; the test accepts Redis's error there.
  * XSETID and XADD NOMKSTREAM change Redis's empty stream (last ID, a new entry) but answer
    `no such key` / nil here: such a step is sent to neither side.
  (XINFO would differ too; it is not part of this subset.)
- XSETID never moves the last ID back in active-active streams (seed 000, "XSETID fails when the
  new ID is less than current ID"). When our model refuses with that error, the step is not sent
  to Redis (which would accept it and move its last ID back).
- XADD `ms-*` when the key's last ID is `ms-18446744073709551615`: Redis 7.0 forgets to set errno
  on that path and answers "Elements are too large to be stored" (later versions answer "equal
  or smaller than the target stream top item", as we do). The test accepts exactly that pair.
- XADD `*` takes the server clock. It is compared only when the key's last ID is far in the
  future (ms >= 10**13), where both sides must give last ID + 1; otherwise the step is skipped.
- Approximate trimming (`~`) removes whole radix-tree nodes; the entry blocks are Redis's nodes
  (deleted slots and the last slot's ID included), so `~` is compared like everything else
  (tests/differential/test_nodes_vs_redis.py covers many nodes, sizes and node limits).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import NoReturn

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import RawClient

from differential.redis8_fields import redis7_view
from streams import errors
from streams.commands.execute import run
from streams.crdt.region import Region
from streams.ids import U64_MAX, IdMode, StreamID, parse_id
from streams.resp.encode import encode

from .redis_server import RedisServer
from .strategies import rarely, weighted

KEYS = (b"k1", b"k2", b"k3")
OTHER_KEYS = KEYS + (b"nokey",)
FUTURE_MS = 10**13

# --- strategies ------------------------------------------------------------------------------
#
# A command is a list of bytes and `Near` placeholders. A placeholder names an ID relative to the
# key's current state (just above its top, or near one of its entries) and is resolved against our
# model right before the step; both sides hold the same entries, so it is the same ID for both.
# This keeps most XADDs valid and most XDEL / XRANGE / MINID arguments on real entries.


@dataclass(frozen=True)
class Near:
    """An ID near the key's state. `anchor` is 'top' (last ID) or an entry index."""

    anchor: int | None  # None: the key's last ID; else index (mod length) into its entries
    dms: int  # added to the anchor's ms
    dseq: int  # added to the anchor's seq when dms == 0, else the seq itself
    form: str  # 'full', 'ms', 'ms-*', '(full', '(ms'

    def resolve(self, region: Region, key: bytes) -> bytes:
        ks = region.state.raw(key)
        base: StreamID = (0, 0)
        if ks is not None:
            if self.anchor is None:
                base = ks.top or (0, 0)
            else:
                found = list(ks.entries.range((0, 0), (U64_MAX, U64_MAX)))
                if found:
                    base = found[self.anchor % len(found)][0]
        ms = base[0] + self.dms
        seq = base[1] + self.dseq if self.dms == 0 else self.dseq
        seq = max(0, min(seq, U64_MAX))
        if self.form.endswith("ms-*"):
            text = b"%d-*" % ms
        elif self.form.endswith("ms"):
            text = b"%d" % ms
        else:
            text = b"%d-%d" % (ms, seq)
        return b"(" + text if self.form.startswith("(") else text


Arg = bytes | Near
Command = list[Arg]

BIG_MS = [2**63 - 1, 2**63, U64_MAX - 1, U64_MAX, FUTURE_MS, FUTURE_MS + 1]
ms_value = st.one_of(st.integers(0, 6), st.integers(0, 6), st.sampled_from(BIG_MS))
seq_value = st.one_of(st.integers(0, 3), st.sampled_from([U64_MAX - 1, U64_MAX]))

full_id = st.builds(lambda ms, seq: b"%d-%d" % (ms, seq), ms_value, seq_value)
ms_only_id = st.builds(lambda ms: b"%d" % ms, ms_value)
ms_star_id = st.builds(lambda ms: b"%d-*" % ms, ms_value)
# Accepted by Redis's string2ull / strtoull leniency (and NUL ends a C string).
lenient_id = st.sampled_from(
    [
        b" 1",
        b"+1",
        b"\t2",
        b"00003",
        b"-0",
        b"1-+2",
        b"1- 1",
        b"-18446744073709551615",
        b"2\x00-9",
        b"3-1\x00x",
        b"000000000000000000000000000004-1",
    ]
)
bad_id = st.one_of(
    st.sampled_from(
        [
            b"",
            b"-",
            b"+",
            b"abc",
            b"1-",
            b"-1",
            b"1--1",
            b"1-a",
            b"18446744073709551616",
            b"1-18446744073709551616",
            b"1 ",
            b"1.5",
            b"(1",
            b"$",
            b">",
            b"*",
            b"1-*",
            b"*-1",
            b"1-2-3",
            b"0x10",
            b"-18446744073709551616",
            b"9" * 130,
            b"\x00",
            b"-\x00",
        ]
    ),
    st.binary(min_size=0, max_size=6),
    st.text(alphabet="0123456789-+*( $>a", max_size=6).map(str.encode),
)


def near(anchor: st.SearchStrategy[int | None], forms: list[str]) -> st.SearchStrategy[Near]:
    return st.builds(
        Near, anchor, st.sampled_from([0, 0, 0, 1, 2]), st.integers(-1, 2), st.sampled_from(forms)
    )


# Just above the key's last ID (now and then equal to or below it: an error).
above_top = st.builds(
    Near,
    st.none(),
    st.sampled_from([1, 0, 0, 2]),
    st.sampled_from([1, 1, 2, 0, 3, -1]),
    st.sampled_from(["full", "full", "ms", "ms-*"]),
)
on_entry = near(st.integers(0, 50), ["full", "full", "ms"])
entry_id = st.builds(Near, st.integers(0, 50), st.just(0), st.just(0), st.just("full"))
literal_id = st.one_of(full_id, ms_only_id, lenient_id)
valid_id: st.SearchStrategy[Arg] = weighted((2, entry_id), (2, on_entry), (1, literal_id))
any_id: st.SearchStrategy[Arg] = rarely(valid_id, bad_id)


garbage_number = st.sampled_from(
    [
        b"",
        b"abc",
        b"1.5",
        b"-0",
        b"01",
        b" 1",
        b"1 ",
        b"+1",
        b"9223372036854775808",
        b"-9223372036854775809",
        b"18446744073709551616",
        b"1e3",
        b"0x10",
        b"--1",
    ]
)
small_count = st.one_of(st.integers(-2, 5).map(lambda n: b"%d" % n), garbage_number)
good_count = st.integers(0, 5).map(lambda n: b"%d" % n)
mostly_good_count = rarely(good_count, small_count)

field_name = st.sampled_from([b"f", b"f", b"g", b"name", b""])
field_value = st.binary(max_size=4)
key = st.sampled_from(KEYS)


def case(word: str) -> st.SearchStrategy[bytes]:
    return st.sampled_from([word.upper().encode(), word.lower().encode(), word.title().encode()])


@st.composite
def trim_options(draw: st.DrawFn, *, required: bool) -> list[Arg]:
    """MAXLEN/MINID [=|~] threshold [LIMIT n], sometimes malformed."""
    out: list[Arg] = []
    if required or draw(st.integers(0, 4)) == 0:
        op: list[Arg] = draw(st.sampled_from([[], [b"="], [b"~"]]))
        if draw(st.booleans()):
            maxlen = rarely(st.integers(0, 8).map(lambda n: b"%d" % n), small_count)
            out += [draw(case("maxlen"))] + op + [draw(maxlen)]
        else:
            out += [draw(case("minid"))] + op + [draw(rarely(valid_id, bad_id))]
    roll = draw(st.integers(0, 39))
    if roll == 0:
        out += [b"LIMIT", draw(small_count)]
    elif roll == 1 and out:
        out += [draw(st.sampled_from([b"MAXLEN", b"MINID"])), b"1"]
    elif roll == 2:
        out = [b"LIMIT", b"5"] + out
    elif roll <= 12 and len(out) > 1 and out[1] == b"~":
        out += [b"LIMIT", draw(mostly_good_count)]
    return out


@st.composite
def xadd(draw: st.DrawFn) -> Command:
    args: Command = [draw(case("xadd")), draw(key)]
    trim = draw(trim_options(required=False))
    nomk: Command = [b"NOMKSTREAM"] if draw(st.integers(0, 5)) == 0 else []
    args += nomk + trim if draw(st.booleans()) else trim + nomk
    rare_id = st.one_of(full_id, ms_only_id, ms_star_id, st.just(b"*"), lenient_id, bad_id)
    args.append(draw(weighted((10, above_top), (1, rare_id))))
    pairs = draw(st.integers(1, 3))
    for _ in range(pairs):
        args += [draw(field_name), draw(field_value)]
    roll = draw(st.integers(0, 29))
    if roll == 0:
        args.pop()  # odd number of field arguments
    elif roll == 1:
        del args[-2 * pairs :]  # no fields at all
    return args


@st.composite
def xrange(draw: st.DrawFn) -> Command:
    bound = weighted(
        (3, st.sampled_from([b"-", b"+"])),
        (3, valid_id),
        (2, near(st.integers(0, 50), ["(full", "(ms"])),
        (
            1,
            st.sampled_from(
                [b"(-", b"(+", b"(", b"(0-0", b"(0", b"(18446744073709551615-18446744073709551615"]
            ),
        ),
        (1, bad_id),
    )
    args: Command = [draw(st.one_of(case("xrange"), case("xrevrange"))), draw(key)]
    args += [draw(bound), draw(bound)]
    roll = draw(st.integers(0, 9))
    if roll <= 3:
        args += [draw(case("count")), draw(mostly_good_count)]
    elif roll == 4:
        args += [draw(st.sampled_from([b"COUNT", b"LIMIT", b"foo"]))]
    elif roll == 5:
        args += [b"COUNT", b"1", b"COUNT", draw(mostly_good_count)]
    return args


@st.composite
def xread(draw: st.DrawFn) -> Command:
    args: Command = [draw(case("xread"))]
    roll = draw(st.integers(0, 29))
    if roll <= 12:
        args += [draw(case("count")), draw(mostly_good_count)]
    elif roll == 13:
        # BLOCK only with values that fail to parse: a valid one could really block.
        args += [b"BLOCK", draw(st.sampled_from([b"-1", b"-100", b"abc", b"1.5", b""]))]
    elif roll == 14:
        args += [b"GROUP", b"g", b"c"]
    elif roll == 15:
        args += [b"NOACK"]
    elif roll == 16:
        args += [b"foo"]
    elif roll == 17:
        args += [b"COUNT"]
    nkeys = draw(st.integers(1, 3))
    keys: Command = [draw(st.sampled_from(OTHER_KEYS)) for _ in range(nkeys)]
    special = st.sampled_from([b"$", b"0", b"0", b">", b"+"])
    read_id = weighted((6, valid_id), (3, special), (1, bad_id))
    ids: Command = [draw(read_id) for _ in range(nkeys)]
    if draw(st.integers(0, 29)) == 0:
        ids.pop()  # unbalanced
    if draw(st.integers(0, 29)) == 0:
        return args + keys + ids  # no STREAMS at all
    return args + [draw(case("streams"))] + keys + ids


@st.composite
def xdel(draw: st.DrawFn) -> Command:
    ids = draw(st.lists(rarely(valid_id, bad_id), min_size=1, max_size=3))
    return [draw(case("xdel")), draw(key)] + ids


@st.composite
def xtrim(draw: st.DrawFn) -> Command:
    args: Command = [draw(case("xtrim")), draw(key)]
    args += draw(trim_options(required=draw(st.integers(0, 19)) > 0))
    if len(args) < 4 or draw(st.integers(0, 19)) == 0:
        args.append(b"foo")
    return args


@st.composite
def xsetid(draw: st.DrawFn) -> Command:
    setid = weighted((3, above_top), (2, valid_id), (1, bad_id))
    args: Command = [draw(case("xsetid")), draw(rarely(key, st.just(b"nokey"))), draw(setid)]
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        option = draw(st.sampled_from([b"ENTRIESADDED", b"entriesadded", b"MAXDELETEDID"]))
        if option.lower() == b"entriesadded":
            value: Arg = draw(st.one_of(st.integers(0, 60).map(lambda n: b"%d" % n), small_count))
        else:
            value = draw(any_id)
        args += [option, value]
    if draw(st.integers(0, 19)) == 0:
        args.append(draw(st.sampled_from([b"foo", b"ENTRIESADDED", b"MAXDELETEDID"])))
    return args


def keys_command(word: str) -> st.SearchStrategy[Command]:
    return st.builds(
        lambda name, keys: [name] + keys,
        case(word),
        st.lists(st.sampled_from(OTHER_KEYS), min_size=1, max_size=3),
    )


WRONG_ARITY: list[Command] = [
    [b"XLEN"],
    [b"XLEN", b"k1", b"k2"],
    [b"XADD", b"k1", b"1-1", b"f"],
    [b"XADD", b"k1"],
    [b"XRANGE", b"k1", b"-"],
    [b"XREVRANGE", b"k1", b"+"],
    [b"XDEL", b"k1"],
    [b"XTRIM", b"k1", b"MAXLEN"],
    [b"XSETID", b"k1"],
    [b"TYPE"],
    [b"TYPE", b"k1", b"k2"],
    [b"DEL"],
    [b"EXISTS"],
    [b"XREAD", b"STREAMS", b"k1"],
    [b"XADD", b"k1", b"MAXLEN", b"1"],
    [b"XADD", b"k1", b"NOMKSTREAM", b"MAXLEN", b"1", b"1-1"],
    [b"xadd", b"k1", b"*", b"f"],
    [b"XREAD", b"COUNT", b"1"],
    [b"XRANGE"],
]

command: st.SearchStrategy[Command] = weighted(
    (10, xadd()),
    (1, st.builds(lambda name, k: [name, k], case("xlen"), key)),
    (2, xrange()),
    (2, xread()),
    (2, xdel()),
    (2, xtrim()),
    (1, xsetid()),
    (1, keys_command("del")),
    (1, keys_command("exists")),
    (1, st.builds(lambda name, k: [name, k], case("type"), st.sampled_from(OTHER_KEYS))),
    (1, st.sampled_from(WRONG_ARITY)),
)


# --- running both sides ----------------------------------------------------------------------


@dataclass
class Differential:
    conn: RawClient
    region: Region = field(default_factory=lambda: Region(1, IdMode.LIBERAL))
    husks: set[bytes] = field(default_factory=set)
    last_added: dict[bytes, StreamID] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def ours(self, args: list[bytes]) -> bytes:
        done = run(self.region, args, int(time.time() * 1000))
        return encode(done.reply, 2)

    def fail(self, message: str) -> NoReturn:
        history = "\n".join(self.log[-40:])
        raise AssertionError(f"{message}\nhistory (ours):\n{history}")

    def resolve(self, command: Command) -> list[bytes]:
        """Placeholders become IDs of the key they belong to (XREAD: the matching key)."""
        return [
            arg.resolve(self.region, _owner(command, i)) if isinstance(arg, Near) else arg
            for i, arg in enumerate(command)
        ]

    def step(self, command: Command) -> None:
        args = self.resolve(command)
        name = args[0].lower()
        key = args[1] if len(args) > 1 else b""
        if self._sent_to_neither(name, key, args):
            self.log.append(f"  skipped {args!r}")
            return
        ours = redis7_view(self.ours(args))
        self.log.append(f"{args!r} -> {ours!r}")
        if name == b"xsetid" and ours == _error(errors.XSETID_BELOW_LAST):
            return  # active-active never moves the last ID back; Redis would
        theirs = self.conn.call(args)
        if ours != theirs and not self._known_difference(name, args, ours, theirs):
            self.fail(f"{args!r}: ours {ours!r} != redis {theirs!r}")
        if name == b"xadd" and ours.startswith(b"$") and ours != b"$-1\r\n":
            self.last_added[key] = parse_id(ours.split(b"\r\n")[1])
        elif name == b"del":
            for k in args[1:]:
                self.last_added.pop(k, None)
        self._compare_keys()

    def _sent_to_neither(self, name: bytes, key: bytes, args: list[bytes]) -> bool:
        if name == b"xadd":
            if key in self.husks and any(a.lower() == b"nomkstream" for a in args[2:]):
                return True
            if b"*" in args[2:]:
                ks = self.region.state.raw(key)
                top = None if ks is None else ks.top
                return top is None or top[0] < FUTURE_MS
        if name == b"xsetid" and key in self.husks:
            return True
        return False

    def _known_difference(self, name: bytes, args: list[bytes], ours: bytes, theirs: bytes) -> bool:
        """The deviations the module docstring lists (empty streams, Redis 7.0's `ms-*` overflow
        text); True when the two replies differ exactly that way."""
        if name in (b"exists", b"del") and ours.startswith(b":"):
            keys = args[1:] if name == b"exists" else list(dict.fromkeys(args[1:]))
            hidden = sum(1 for k in keys if k in self.husks)
            return hidden > 0 and theirs == b":%d\r\n" % (int(ours[1:]) + hidden)
        if name == b"xadd" and ours == _error(errors.XADD_ID_TOO_SMALL):
            return theirs == REDIS_70_SEQ_OVERFLOW and any(a.endswith(b"-*") for a in args)
        key = args[1] if len(args) > 1 else b""
        if key not in self.husks:
            return False
        if name == b"type":
            return ours == b"+none\r\n" and theirs == b"+stream\r\n"
        if name in (b"xrange", b"xrevrange"):
            return ours == b"*0\r\n" and theirs == b"*-1\r\n"
        if name == b"xdel":
            return ours == b":0\r\n" and theirs == _error(errors.INVALID_ID)
        return False

    def _compare_keys(self) -> None:
        self.husks.clear()
        for k in KEYS:
            everything = [b"XRANGE", k, b"-", b"+"]
            ours, theirs = self.ours(everything), self.conn.call(everything)
            if ours != theirs:
                self.fail(f"state of {k!r} differs: ours {ours!r} != redis {theirs!r}")
            if theirs == b"*0\r\n" and self.conn.call([b"EXISTS", k]) == b":1\r\n":
                self.husks.add(k)


def _owner(command: Command, index: int) -> bytes:
    """The key an ID placeholder at `index` refers to."""
    words = [a.lower() if isinstance(a, bytes) else b"" for a in command]
    if words[0] == b"xread" and b"streams" in words:
        at = words.index(b"streams") + 1
        half = (len(command) - at) // 2
        owner = command[index - half] if index - half >= at else b""
    else:
        owner = command[1]
    return owner if isinstance(owner, bytes) else b""


def _error(text: str) -> bytes:
    return b"-%s\r\n" % text.encode()


REDIS_70_SEQ_OVERFLOW = _error("ERR Elements are too large to be stored")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(history=st.lists(command, min_size=10, max_size=60))
def test_single_region_replies_equal_redis_byte_for_byte(
    redis_server: RedisServer, history: list[Command]
) -> None:
    conn = redis_server.connect()
    try:
        assert conn.call([b"FLUSHALL"]) == b"+OK\r\n"
        diff = Differential(conn)
        for args in history:
            diff.step(args)
    finally:
        conn.close()


def test_the_server_is_redis_7_0(redis_server: RedisServer) -> None:
    """The deviations documented above are measured against this version."""
    assert redis_server.version().startswith("7.0.")


# --- the fixed table of error replies --------------------------------------------------------

MAX = b"18446744073709551615"
SETUP_ONE = [b"XADD k 5-1 f v"]
SETUP_TWO = [b"XADD k 5-1 f v", b"XADD k 6-1 f v"]


def _words(line: bytes) -> list[bytes]:
    return line.split(b" ")


# (setup, command, the catalogue text both sides must answer). Every text in streams/errors.py
# that XADD, XLEN, XRANGE, XREVRANGE, XREAD, XDEL, XTRIM, XSETID, DEL, EXISTS and TYPE can answer
# in liberal mode. Not here: XSETID_BELOW_MAXDEL (Redis 7.0 has no such check), XSETID_BELOW_LAST
# and STRICT_FULL_ID (active-active only).
ERROR_CASES: list[tuple[list[bytes], list[bytes], str]] = [
    ([], _words(b"XRANGE k - + foo"), errors.SYNTAX),
    ([], _words(b"XRANGE k - + COUNT"), errors.SYNTAX),
    ([], _words(b"XREAD foo STREAMS k 0"), errors.SYNTAX),
    ([], _words(b"XREAD COUNT 1 STREAMS"), errors.SYNTAX),
    ([], _words(b"XREAD COUNT 1 k 0"), errors.SYNTAX),
    ([], _words(b"XTRIM k MAXLEN 1 foo"), errors.SYNTAX),
    ([], _words(b"XSETID k 1 foo"), errors.SYNTAX),
    ([], _words(b"XSETID k 1 ENTRIESADDED"), errors.SYNTAX),
    ([], _words(b"XRANGE k - + COUNT abc"), errors.NOT_INTEGER),
    ([], _words(b"XADD k MAXLEN 1.5 * f v"), errors.NOT_INTEGER),
    ([], _words(b"XADD k MAXLEN ~ f v"), errors.NOT_INTEGER),
    ([], _words(b"XREAD COUNT 9223372036854775808 STREAMS k 0"), errors.NOT_INTEGER),
    ([], _words(b"XTRIM k MAXLEN ~ 1 LIMIT x"), errors.NOT_INTEGER),
    ([], _words(b"XSETID k 1 ENTRIESADDED -0"), errors.NOT_INTEGER),
    ([], _words(b"XSETID nokey 1"), errors.NO_SUCH_KEY),
    ([], _words(b"XADD k abc f v"), errors.INVALID_ID),
    ([], _words(b"XADD k LIMIT 10 bad f v"), errors.INVALID_ID),
    ([], _words(b"XADD k 1-18446744073709551616 f v"), errors.INVALID_ID),
    (SETUP_ONE, _words(b"XDEL k 5-1 abc"), errors.INVALID_ID),
    ([], _words(b"XRANGE k 1-x +"), errors.INVALID_ID),
    ([], _words(b"XRANGE k (- +"), errors.INVALID_ID),
    ([], _words(b"XREVRANGE k (+ -"), errors.INVALID_ID),
    ([], _words(b"XREAD STREAMS k +"), errors.INVALID_ID),
    ([], _words(b"XREAD STREAMS k -"), errors.INVALID_ID),
    ([], _words(b"XSETID k -1"), errors.INVALID_ID),
    ([], _words(b"XTRIM k MINID 1-2-3"), errors.INVALID_ID),
    (SETUP_ONE, _words(b"XADD k 5-1 f v"), errors.XADD_ID_TOO_SMALL),
    (SETUP_ONE, _words(b"XADD k 5 f v"), errors.XADD_ID_TOO_SMALL),
    (SETUP_ONE, _words(b"XADD k 4-* f v"), errors.XADD_ID_TOO_SMALL),
    ([], _words(b"XADD k 0-0 f v"), errors.XADD_ID_ZERO),
    ([], _words(b"XADD k NOMKSTREAM 0 f v"), errors.XADD_ID_ZERO),
    (SETUP_TWO, _words(b"XSETID k 5-9"), errors.XSETID_TOO_SMALL),
    (SETUP_TWO, _words(b"XSETID k 7 ENTRIESADDED 1"), errors.XSETID_ENTRIES_ADDED),
    ([], _words(b"XSETID k 1 MAXDELETEDID 2"), errors.XSETID_MAXDEL),
    ([b"XADD k " + MAX + b"-" + MAX + b" f v"], _words(b"XADD k * f v"), errors.STREAM_EXHAUSTED),
    ([b"XADD k " + MAX + b"-" + MAX + b" f v"], _words(b"XADD k 1-1 f v"), errors.STREAM_EXHAUSTED),
    ([], _words(b"XSETID k 1 ENTRIESADDED -1"), errors.ENTRIES_ADDED_NEGATIVE),
    ([], _words(b"XTRIM k MAXLEN 1 MINID 1"), errors.MAXLEN_MINID_TOGETHER),
    ([], _words(b"XADD k MINID 1 MAXLEN 1 * f v"), errors.MAXLEN_MINID_TOGETHER),
    ([], _words(b"XTRIM k LIMIT 1"), errors.LIMIT_WITHOUT_STRATEGY),
    ([], _words(b"XADD k LIMIT 1 1-1 f v"), errors.LIMIT_WITHOUT_STRATEGY),
    ([], _words(b"XTRIM k LIMIT 0"), errors.XTRIM_NO_STRATEGY),
    ([], _words(b"XTRIM k foo bar"), errors.SYNTAX),
    ([], _words(b"XREAD GROUP g c STREAMS k 0"), errors.GROUP_ONLY_XREADGROUP),
    ([], _words(b"XREAD NOACK STREAMS k 0"), errors.NOACK_ONLY_XREADGROUP),
    ([], [b"XRANGE", b"k", b"(" + MAX + b"-" + MAX, b"+"], errors.INVALID_START_ID),
    ([], _words(b"XRANGE k - (0-0"), errors.INVALID_END_ID),
    ([], _words(b"XREVRANGE k (0-0 -"), errors.INVALID_END_ID),
    ([], _words(b"XREAD STREAMS k1 k2 0"), errors.UNBALANCED_STREAMS),
    ([], _words(b"XREAD STREAMS k >"), errors.XREAD_GT_ONLY_GROUP),
    ([], _words(b"XREAD STREAMS k1 k2 0 >"), errors.XREAD_GT_ONLY_GROUP),
    ([], _words(b"XREAD BLOCK -1 STREAMS k 0"), errors.TIMEOUT_NEGATIVE),
    ([], _words(b"XREAD BLOCK 1.5 STREAMS k 0"), errors.TIMEOUT_NOT_INTEGER),
    ([], _words(b"XTRIM k MAXLEN 1 LIMIT 1"), errors.LIMIT_WITHOUT_APPROX),
    ([], _words(b"XTRIM k MAXLEN = 1 LIMIT 1"), errors.LIMIT_WITHOUT_APPROX),
    ([], _words(b"XTRIM k MAXLEN -1"), errors.MAXLEN_NEGATIVE),
    ([], _words(b"XADD k MAXLEN ~ -5 * f v"), errors.MAXLEN_NEGATIVE),
    ([], _words(b"XTRIM k MAXLEN ~ 1 LIMIT -1"), errors.LIMIT_NEGATIVE),
    ([], _words(b"XLEN"), errors.wrong_arity("xlen").text),
    ([], _words(b"XLEN k k"), errors.wrong_arity("xlen").text),
    ([], _words(b"xadd k * f"), errors.wrong_arity("xadd").text),
    ([], _words(b"XADD k MAXLEN 1"), errors.wrong_arity("xadd").text),
    ([], _words(b"XADD k MAXLEN 1 1-1 f v g"), errors.wrong_arity("xadd").text),
    ([], _words(b"XRANGE k -"), errors.wrong_arity("xrange").text),
    ([], _words(b"XREVRANGE k +"), errors.wrong_arity("xrevrange").text),
    ([], _words(b"XREAD STREAMS k"), errors.wrong_arity("xread").text),
    ([], _words(b"XDEL k"), errors.wrong_arity("xdel").text),
    ([], _words(b"XTRIM k MAXLEN"), errors.wrong_arity("xtrim").text),
    ([], _words(b"XSETID k"), errors.wrong_arity("xsetid").text),
    ([], _words(b"DEL"), errors.wrong_arity("del").text),
    ([], _words(b"EXISTS"), errors.wrong_arity("exists").text),
    ([], _words(b"TYPE"), errors.wrong_arity("type").text),
    ([], _words(b"TYPE k k"), errors.wrong_arity("type").text),
    ([], _words(b"NOSUCHCOMMAND a b"), errors.unknown_command(b"NOSUCHCOMMAND", [b"a", b"b"]).text),
    ([], [b"FOO", b"a" * 200], errors.unknown_command(b"FOO", [b"a" * 200]).text),
    (
        [],
        [b"FOO", b"a\r\nb", b"c"],  # CR and LF in an error become spaces
        "ERR unknown command 'FOO', with args beginning with: 'a  b' 'c' ",
    ),
    (
        [],
        [b"FOO"] + [b"abcdefghij"] * 20,
        errors.unknown_command(b"FOO", [b"abcdefghij"] * 20).text,
    ),
]


# Replies where Redis's order of checks decides between an error and an answer.
ORDER_CASES: list[tuple[list[bytes], list[bytes], bytes]] = [
    ([], _words(b"XDEL nokey bad"), b":0\r\n"),  # the key is looked up before the IDs parse
    ([], _words(b"XTRIM nokey MAXLEN 1"), b":0\r\n"),
    ([], _words(b"XADD nokey NOMKSTREAM 1-1 f v"), b"$-1\r\n"),
    ([], _words(b"XRANGE nokey - + COUNT 0"), b"*0\r\n"),
    (SETUP_ONE, _words(b"XRANGE k - + COUNT 0"), b"*-1\r\n"),
    (SETUP_ONE, _words(b"XREVRANGE k + - COUNT -1"), b"*-1\r\n"),
    ([], _words(b"XREAD STREAMS nokey 0"), b"*-1\r\n"),
    ([], _words(b"XREAD COUNT -1 BLOCK -1 COUNT x STREAMS k 0"), _error(errors.TIMEOUT_NEGATIVE)),
    (
        SETUP_TWO,
        _words(b"XREAD COUNT 1 STREAMS k k 5 5-1"),
        b"*2\r\n*2\r\n$1\r\nk\r\n*1\r\n*2\r\n$3\r\n5-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
        b"*2\r\n$1\r\nk\r\n*1\r\n*2\r\n$3\r\n6-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    ),
]


def test_the_error_table_covers_every_reachable_catalogue_text() -> None:
    covered = {text for _setup, _args, text in ERROR_CASES}
    reachable = {
        getattr(errors, name)
        for name in (
            "SYNTAX NOT_INTEGER NO_SUCH_KEY INVALID_ID XADD_ID_TOO_SMALL XADD_ID_ZERO "
            "XSETID_TOO_SMALL XSETID_ENTRIES_ADDED XSETID_MAXDEL STREAM_EXHAUSTED "
            "ENTRIES_ADDED_NEGATIVE MAXLEN_MINID_TOGETHER LIMIT_WITHOUT_STRATEGY "
            "XTRIM_NO_STRATEGY GROUP_ONLY_XREADGROUP NOACK_ONLY_XREADGROUP INVALID_START_ID "
            "INVALID_END_ID UNBALANCED_STREAMS XREAD_GT_ONLY_GROUP TIMEOUT_NEGATIVE "
            "TIMEOUT_NOT_INTEGER LIMIT_WITHOUT_APPROX MAXLEN_NEGATIVE LIMIT_NEGATIVE"
        ).split()
    }
    assert reachable <= covered, reachable - covered


def test_fixed_error_and_check_order_replies_equal_redis_byte_for_byte(
    redis_server: RedisServer,
) -> None:
    conn = redis_server.connect()
    wrong: list[str] = []
    cases = [(setup, args, _error(text)) for setup, args, text in ERROR_CASES] + ORDER_CASES
    try:
        for setup, args, expected in cases:
            conn.call([b"FLUSHALL"])
            region = Region(1, IdMode.LIBERAL)
            for line in setup:
                setup_args = _words(line)
                run(region, setup_args, 0)
                conn.call(setup_args)
            ours = redis7_view(encode(run(region, args, int(time.time() * 1000)).reply, 2))
            theirs = conn.call(args)
            if not ours == theirs == expected:
                wrong.append(
                    f"{args!r}:\n  redis    {theirs!r}\n  ours     {ours!r}\n"
                    f"  expected {expected!r}"
                )
    finally:
        conn.close()
    assert not wrong, "\n".join(wrong)
