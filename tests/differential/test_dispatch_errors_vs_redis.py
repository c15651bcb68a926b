"""Dispatch-level errors (unknown command, wrong arity) are byte-identical to redis-server's."""

from __future__ import annotations

import pytest

from differential.redis_server import RedisServer
from streams.commands.execute import run
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.resp.encode import encode

CASES = [
    [b"nope"],
    [b"nope", b"a b", b""],
    [b"FOO\x00x", b"a\xffb", b"c\x00d", b"x" * 200],
    [b"XADD", b"k"],
    [b"xrange", b"k", b"-"],
    [b"XGROUP"],
    [b"XGROUP", b"nosuch"],
    [b"XGROUP", b"CREATE", b"k"],
    [b"XINFO", b"STREAM"],
    [b"XINFO", b"bogus", b"k"],
    [b"EXISTS"],
    [b"TYPE", b"a", b"b"],
]


@pytest.mark.parametrize("args", CASES, ids=[repr(c)[:40] for c in CASES])
def test_dispatch_error_matches_redis(redis_server: RedisServer, args: list[bytes]) -> None:
    conn = redis_server.connect()
    try:
        theirs = conn.call(args)
    finally:
        conn.close()
    ours = encode(run(Region(1, IdMode.LIBERAL), args, 0).reply, 2)
    assert ours == theirs
