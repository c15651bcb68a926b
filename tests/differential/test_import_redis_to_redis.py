"""`streams import` between two real redis-servers (a plain Redis as TARGET is taken as it is):
the fast tier's check of the import's logic without brokers. After the import XINFO STREAM FULL
(entries, counters, groups, PEL with delivery counts, consumers) is the source's but for the
clocks; a second run and `--match` write nothing twice; a foreign key is refused, then replaced.
The region's side (IDs modes, replication, MOVED) is tests/integration/test_import.py.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from differential.redis_server import RedisServer, require_redis_server
from streams import cli, exits


@pytest.fixture()
def pair() -> Iterator[tuple[redis.Redis, redis.Redis]]:
    require_redis_server()
    servers = [RedisServer(), RedisServer()]
    for server in servers:
        server.start()
    try:
        yield redis.Redis(port=servers[0].port), redis.Redis(port=servers[1].port)
    finally:
        for server in servers:
            server.stop()


def _import(a: redis.Redis, b: redis.Redis, *extra: str) -> tuple[int, str, str]:
    urls = [f"redis://127.0.0.1:{c.connection_pool.connection_kwargs['port']}" for c in (a, b)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["import", *urls, *extra])
    return code, out.getvalue(), err.getvalue()


def _without_clocks(value: Any) -> Any:
    """XINFO STREAM FULL without the times a copy cannot keep to the millisecond (seen-time,
    delivery times: the import carries them as the source's clock minus the idle time)."""
    if isinstance(value, dict):
        return {
            k: _without_clocks(v) for k, v in value.items() if k not in ("seen-time", "active-time")
        }
    if isinstance(value, list):
        return [_without_clocks(v) for v in value]
    if isinstance(value, int) and value > 10**12:  # a delivery time (PEL rows)
        return "<time>"
    return value


def _fill(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(2_500):
        pipe.xadd("jobs", {"i": i})
        pipe.xadd("logs", {"i": i, "j": "x" * (i % 7)})
    pipe.execute()
    r.xgroup_create("jobs", "workers", "0")
    r.xreadgroup("workers", "w1", {"jobs": ">"}, count=1_200)
    r.xreadgroup("workers", "w2", {"jobs": ">"}, count=100)
    r.xack("jobs", "workers", *[sid for sid, _ in r.xrange("jobs", count=1_000)])
    r.xgroup_createconsumer("jobs", "workers", "w3")
    r.xdel("logs", *[sid for sid, _ in r.xrevrange("logs", count=3)])  # last ID beyond entries
    r.set("counter", 1)


def test_copy_equals_source_and_reruns_double_nothing(
    pair: tuple[redis.Redis, redis.Redis],
) -> None:
    a, b = pair
    _fill(a)
    code, out, err = _import(a, b)
    assert code == exits.OK, err
    assert "4,997 entries written" in out and "skipped 1 key(s) of other types" in out
    for key in ("jobs", "logs"):
        assert b.xrange(key) == a.xrange(key)
        assert _without_clocks(b.xinfo_stream(key, full=True)) == _without_clocks(
            a.xinfo_stream(key, full=True)
        )
    code, out, err = _import(a, b)
    assert code == exits.OK and "0 entries written (4,997 already there" in out, err
    assert b.xlen("jobs") == 2_500 and b.xlen("logs") == 2_497

    a.xadd("jobs", {"i": "late"})  # the source goes on: a re-run brings the new entry only
    code, out, err = _import(a, b, "--match", "j*")
    assert code == exits.OK and "1 entries written (2,500 already there" in out, err
    assert b.xrange("jobs") == a.xrange("jobs")


def test_foreign_key_refused_then_replaced(pair: tuple[redis.Redis, redis.Redis]) -> None:
    a, b = pair
    a.xadd("s", {"f": "source"}, id="1-1")
    b.xadd("s", {"f": "target"}, id="1-1")
    code, out, err = _import(a, b)
    assert code == exits.DIFFERS and "key 's' exists in the target" in err
    assert b.xrange("s") == [(b"1-1", {b"f": b"target"})]
    code, out, err = _import(a, b, "--replace")
    assert code == exits.OK and "replaced 1" in out, err
    assert b.xrange("s") == [(b"1-1", {b"f": b"source"})]
