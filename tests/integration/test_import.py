"""`streams import` from a real redis-server into r1 of a real 3-region topology (embedded
brokers, semi-strict ID mode): every region then holds the source's entries, stream counters and
groups; r1 holds the consumers and pending entries (local to a region, seed 000); a second run,
and a run resumed after the import was killed, double nothing; an existing key is refused; a
strict region is refused before anything is written.

The source holds 3 streams of 100,000 entries in all, 2 of them with groups that have pending
entries (and acknowledged ones, an idle consumer, deleted entries), plus keys of other types.
The measured import rate is printed (`-s` shows it); the test asserts no speed.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from differential.redis_server import RedisServer, require_redis_server

from streams import cli, exits
from topology.local import LocalTopology

SIZES = {"orders": 50_000, "events": 30_000, "audit": 20_000}
STREAM_FIELDS = ("length", "last-generated-id", "max-deleted-entry-id", "entries-added")
"""XINFO STREAM fields that must be the source's in every region (first/last entry follow from
XRANGE)."""


@pytest.fixture(scope="module")
def source() -> Iterator[redis.Redis]:
    require_redis_server()
    server = RedisServer()
    server.start()
    try:
        client = redis.Redis(port=server.port, decode_responses=False)
        _fill(client)
        yield client
    finally:
        server.stop()


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    with LocalTopology(regions=3, id_mode="semi-strict") as topology:
        yield topology


def _fill(r: redis.Redis) -> None:
    for key, n in SIZES.items():
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.xadd(key, {"n": i, "payload": f"{key}-{i}" * 3})
        pipe.execute()
    r.xgroup_create("orders", "billing", "0")
    r.xgroup_create("orders", "shipping", "0")
    r.xreadgroup("billing", "alice", {"orders": ">"}, count=700)
    r.xreadgroup("billing", "bob", {"orders": ">"}, count=300)
    acked = [sid for sid, _ in r.xrange("orders", count=400)]
    r.xack("orders", "billing", *acked)
    r.xreadgroup("shipping", "carol", {"orders": ">"}, count=50)
    r.xgroup_createconsumer("orders", "shipping", "dave")  # a consumer with nothing pending
    r.xgroup_create("events", "audit-log", "0")
    r.xreadgroup("audit-log", "erin", {"events": ">"}, count=2_000)
    # Deleted entries past the group's cursor: max-deleted-entry-id and the lag estimate.
    late = [sid for sid, _ in r.xrange("events", min="(" + _last_read(r), count=5)]
    r.xdel("events", *late[1:3])
    r.set("plain-string", "x")
    r.hset("a-hash", "f", "v")


def _last_read(r: redis.Redis) -> str:
    groups = r.xinfo_groups("events")
    return str(groups[0]["last-delivered-id"].decode())


def _import(source: redis.Redis, target_port: int, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    src = f"redis://127.0.0.1:{source.connection_pool.connection_kwargs['port']}"
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["import", src, f"redis://127.0.0.1:{target_port}", *extra])
    return code, out.getvalue(), err.getvalue()


def _pending(r: Any, key: str, group: bytes) -> list[tuple[Any, Any, Any]]:
    rows = r.xpending_range(key, group, "-", "+", 100_000)
    return [(x["message_id"], x["consumer"], x["times_delivered"]) for x in rows]


def _idle(r: Any, key: str, group: bytes) -> list[int]:
    rows = r.xpending_range(key, group, "-", "+", 100_000)
    return [int(x["time_since_delivered"]) for x in rows]


def _assert_same(source: redis.Redis, topo: LocalTopology, keys: list[str]) -> None:
    """Every region: the source's entries and stream counters; the groups' last-delivered-id,
    entries-read and lag. r1 (the importing region) also: consumers and pending entries."""
    topo.sync()
    for key in keys:
        want = source.xrange(key)
        info = source.xinfo_stream(key)
        groups = source.xinfo_groups(key)
        for i in (1, 2, 3):
            r = topo.client(i)
            assert r.xrange(key) == want, (key, i)
            got = r.xinfo_stream(key)
            assert {f: got[f] for f in STREAM_FIELDS} == {f: info[f] for f in STREAM_FIELDS}
            theirs = r.xinfo_groups(key)
            if i == 1:
                assert theirs == groups, key
                for group in groups:
                    name = group["name"]
                    assert _pending(r, key, name) == _pending(source, key, name)
                    # Delivery times carried: idle times agree up to the test's own pace.
                    idle = zip(_idle(r, key, name), _idle(source, key, name), strict=True)
                    assert all(abs(mine - src) < 10_000 for mine, src in idle)
                    names = [c["name"] for c in r.xinfo_consumers(key, name)]
                    assert names == [c["name"] for c in source.xinfo_consumers(key, name)]
            else:  # consumers and pending entries are r1's (local to a region)
                local = {"consumers": 0, "pending": 0}
                assert theirs == [{**g, **local} for g in groups], (key, i)
                for group in groups:
                    assert _pending(r, key, group["name"]) == []


def test_import_three_streams_then_again(source: redis.Redis, topo: LocalTopology) -> None:
    started = time.monotonic()
    code, out, err = _import(source, topo.ports[1], "--progress")
    elapsed = time.monotonic() - started
    assert code == exits.OK, err
    total = sum(SIZES.values()) - 2  # 2 deleted in the source
    assert f"{total:,} entries written" in out
    assert "skipped 2 key(s) of other types" in out
    assert "2,000 already there" not in out
    print(f"\nimport of {total:,} entries into r1: {elapsed:.1f} s, {total / elapsed:,.0f} "
          f"entries/s\n{out}")  # fmt: skip
    if elapsed > 2:
        assert "import: entries:" in err  # the progress line, about once a second
    _assert_same(source, topo, list(SIZES))

    code, out, err = _import(source, topo.ports[1])
    assert code == exits.OK, err
    assert "0 entries written" in out
    assert f"{total:,} already there" in out
    _assert_same(source, topo, list(SIZES))


def test_interrupted_import_resumes_without_duplicates(
    source: redis.Redis, topo: LocalTopology
) -> None:
    pipe = source.pipeline(transaction=False)
    for i in range(40_000):
        pipe.xadd("resume:big", {"i": i})
    pipe.execute()
    source.xgroup_create("resume:big", "g", "0")
    source.xreadgroup("g", "frank", {"resume:big": ">"}, count=30)
    port = source.connection_pool.connection_kwargs["port"]
    argv = [sys.executable, "-m", "streams.cli", "import", f"redis://127.0.0.1:{port}"]
    argv += [f"redis://127.0.0.1:{topo.ports[1]}", "--match", "resume:*"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    r1 = topo.client(1)
    deadline = time.monotonic() + 60
    while r1.xlen("resume:big") < 5_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # a crash, mid-pipeline
    proc.communicate()
    copied = r1.xlen("resume:big")
    assert 5_000 <= copied < 40_000, copied
    assert r1.xinfo_groups("resume:big") == []  # groups come after the entries

    code, out, err = _import(source, topo.ports[1], "--match", "resume:*")
    assert code == exits.OK, err
    assert f"{40_000 - copied:,} entries written ({copied:,} already there" in out
    _assert_same(source, topo, ["resume:big"])


def test_existing_key_is_refused_unless_replace(source: redis.Redis, topo: LocalTopology) -> None:
    source.xadd("taken", {"from": "source"}, id="5-1")
    r1 = topo.client(1)
    r1.xadd("taken", {"from": "target"}, id="7-1")
    code, out, err = _import(source, topo.ports[1], "--match", "taken")
    assert code == exits.DIFFERS
    assert "key 'taken' exists in the target" in err and "--replace" in err
    assert "Traceback" not in err
    assert r1.xrange("taken") == [(b"7-1", {b"from": b"target"})]

    code, out, err = _import(source, topo.ports[1], "--match", "taken", "--replace")
    assert code == exits.OK, err
    _assert_same(source, topo, ["taken"])


def test_sharded_region_follows_moved(source: redis.Redis) -> None:
    """A region of 2 node processes: keys of the other node's slots are written there."""
    keys = ["audit", "events"]
    with LocalTopology(regions=1, shards=2, nodes=2, id_mode="semi-strict") as sharded:
        c = sharded.cluster_client(1)
        owners = {c.keyslot(k) < 8192 for k in keys}
        assert owners == {True, False}  # one key on each node
        code, out, err = _import(source, sharded.ports[1], "--match", "[ae][uv][de]*")
        assert code == exits.OK, err
        assert "2 stream(s)" in out
        for key in keys:
            assert c.xrange(key) == source.xrange(key)
            assert c.xinfo_groups(key) == source.xinfo_groups(key)
            for group in source.xinfo_groups(key):
                assert _pending(c, key, group["name"]) == _pending(source, key, group["name"])


def test_bad_urls_and_unreachable_hosts(source: redis.Redis, topo: LocalTopology) -> None:
    src = f"redis://127.0.0.1:{source.connection_pool.connection_kwargs['port']}"
    for argv, code in (
        (["import", "localhost:6379", src], exits.USAGE),
        (["import", src, "redis://127.0.0.1:notaport"], exits.USAGE),
        (["import", src, "redis://127.0.0.1:1"], exits.UNREACHABLE),
    ):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            assert cli.main(argv) == code, err.getvalue()
        assert err.getvalue().startswith("streams import: ") and "Traceback" not in err.getvalue()


def test_strict_region_is_refused_before_writing(source: redis.Redis) -> None:
    with LocalTopology(regions=1) as strict:
        code, out, err = _import(source, strict.ports[1], "--match", "audit")
        assert code == exits.FAILED
        assert "strict ID mode" in err and "semi-strict" in err
        assert strict.client(1).exists("audit") == 0
