"""Differential check of the consumer-group commands against a real redis-server (7.0).

Each scenario is sent command by command to a fresh redis-server database and to a fresh
single region (liberal ID mode, explicit IDs), and the replies are compared as raw RESP bytes.
The only replies not compared byte for byte are the ones that carry the server's clock (idle
times, delivery and seen times): those numbers must agree within `CLOCK_SLACK_MS`, everything
else in the reply exactly. Our executor runs with `now_ms` read from the same wall clock at the
moment the command is sent.

Cases where the model knowingly differs from Redis are left out: a stream emptied by XDEL/XTRIM,
or whose last group is destroyed while it has no entries, does not exist here (Redis keeps an
empty stream).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from support import RawClient

from differential.redis8_fields import redis7_view
from differential.redis_server import RedisServer
from streams.commands.execute import run
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.resp.encode import encode

CLOCK_SLACK_MS = 500
MAX_ID = "18446744073709551615-18446744073709551615"


# --- a minimal RESP reader: one complete reply, raw and parsed ---------------------------------


class Incomplete(Exception):
    pass


@dataclass(frozen=True)
class Simple:
    kind: str  # "+" status or "-" error
    text: bytes


@dataclass(frozen=True)
class RMap:
    pairs: tuple[tuple[Any, Any], ...]


NULL = None


def _line(buf: bytes, pos: int) -> tuple[bytes, int]:
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Incomplete
    return buf[pos:end], end + 2


def parse(buf: bytes, pos: int = 0) -> tuple[Any, int]:
    """Parse one RESP2/RESP3 value at `pos`; raise Incomplete if the buffer ends first."""
    if pos >= len(buf):
        raise Incomplete
    kind = buf[pos : pos + 1]
    body, pos = _line(buf, pos + 1)
    if kind in (b"+", b"-"):
        return Simple(kind.decode(), body), pos
    if kind == b":":
        return int(body), pos
    if kind == b"_":
        return NULL, pos
    if kind == b"$":
        n = int(body)
        if n < 0:
            return NULL, pos
        if len(buf) < pos + n + 2:
            raise Incomplete
        return buf[pos : pos + n], pos + n + 2
    if kind in (b"*", b"~", b">"):
        n = int(body)
        if n < 0:
            return NULL, pos
        items = []
        for _ in range(n):
            item, pos = parse(buf, pos)
            items.append(item)
        return items, pos
    if kind == b"%":
        pairs = []
        for _ in range(int(body)):
            k, pos = parse(buf, pos)
            v, pos = parse(buf, pos)
            pairs.append((k, v))
        return RMap(tuple(pairs)), pos
    raise AssertionError(f"unexpected RESP type {kind!r}")


# --- clock-bearing replies: which numbers may differ by a few milliseconds -----------------------


@dataclass(frozen=True)
class Clock:
    value: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Clock) and abs(self.value - other.value) <= CLOCK_SLACK_MS

    def __hash__(self) -> int:
        return 0


def _map_items(value: Any) -> list[Any]:
    """A key/value reply as a flat list, whether it came as a RESP3 map or a RESP2 array."""
    if isinstance(value, RMap):
        return [x for pair in value.pairs for x in pair]
    return list(value)


def _rewrap(like: Any, items: list[Any]) -> Any:
    if isinstance(like, RMap):
        return RMap(tuple((items[i], items[i + 1]) for i in range(0, len(items), 2)))
    return items


def _flat_map_clock(row: Any, field: bytes) -> Any:
    out = _map_items(row)
    for i in range(0, len(out) - 1, 2):
        if out[i] == field:
            out[i + 1] = Clock(out[i + 1])
    return _rewrap(row, out)


def _xpending_clock(reply: Any) -> Any:
    if not isinstance(reply, list) or not reply or not isinstance(reply[0], list):
        return reply
    return [[r[0], r[1], Clock(r[2]), r[3]] for r in reply]


def _consumers_clock(reply: Any) -> Any:
    if not isinstance(reply, list):
        return reply
    return [_flat_map_clock(row, b"idle") for row in reply]


def _full_group_clock(group: Any) -> Any:
    g = _map_items(group)
    for j in range(0, len(g) - 1, 2):
        if g[j] == b"pending":
            g[j + 1] = [[p[0], p[1], Clock(p[2]), p[3]] for p in g[j + 1]]
        elif g[j] == b"consumers":
            consumers = []
            for consumer in g[j + 1]:
                c = _map_items(_flat_map_clock(consumer, b"seen-time"))
                for k in range(0, len(c) - 1, 2):
                    if c[k] == b"pending":
                        c[k + 1] = [[p[0], Clock(p[1]), p[2]] for p in c[k + 1]]
                consumers.append(_rewrap(consumer, c))
            g[j + 1] = consumers
    return _rewrap(group, g)


def _full_clock(reply: Any) -> Any:
    if not isinstance(reply, (list, RMap)):
        return reply
    out = _map_items(reply)
    for i in range(0, len(out) - 1, 2):
        if out[i] == b"groups":
            out[i + 1] = [_full_group_clock(g) for g in out[i + 1]]
    return _rewrap(reply, out)


def _clock_normaliser(args: list[bytes]) -> Callable[[Any], Any] | None:
    name = [a.upper() for a in args[:2]]
    if name[0] == b"XPENDING" and len(args) > 3:
        return _xpending_clock
    if name == [b"XINFO", b"CONSUMERS"]:
        return _consumers_clock
    if name == [b"XINFO", b"STREAM"] and len(args) > 3:
        return _full_clock
    return None


# --- the comparison ------------------------------------------------------------------------------


class Pair:
    """One redis-server database and one region, fed the same commands."""

    def __init__(self, conn: RawClient, proto: int = 2) -> None:
        self.redis = conn
        self.proto = proto
        assert self.redis.call([b"FLUSHALL"]) == b"+OK\r\n"
        if proto == 3:
            self.redis.call([b"HELLO", b"3"])
        self.region = Region(1, IdMode.LIBERAL)

    def check(self, cmd: str) -> bytes:
        args = [w.encode() for w in cmd.split()]
        theirs = self.redis.call(args)
        ours = redis7_view(
            encode(run(self.region, args, int(time.time() * 1000)).reply, self.proto)
        )
        normalise = _clock_normaliser(args)
        if normalise is None:
            assert ours == theirs, f"{cmd}\n ours:   {ours!r}\n redis:  {theirs!r}"
        else:
            mine, their = normalise(parse(ours)[0]), normalise(parse(theirs)[0])
            assert mine == their, f"{cmd}\n ours:   {mine!r}\n redis:  {their!r}"
        return theirs

    def script(self, text: str) -> None:
        for line in text.strip().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                self.check(line)

    def close(self) -> None:
        self.redis.close()


@pytest.fixture
def pair(redis_server: RedisServer) -> Iterator[Pair]:
    p = Pair(redis_server.connect())
    try:
        yield p
    finally:
        p.close()


def _fill(pair: Pair, key: str, ids: list[str]) -> None:
    for i, sid in enumerate(ids):
        pair.check(f"XADD {key} {sid} f{i} v{i}")


# --- scenarios -----------------------------------------------------------------------------------


def test_xgroup(pair: Pair) -> None:
    pair.script(
        """
        XGROUP
        XGROUP FOO
        XGROUP HELP
        XGROUP HELP extra
        xgroup help
        XGROUP CREATE s
        XGROUP CREATE s g 0
        XGROUP CREATE s g $
        XGROUP CREATE s g 0 MKSTREAM
        XINFO STREAM s
        XINFO GROUPS s
        XGROUP CREATE s g 0
        XGROUP CREATE s g bad
        XGROUP CREATE s g2 bad
        XGROUP CREATE s g2 -
        XGROUP CREATE s g2 0 FOO
        XGROUP CREATE s g2 0 ENTRIESREAD
        XGROUP CREATE s g2 0 ENTRIESREAD x
        XGROUP CREATE s g2 0 ENTRIESREAD -2
        XGROUP CREATE s g2 0 MKSTREAM MKSTREAM MKSTREAM MKSTREAM
        XGROUP CREATE s g2 $ ENTRIESREAD 0
        XGROUP CREATE s g3 0 ENTRIESREAD -1 MKSTREAM
        XADD s 1-1 a 1
        XADD s 2-1 b 2
        XGROUP CREATE s g4 $
        XGROUP CREATE s g5 1-1 ENTRIESREAD 1
        XINFO GROUPS s
        XGROUP SETID s nog 0
        XGROUP SETID nokey g 0
        XGROUP SETID s g 0 MKSTREAM
        XGROUP SETID s g 0 ENTRIESREAD
        XGROUP SETID s g bad
        XGROUP SETID s g 1-1 ENTRIESREAD 1
        XINFO GROUPS s
        XGROUP SETID s g -
        XGROUP SETID s g2 +
        XGROUP SETID s g3 $
        XGROUP SETID s g4 2
        XINFO GROUPS s
        XGROUP DESTROY s nog
        XGROUP DESTROY nokey g
        XGROUP DESTROY s g5
        XGROUP DESTROY s g5
        XGROUP CREATECONSUMER s g alice
        XGROUP CREATECONSUMER s g alice
        XGROUP CREATECONSUMER s nog alice
        XGROUP CREATECONSUMER nokey g alice
        XGROUP CREATECONSUMER s g
        XGROUP DELCONSUMER s g alice
        XGROUP DELCONSUMER s g nobody
        XGROUP DELCONSUMER s nog alice
        XGROUP DELCONSUMER nokey g alice
        XINFO GROUPS s
        """
    )


def test_xreadgroup_parsing_and_errors(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0"])
    pair.script(
        """
        XGROUP CREATE s g 0
        XREADGROUP GROUP g c STREAMS s
        XREADGROUP GROUP g STREAMS s 0 x
        XREADGROUP COUNT 1 BLOCK 1 STREAMS s >
        XREADGROUP GROUP g c STREAMS s t >
        XREADGROUP GROUP g c STREAMS s >
        XREADGROUP GROUP g c FOO STREAMS s >
        XREADGROUP GROUP g c COUNT x STREAMS s >
        XREADGROUP GROUP g c BLOCK x STREAMS s >
        XREADGROUP GROUP g c BLOCK -1 STREAMS s >
        XREADGROUP GROUP nog c STREAMS s >
        XREADGROUP GROUP g c STREAMS nokey >
        XREADGROUP GROUP g c STREAMS s $
        XREADGROUP GROUP g c STREAMS s bad
        XREADGROUP GROUP g c STREAMS s -
        XREADGROUP GROUP g c STREAMS s nokey > >
        XREADGROUP GROUP g c STREAMS s s bad $
        XREADGROUP GROUP g c GROUP g d STREAMS s >
        XINFO CONSUMERS s g
        """
    )


def test_xreadgroup_delivery_and_history(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0", "3-0", "4-0", "5-0"])
    _fill(pair, "t", ["1-5"])
    pair.script(
        """
        XGROUP CREATE s g 0
        XGROUP CREATE t g $
        XREADGROUP GROUP g alice COUNT 2 STREAMS s >
        XREADGROUP GROUP g alice COUNT 0 STREAMS s t 0 >
        XREADGROUP GROUP g bob COUNT 1 STREAMS s t > >
        XREADGROUP GROUP g bob STREAMS t >
        XREADGROUP GROUP g bob BLOCK 5 STREAMS t >
        XREADGROUP GROUP g alice STREAMS s 1-0
        XREADGROUP GROUP g alice COUNT 1 STREAMS s 0
        XREADGROUP GROUP g alice COUNT -3 STREAMS s 0-0
        XREADGROUP GROUP g carol STREAMS s 0
        XREADGROUP GROUP g bob STREAMS s 0
        XPENDING s g - + 10
        XINFO GROUPS s
        XINFO GROUPS t
        XADD t 2-0 x y
        XREADGROUP GROUP g bob BLOCK 1000 STREAMS t >
        XREADGROUP GROUP g bob NOACK STREAMS s >
        XREADGROUP GROUP g bob STREAMS s >
        XPENDING s g
        XINFO GROUPS s
        XDEL s 2-0
        XREADGROUP GROUP g alice STREAMS s 0
        XPENDING s g - + 10 alice
        XINFO CONSUMERS s g
        """
    )
    pair.check(f"XREADGROUP GROUP g alice STREAMS s {MAX_ID}")


def test_xreadgroup_same_key_twice(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0", "3-0"])
    pair.script(
        """
        XGROUP CREATE s g 0
        XREADGROUP GROUP g c COUNT 1 STREAMS s s > >
        XREADGROUP GROUP g c STREAMS s s > 0
        XREADGROUP GROUP g d STREAMS s s 0 >
        XPENDING s g - + 10
        XINFO GROUPS s
        """
    )


def test_xack(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0", "3-0"])
    pair.script(
        """
        XACK s
        XACK nokey g 1-0
        XACK s nog 1-0
        XACK nokey g bad
        XGROUP CREATE s g 0
        XACK s g bad
        XACK s g 1-0 bad
        XACK s g 1-0
        XREADGROUP GROUP g c STREAMS s >
        XACK s g 1-0 1-0 9-0
        XACK s g 1
        XACK s g 2-0 3-0
        XPENDING s g
        """
    )


def test_xpending(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0", "3-0", "4-0"])
    pair.script(
        """
        XPENDING s
        XPENDING nokey g
        XPENDING s nog
        XGROUP CREATE s g 0
        XPENDING s g
        XPENDING s g - + 10
        XREADGROUP GROUP g bob COUNT 1 STREAMS s >
        XREADGROUP GROUP g alice COUNT 2 STREAMS s >
        XREADGROUP GROUP g bob STREAMS s >
        XGROUP CREATECONSUMER s g zed
        XPENDING s g
        XPENDING s g -
        XPENDING s g - +
        XPENDING s g - + 10
        XPENDING s g - + 2
        XPENDING s g - + 0
        XPENDING s g - + -1
        XPENDING s g 2 3 10
        XPENDING s g (1-0 (4-0 10
        XPENDING s g - + 10 alice
        XPENDING s g - + 10 nobody
        XPENDING s g - + 10 zed
        XPENDING s g - + 10 alice extra
        XPENDING s g - + 10 alice extra extra
        XPENDING s g IDLE 0 - + 10
        XPENDING s g IDLE 100000 - + 10
        XPENDING s g IDLE -5 - + 10 bob
        XPENDING s g IDLE 10 - +
        XPENDING s g IDLE 10 - + 10 bob extra
        XPENDING s g IDLE x - + 10
        XPENDING s g - + x
        XPENDING s g bad + 10
        XPENDING s g - bad 10
        XPENDING s g ( + 10
        XPENDING nokey g - + 10
        XPENDING s nog - + 10
        XPENDING nokey g bad + 10
        """
    )
    pair.check(f"XPENDING s g ({MAX_ID} + 10")
    pair.check("XPENDING s g - (0-0 10")


def test_xclaim(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0", "3-0", "4-0", "5-0"])
    pair.script(
        """
        XCLAIM s g c 0 1-0
        XCLAIM s g c 0
        XGROUP CREATE s g 0
        XCLAIM s g c 0
        XCLAIM s nog c 0 1-0
        XCLAIM nokey g c 0 1-0
        XCLAIM s g c x 1-0
        XCLAIM s g c 0 1-0 IDLE x
        XCLAIM s g c 0 1-0 IDLE
        XCLAIM s g c 0 1-0 TIME x
        XCLAIM s g c 0 1-0 RETRYCOUNT x
        XCLAIM s g c 0 1-0 LASTID x
        XCLAIM s g c 0 1-0 bogus
        XCLAIM s g c 0 bogus
        XCLAIM s g c 0 1-0
        XINFO CONSUMERS s g
        XREADGROUP GROUP g alice COUNT 3 STREAMS s >
        XCLAIM s g bob 100000 1-0 2-0
        XCLAIM s g bob 0 1-0 TIME 1000
        XCLAIM s g bob 0 2-0 RETRYCOUNT 7 JUSTID
        XCLAIM s g bob 0 3-0 IDLE 50000 JUSTID
        XINFO STREAM s FULL
        XCLAIM s g carol 40000 1-0 2-0 3-0
        XCLAIM s g carol 0 1-0 1-0 TIME 5000
        XCLAIM s g carol 0 4-0 FORCE
        XCLAIM s g carol 0 5-0 FORCE JUSTID
        XCLAIM s g carol 0 5-0 5-0 JUSTID
        XCLAIM s g carol 0 9-0 FORCE
        XCLAIM s g dave 0 2-0 TIME 99999999999999
        XCLAIM s g dave 0 3-0 TIME -5 RETRYCOUNT 0
        XINFO STREAM s FULL
        XPENDING s g - + 10
        XINFO GROUPS s
        XCLAIM s g erin 0 LASTID 3-0
        XCLAIM s g erin 0 1-0 LASTID 9-0 JUSTID
        XINFO GROUPS s
        XINFO CONSUMERS s g
        XDEL s 2-0
        XCLAIM s g frank 0 2-0 3-0 FORCE
        XPENDING s g
        XINFO STREAM s FULL
        """
    )


def test_xautoclaim(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0", "3-0", "4-0", "5-0", "6-0"])
    pair.script(
        """
        XAUTOCLAIM s g c 0 0
        XAUTOCLAIM s g c 0
        XAUTOCLAIM s g c x 0
        XAUTOCLAIM s g c 0 x
        XAUTOCLAIM s g c 0 0 COUNT 0
        XAUTOCLAIM s g c 0 0 COUNT x
        XAUTOCLAIM s g c 0 0 COUNT -1
        XAUTOCLAIM s g c 0 0 COUNT
        XAUTOCLAIM s g c 0 0 foo
        XAUTOCLAIM s g c 0 (0
        XGROUP CREATE s g 0
        XAUTOCLAIM s nog c 0 0
        XAUTOCLAIM s g c 0 0
        XREADGROUP GROUP g alice STREAMS s >
        XCLAIM s g alice 0 1-0 2-0 TIME 1000 JUSTID
        XAUTOCLAIM s g bob 100000 0
        XAUTOCLAIM s g bob 0 0 COUNT 2
        XAUTOCLAIM s g bob 0 3-0 COUNT 1 JUSTID
        XAUTOCLAIM s g bob 0 (3-0 COUNT 1
        XDEL s 5-0 6-0
        XAUTOCLAIM s g carol 0 0 COUNT 3
        XAUTOCLAIM s g carol 0 - COUNT 10
        XAUTOCLAIM s g carol 100000 -
        XAUTOCLAIM s g dave 0 + COUNT 5
        XPENDING s g
        XINFO STREAM s FULL COUNT 0
        XINFO CONSUMERS s g
        """
    )
    pair.check(f"XAUTOCLAIM s g c 0 ({MAX_ID}")


def test_xautoclaim_attempts_limit(pair: Pair) -> None:
    _fill(pair, "s", [f"{i}-0" for i in range(1, 26)])
    pair.script(
        """
        XGROUP CREATE s g 0
        XREADGROUP GROUP g alice STREAMS s >
        XCLAIM s g alice 0 20-0 21-0 TIME 1000 JUSTID
        XAUTOCLAIM s g bob 100000 0 COUNT 1 JUSTID
        XAUTOCLAIM s g bob 100000 11-0 COUNT 1 JUSTID
        XAUTOCLAIM s g bob 100000 11-0 COUNT 2 JUSTID
        """
    )


def test_xinfo(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0", "3-0"])
    pair.script(
        """
        XINFO
        XINFO FOO s
        XINFO HELP
        XINFO HELP extra
        XINFO STREAM
        XINFO STREAM nokey
        XINFO STREAM nokey FULL
        XINFO GROUPS nokey
        XINFO CONSUMERS nokey g
        XINFO CONSUMERS s
        XINFO GROUPS s extra
        XINFO CONSUMERS s g
        XINFO GROUPS s
        XINFO STREAM s
        XINFO STREAM s x
        XINFO STREAM s FULL x
        XINFO STREAM s FULL COUNT
        XINFO STREAM s FULL COUNT x
        XINFO STREAM s FULL
        XINFO STREAM s FULL COUNT 1
        XINFO STREAM s FULL COUNT -1
        XINFO STREAM s FULL COUNT 0
        XINFO STREAM s FULL COUNT 1 COUNT 2
        XGROUP CREATE s b 0
        XGROUP CREATE s a $
        XGROUP CREATE s c 2-0 ENTRIESREAD 2
        XREADGROUP GROUP b zed COUNT 2 STREAMS s >
        XREADGROUP GROUP b amy STREAMS s >
        XINFO GROUPS s
        XINFO CONSUMERS s b
        XINFO STREAM s
        XINFO STREAM s FULL
        XINFO STREAM s FULL COUNT 1
        XDEL s 2-0
        XINFO STREAM s
        XINFO GROUPS s
        XADD s 4-0 f v
        XINFO GROUPS s
        XREADGROUP GROUP c zed STREAMS s >
        XINFO GROUPS s
        XDEL s 1-0
        XINFO GROUPS s
        XINFO STREAM s
        XGROUP SETID s a 0
        XINFO GROUPS s
        """
    )


def test_lag_and_entries_read(pair: Pair) -> None:
    ids = [f"{i}-0" for i in range(1, 8)]
    _fill(pair, "s", ids)
    pair.script(
        """
        XGROUP CREATE s g 0
        XGROUP CREATE s h 0 ENTRIESREAD 0
        XGROUP CREATE s k 3-0
        XINFO GROUPS s
        XREADGROUP GROUP g c COUNT 2 STREAMS s >
        XREADGROUP GROUP h c COUNT 2 STREAMS s >
        XREADGROUP GROUP k c COUNT 2 STREAMS s >
        XINFO GROUPS s
        XDEL s 6-0
        XINFO GROUPS s
        XREADGROUP GROUP g c COUNT 2 STREAMS s >
        XREADGROUP GROUP h c COUNT 4 STREAMS s >
        XINFO GROUPS s
        XTRIM s MAXLEN 2
        XINFO GROUPS s
        XREADGROUP GROUP g c STREAMS s >
        XINFO GROUPS s
        XGROUP SETID s k 1-0 ENTRIESREAD 3
        XINFO GROUPS s
        XSETID s 7-0 ENTRIESADDED 20
        XINFO GROUPS s
        XINFO STREAM s
        """
    )


def test_resp3_shapes(redis_server: RedisServer) -> None:
    pair = Pair(redis_server.connect(), proto=3)
    try:
        _fill(pair, "s", ["1-0", "2-0", "3-0"])
        pair.script(
            """
            XGROUP CREATE s g 0
            XREADGROUP GROUP g c COUNT 2 STREAMS s >
            XREADGROUP GROUP g c STREAMS s >
            XREADGROUP GROUP g c STREAMS s >
            XREADGROUP GROUP g c STREAMS s 0
            XINFO GROUPS s
            XINFO CONSUMERS s g
            XINFO STREAM s
            XINFO STREAM s FULL
            XPENDING s g
            XPENDING s g - + 10
            XAUTOCLAIM s g d 0 0
            XCLAIM s g e 0 1-0
            XGROUP HELP
            XPENDING s nog
            """
        )
    finally:
        pair.close()


def test_redelivery_and_consumers(pair: Pair) -> None:
    _fill(pair, "s", ["1-0", "2-0", "3-0"])
    pair.script(
        """
        XGROUP CREATE s g $
        XREADGROUP GROUP g alice STREAMS s >
        xreadgroup group g alice count 5 streams s 0
        XADD s 4-0 a b c d e f
        xreadgroup group g alice noack streams s >
        XACK s g 4-0
        XPENDING s g
        XGROUP SETID s g 0
        XREADGROUP GROUP g alice COUNT 2 STREAMS s >
        XREADGROUP GROUP g bob COUNT 1 STREAMS s >
        XPENDING s g - + 10
        XREADGROUP GROUP g bob STREAMS s 0
        XREADGROUP GROUP g bob STREAMS s 0
        XREADGROUP GROUP g alice STREAMS s 1-0
        XPENDING s g - + 10
        XREADGROUP GROUP g newbie STREAMS s 0
        XINFO CONSUMERS s g
        XGROUP DELCONSUMER s g alice
        XPENDING s g
        XINFO GROUPS s
        XCLAIM s g carol -100 2-0
        XAUTOCLAIM s g carol 0 0 COUNT 1000000000000
        XAUTOCLAIM s g carol 0 0 COUNT 8796093022208
        XAUTOCLAIM s g carol 0 0 COUNT 576460752303423487
        XAUTOCLAIM s g carol 0 0 COUNT 576460752303423488
        XAUTOCLAIM s nog carol 0 0 COUNT 576460752303423487
        XGROUP SETID s g $ ENTRIESREAD 4
        XINFO GROUPS s
        XREADGROUP GROUP g carol STREAMS s >
        """
    )


def test_resp3_empty_shapes(redis_server: RedisServer) -> None:
    pair = Pair(redis_server.connect(), proto=3)
    try:
        pair.script(
            """
            XGROUP CREATE s g $ MKSTREAM
            XINFO STREAM s
            XINFO STREAM s FULL
            XPENDING s g
            XPENDING s g - + 10
            XREADGROUP GROUP g c STREAMS s >
            XREADGROUP GROUP g c STREAMS s 0
            XAUTOCLAIM s g c 0 0
            XINFO GROUPS s
            XINFO CONSUMERS s g
            """
        )
    finally:
        pair.close()


def test_read_option_parsing_shared_with_xread(pair: Pair) -> None:
    """`parse_read_args` serves XREAD too: its errors must be Redis's for both commands."""
    _fill(pair, "s", ["1-0"])
    pair.script(
        """
        XREAD STREAMS s
        XREAD STREAMS s t 0
        XREAD GROUP g c STREAMS s 0
        XREAD NOACK STREAMS s 0
        XREAD FOO STREAMS s 0
        XREAD COUNT 1 s 0
        XREAD COUNT x STREAMS s 0
        XREAD BLOCK x STREAMS s 0
        XREAD BLOCK -1 STREAMS s 0
        XREAD COUNT 0 STREAMS s 0
        XREAD COUNT -2 BLOCK 0 STREAMS s 0
        xread count 1 streams s 0
        XREAD GROUP g STREAMS s 0
        XREADGROUP GROUP g c NOACK NOACK COUNT 1 COUNT 2 STREAMS s 0
        """
    )
