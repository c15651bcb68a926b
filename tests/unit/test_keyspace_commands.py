"""Keyspace commands over the pure core: Redis's glob (checked against a real redis-server), the
SCAN cursor, RENAME as replicated ops, FLUSHALL as observed-remove, and the error replies of
DBSIZE / KEYS / SCAN / RENAME / FLUSHALL byte for byte against redis-server 7.0.15."""

from __future__ import annotations

import hiredis
import pytest
from differential.redis_server import RedisServer
from hypothesis import given, settings
from hypothesis import strategies as st
from support import RawClient

from streams.commands import keyspace
from streams.commands.execute import run
from streams.commands.glob import Pattern, compile_pattern, match
from streams.commands.keyspace import CURSOR_END, key_hash, parse_cursor, scan_batch
from streams.crdt import ops
from streams.crdt.region import Region
from streams.errors import CommandError
from streams.ids import IdMode
from streams.resp.encode import encode
from streams.scenarios.sim import SimulatedRegions

# --- glob ---------------------------------------------------------------------------------------

GLOB_CASES: list[tuple[bytes, bytes, bool]] = [
    (b"*", b"", True),
    (b"*", b"anything", True),
    (b"**", b"", False),
    (b"", b"", True),
    (b"a*", b"a", True),
    (b"a*b", b"ab", True),
    (b"a*b", b"axxb", True),
    (b"a*b", b"axxbc", False),
    (b"h?llo", b"hello", True),
    (b"h?llo", b"hllo", False),
    (b"h[ae]llo", b"hallo", True),
    (b"h[ae]llo", b"hillo", False),
    (b"h[^e]llo", b"hallo", True),
    (b"h[^e]llo", b"hello", False),
    (b"h[a-b]llo", b"hbllo", True),
    (b"h[b-a]llo", b"hallo", True),  # a backwards range is swapped
    (b"h\\*llo", b"h*llo", True),
    (b"h\\*llo", b"hello", False),
    (b"[\\]]", b"]", True),
    (b"[abc", b"b", True),  # an unclosed class runs to the end of the pattern
    (b"[a-]", b"_", True),  # 'a-]' is the range ']'..'a'
    (b"a\\", b"a\\", True),  # a trailing backslash is a literal one
    (b"[", b"[", False),
    (b"[^", b"x", True),
    (b"*a*a*a*a*a*a*a*b", b"a" * 40, False),
]


@pytest.mark.parametrize(("pattern", "string", "expected"), GLOB_CASES)
def test_glob_matches_like_redis(pattern: bytes, string: bytes, expected: bool) -> None:
    assert match(pattern, string) is expected


def test_glob_of_many_stars_does_not_recurse() -> None:
    pattern = b"*a" * 5000 + b"b"
    assert not Pattern(pattern).match(b"a" * 6000)
    assert len(compile_pattern(b"***")) == 1


@pytest.fixture
def redis_db(redis_server: RedisServer) -> RawClient:
    """A connection to the shared redis-server, on a database of its own (9), emptied."""
    conn = redis_server.connect()
    assert conn.call([b"SELECT", b"9"]) == b"+OK\r\n"
    conn.call([b"FLUSHDB"])
    return conn


def _parse(raw: bytes) -> object:
    reader = hiredis.Reader()
    reader.feed(raw)
    return reader.gets()


GLOB_KEYS = [
    b"",
    b"a",
    b"b",
    b"ab",
    b"abc",
    b"a]c",
    b"a-c",
    b"\\",
    b"*",
    b"[",
    b"^",
    b"a\xffb",
    b"hello",
    b"hallo",
    b"h*llo",
    b"x" * 30,
]
GLOB_PATTERNS = [c[0] for c in GLOB_CASES] + [
    b"a?c",
    b"a[]-]c",
    b"a[\\]]c",
    b"[^a]*",
    b"*[",
    b"\\",
    b"[\\",
    b"a[z-a]c",
    b"[\x80-\xff]*",
    b"a[\xff]b",
    b"?",
    b"??",
    b"*?*",
    b"[*]",
    b"[?]",
]


def test_glob_agrees_with_redis_keys(redis_db: RawClient) -> None:
    for key in GLOB_KEYS:
        assert redis_db.call([b"XADD", key, b"1-1", b"f", b"v"]).startswith(b"$")
    for pattern in GLOB_PATTERNS:
        theirs = _parse(redis_db.call([b"KEYS", pattern]))
        assert isinstance(theirs, list)
        ours = {k for k in GLOB_KEYS if match(pattern, k)}
        assert ours == set(theirs), pattern


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text("ab[]^-\\*?", max_size=7).map(str.encode), min_size=1, max_size=8))
def test_glob_random_patterns_agree_with_redis(
    redis_server: RedisServer, patterns: list[bytes]
) -> None:
    conn = redis_server.connect()
    try:
        conn.call([b"SELECT", b"10"])
        if conn.call([b"DBSIZE"]) == b":0\r\n":
            for key in [b"a", b"b", b"ab", b"ba", b"a]", b"[", b"-", b"\\", b"^", b"a-b", b"*"]:
                conn.call([b"XADD", key, b"1-1", b"f", b"v"])
        keys = _parse(conn.call([b"KEYS", b"*"]))
        assert isinstance(keys, list)
        for pattern in patterns:
            theirs = _parse(conn.call([b"KEYS", pattern]))
            assert isinstance(theirs, list)
            assert {k for k in keys if match(pattern, k)} == set(theirs), pattern
    finally:
        conn.close()


# --- SCAN ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b"0", 0),
        (b"", 0),
        (b"00", 0),
        (b"+7", 7),
        (b"-1", 2**64 - 1),
        (b"18446744073709551615", 2**64 - 1),
    ],
)
def test_scan_cursor_parses_as_strtoull(raw: bytes, value: int) -> None:
    assert parse_cursor(raw) == value


@pytest.mark.parametrize("raw", [b"x", b" 0", b"1a", b"+", b"-", b"18446744073709551616", b"0x1"])
def test_scan_cursor_refuses_what_redis_refuses(raw: bytes) -> None:
    with pytest.raises(CommandError, match="invalid cursor"):
        parse_cursor(raw)


def _full_scan(keys: list[bytes], count: int) -> list[bytes]:
    cursor, seen = 0, []
    while True:
        cursor, batch = scan_batch(keys, cursor, count)
        seen.extend(batch)
        if cursor == 0:
            return seen


def test_scan_batches_follow_the_hash_order_and_end_with_cursor_zero() -> None:
    keys = [b"k%d" % i for i in range(50)]
    cursor, batch = scan_batch(keys, 0, 7)
    assert len(batch) == 7 and cursor == key_hash(batch[-1]) + 1
    assert [key_hash(k) for k in batch] == sorted(key_hash(k) for k in batch)
    assert sorted(_full_scan(keys, 7)) == sorted(keys)
    assert scan_batch(keys, CURSOR_END, 10) == (0, [])
    assert scan_batch([], 0, 10) == (0, [])


@settings(max_examples=200, deadline=None)
@given(
    st.sets(st.binary(max_size=4), max_size=40),
    st.lists(st.tuples(st.booleans(), st.binary(max_size=4)), max_size=40),
    st.integers(1, 5),
)
def test_scan_returns_every_key_present_for_the_whole_scan(
    initial: set[bytes], churn: list[tuple[bool, bytes]], count: int
) -> None:
    """Keys come and go between the calls; a key present from start to end is returned, and no key
    is returned twice."""
    present = set(initial)
    ever_removed: set[bytes] = set()
    cursor, seen, steps = 0, [], iter(churn)
    while True:
        cursor, batch = scan_batch(list(present), cursor, count)
        seen.extend(batch)
        assert set(batch) <= present
        if cursor == 0:
            break
        for add, key in [next(steps, (True, b""))]:
            if add:
                present.add(key)
            else:
                present.discard(key)
                ever_removed.add(key)
    assert initial - ever_removed <= set(seen)
    assert len(seen) == len(set(seen))


def test_scan_command_options() -> None:
    region = Region(1, IdMode.LIBERAL)
    for i in range(30):
        run(region, [b"XADD", b"user:%d" % i, b"1", b"f", b"v"], 0)
    run(region, [b"XADD", b"other", b"1", b"f", b"v"], 0)
    seen: list[bytes] = []
    cursor = b"0"
    while True:
        reply = run(region, [b"SCAN", cursor, b"MATCH", b"user:*", b"COUNT", b"3"], 0).reply
        assert isinstance(reply, list)
        cursor, batch = reply  # type: ignore[assignment]
        assert isinstance(batch, list)
        seen.extend(batch)  # type: ignore[arg-type]
        if cursor == b"0":
            break
    assert sorted(seen) == sorted(b"user:%d" % i for i in range(30))
    assert run(region, [b"SCAN", b"0", b"TYPE", b"STREAM", b"COUNT", b"100"], 0).reply == [
        b"0",
        [k for _, k in sorted((key_hash(k), k) for k in region.state.existing_keys())],
    ]
    assert run(region, [b"SCAN", b"0", b"TYPE", b"string"], 0).reply[1] == []  # type: ignore[index]


# --- RENAME -------------------------------------------------------------------------------------


def test_rename_ops_copy_entries_collapse_duplicates_and_drop_groups() -> None:
    sim = SimulatedRegions(2, IdMode.LIBERAL)
    sim.execute(1, (b"XADD", b"s", b"5-0", b"from", b"r1"), None)
    sim.execute(2, (b"XADD", b"s", b"5-0", b"from", b"r2"), None)  # a duplicate ID
    sim.execute(2, (b"XADD", b"s", b"6-0", b"n", b"2"), None)
    sim.execute(1, (b"XGROUP", b"CREATE", b"s", b"g", b"0"), None)
    sim.sync()
    region = sim.regions[1]
    body = keyspace.rename_ops(region.state, b"s", b"t")
    assert body == [
        ops.XAdd(b"t", (5, 0), (b"from", b"r1")),
        ops.XAdd(b"t", (6, 0), (b"n", b"2")),
        ops.XSetId(b"t", (6, 0), 3, (0, 0)),
        ops.Del(b"s"),
    ]
    assert sim.execute(1, (b"RENAME", b"s", b"t"), None) == b"OK"
    sim.sync()
    for i in (1, 2):
        assert sim.execute(i, (b"XRANGE", b"t", b"-", b"+"), None) == [
            [b"5-0", [b"from", b"r1"]],
            [b"6-0", [b"n", b"2"]],
        ]
        assert sim.execute(i, (b"XINFO", b"GROUPS", b"t"), None) == []
        assert sim.execute(i, (b"EXISTS", b"s"), None) == 0
    assert len(set(sim.digests().values())) == 1
    # the target keeps the source's last ID: a clock behind it still makes a higher ID
    assert sim.execute(1, (b"XADD", b"t", b"*", b"a", b"b"), 3) == b"6-1"


def test_rename_overwrites_the_target_and_renamenx_does_not() -> None:
    region = Region(1, IdMode.LIBERAL)
    run(region, [b"XADD", b"a", b"1", b"f", b"a"], 0)
    run(region, [b"XADD", b"b", b"2", b"f", b"b"], 0)
    run(region, [b"XGROUP", b"CREATE", b"b", b"g", b"0"], 0)
    assert run(region, [b"RENAMENX", b"a", b"b"], 0).reply == 0
    assert run(region, [b"RENAMENX", b"a", b"a"], 0).reply == 0
    done = run(region, [b"RENAME", b"a", b"b"], 0)
    assert [type(op.body) for op in done.replicated] == [ops.Del, ops.XAdd, ops.XSetId, ops.Del]
    assert run(region, [b"XRANGE", b"b", b"-", b"+"], 0).reply == [[b"1-0", [b"f", b"a"]]]
    assert run(region, [b"XINFO", b"GROUPS", b"b"], 0).reply == []
    assert run(region, [b"RENAMENX", b"b", b"c"], 0).reply == 1
    assert run(region, [b"KEYS", b"*"], 0).reply == [b"c"]
    assert run(region, [b"RENAME", b"c", b"c"], 0).replicated == []


# --- FLUSHALL -----------------------------------------------------------------------------------


def test_flushall_is_one_observed_remove_del_per_key() -> None:
    sim = SimulatedRegions(2)
    for key in (b"a", b"b", b"c"):
        sim.execute(1, (b"XADD", key, b"*", b"f", b"v"), 1_000)
    sim.execute(1, (b"XGROUP", b"CREATE", b"g-only", b"g", b"$", b"MKSTREAM"), None)
    sim.sync()
    sim.execute(2, (b"XADD", b"a", b"*", b"concurrent", b"r2"), 2_000)  # not seen by r1
    region = sim.regions[1]
    assert keyspace.flush_ops(region.state) == [
        ops.Del(b"a"),
        ops.Del(b"b"),
        ops.Del(b"c"),
        ops.Del(b"g-only"),
    ]
    assert sim.execute(1, (b"FLUSHALL", b"ASYNC"), None) == b"OK"
    assert sim.execute(1, (b"DBSIZE",), None) == 0
    sim.sync()
    for i in (1, 2):
        assert sim.execute(i, (b"KEYS", b"*"), None) == [b"a"]
        reply = sim.execute(i, (b"XRANGE", b"a", b"-", b"+"), None)
        assert isinstance(reply, list) and reply[0][1] == [b"concurrent", b"r2"]
    assert len(set(sim.digests().values())) == 1


# --- byte-identical replies ---------------------------------------------------------------------

SAME_AS_REDIS = [
    [b"DBSIZE"],
    [b"DBSIZE", b"x"],
    [b"KEYS"],
    [b"KEYS", b"a", b"b"],
    [b"KEYS", b"*"],
    [b"SCAN"],
    [b"SCAN", b"x"],
    [b"SCAN", b"0"],
    [b"SCAN", b"0", b"COUNT", b"0"],
    [b"SCAN", b"0", b"COUNT", b"x"],
    [b"SCAN", b"0", b"MATCH"],
    [b"SCAN", b"0", b"FOO", b"1"],
    [b"SCAN", b"18446744073709551616"],
    [b"SCAN", b"-1"],
    [b"RENAME", b"nosuch", b"b"],
    [b"RENAMENX", b"nosuch", b"b"],
    [b"RENAME", b"a"],
    [b"FLUSHALL", b"x"],
    [b"FLUSHALL", b"ASYNC", b"SYNC"],
    [b"FLUSHDB", b"sync", b"x"],
    [b"FLUSHALL"],
    [b"FLUSHDB", b"ASYNC"],
    [b"TYPE", b"nosuch"],
]


@pytest.mark.parametrize("args", SAME_AS_REDIS, ids=[b" ".join(a).decode() for a in SAME_AS_REDIS])
def test_keyspace_reply_matches_redis(redis_db: RawClient, args: list[bytes]) -> None:
    ours = encode(run(Region(1, IdMode.LIBERAL), args, 0).reply, 2)
    assert ours == redis_db.call(args)


def test_rename_replies_match_redis(redis_db: RawClient) -> None:
    region = Region(1, IdMode.LIBERAL)
    script = [
        [b"XADD", b"s", b"1-1", b"f", b"v"],
        [b"XADD", b"t", b"2-1", b"f", b"v"],
        [b"RENAME", b"s", b"s"],
        [b"RENAMENX", b"s", b"s"],
        [b"RENAMENX", b"s", b"t"],
        [b"RENAME", b"s", b"t"],
        [b"EXISTS", b"s", b"t"],
        [b"XRANGE", b"t", b"-", b"+"],
        [b"RENAMENX", b"t", b"u"],
        [b"KEYS", b"*"],
        [b"DBSIZE"],
        [b"FLUSHDB"],
        [b"DBSIZE"],
    ]
    for args in script:
        assert encode(run(region, args, 0).reply, 2) == redis_db.call(args), args
