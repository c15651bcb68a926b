"""`streams replay --serve PORT`: redis-py against the replayed state equals redis-py against the
live node at the same cut.

A recorded 3-region history (writes in every region, XDEL, XTRIM, a DEL racing an XADD, a group
with deliveries, acks and a claim, a second group) with the live r1 looked at after each phase by
one function (`_look`: XRANGE, XREVRANGE, XLEN, XINFO STREAM and STREAM FULL, XINFO GROUPS and
CONSUMERS without idle times, XPENDING summary and extended without idle times, CRDT.DIGEST and
CRDT.VECTOR). The served view is moved to each cut's vector with REPLAY.SEEK, forward and back,
and the same function must see the same thing. The server is the real CLI in a subprocess.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from replay.serving import serving
from topology.local import LocalTopology

KEYS = ("s", "t")
READONLY = "You can't write against a replay of the op log (streams replay --serve)"


def _try(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except redis.ResponseError as exc:
        return f"error: {exc}"


def _look(c: redis.Redis) -> dict[str, Any]:
    """What a redis-py client sees; nothing that depends on the clock of the moment."""
    raw: Any = c.execute_command
    seen: dict[str, Any] = {"digest": raw("CRDT.DIGEST"), "vector": raw("CRDT.VECTOR")}
    for key in KEYS:
        seen[f"xrange {key}"] = c.xrange(key)
        seen[f"xrevrange {key}"] = c.xrevrange(key, count=3)
        seen[f"xlen {key}"] = c.xlen(key)
        seen[f"xinfo stream {key}"] = _try(c.xinfo_stream, key)
        seen[f"xinfo stream full {key}"] = _try(c.xinfo_stream, key, full=True)
    groups = _try(c.xinfo_groups, "s")
    seen["xinfo groups"] = groups
    for group in groups if isinstance(groups, list) else []:
        name = group["name"]
        seen[f"consumers {name!r}"] = [
            (x["name"], x["pending"]) for x in cast(list[Any], c.xinfo_consumers("s", name))
        ]
        seen[f"xpending {name!r}"] = c.xpending("s", name)
        seen[f"xpending + {name!r}"] = [
            (p["message_id"], p["consumer"], p["times_delivered"])
            for p in cast(list[Any], c.xpending_range("s", name, "-", "+", 100))
        ]
    return seen


@pytest.fixture(scope="module")
def recorded() -> Iterator[tuple[LocalTopology, list[dict[str, Any]]]]:
    with LocalTopology(regions=3, manual_sync=True, id_mode="strict") as topo:
        c1, c2, c3 = topo.client(1), topo.client(2), topo.client(3)
        cuts: list[dict[str, Any]] = []

        def cut() -> None:
            topo.sync()
            cuts.append({"vector": topo.vector(1), "look": _look(c1)})

        for i in range(5):
            c1.xadd("s", {"n": f"a{i}"})
            c2.xadd("s", {"n": f"b{i}"})
        c3.xadd("t", {"n": "c0"})
        c1.xgroup_create("s", "g", id="0")
        cut()

        c1.xadd("s", {"n": "a5"})
        got = cast(list[Any], c1.xreadgroup("g", "alice", {"s": ">"}, count=4))
        ids = [entry_id for entry_id, _f in got[0][1]]
        c1.xack("s", "g", ids[0], ids[1])
        c2.xdel("s", ids[2])
        c3.xtrim("s", maxlen=6)
        cut()

        c1.xadd("s", {"n": "a6"})
        c1.xreadgroup("g", "bob", {"s": ">"}, count=2)
        c1.xclaim("s", "g", "bob", 0, [ids[3]])
        c2.xadd("t", {"n": "raced"})
        c3.delete("t")  # concurrent with r2's XADD
        c1.xgroup_create("s", "g2", id="$")
        cut()
        yield topo, cuts


def _at(vector: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(vector.items()))


@pytest.fixture(scope="module")
def served(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[redis.Redis]:
    topo, cuts = recorded
    workdir: Path = tmp_path_factory.mktemp("serve")
    with serving(["--bootstrap", topo.bootstrap[1], "--at", _at(cuts[0]["vector"])], workdir) as c:
        yield c
    assert list(workdir.iterdir()) == [workdir / "serve.log"]  # no stray audit file


def _position(client: redis.Redis) -> dict[str, Any]:
    flat = client.execute_command("REPLAY.POSITION")  # type: ignore[no-untyped-call]
    return {k.decode(): v for k, v in zip(flat[::2], flat[1::2], strict=True)}


def _seek(client: redis.Redis, *where: str) -> dict[str, Any]:
    flat = client.execute_command("REPLAY.SEEK", *where)  # type: ignore[no-untyped-call]
    return {k.decode(): v for k, v in zip(flat[::2], flat[1::2], strict=True)}


def test_served_replay_answers_reads_as_the_live_node_did_at_each_cut(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], served: redis.Redis
) -> None:
    _topo, cuts = recorded
    first = _position(served)
    assert first["at"].decode() == _at(cuts[0]["vector"])
    assert _look(served) == cuts[0]["look"]
    for seen in [*cuts[1:], cuts[0], cuts[2]]:  # forward, then back, then forward again
        moved = _seek(served, _at(seen["vector"]))
        assert moved["at"].decode() == _at(seen["vector"])
        assert moved["digest"] == seen["look"]["digest"]
        assert _look(served) == seen["look"]
    # The views differ between cuts (the comparison above could not pass by accident).
    assert len({repr(c["look"]) for c in cuts}) == len(cuts)


def test_served_replay_refuses_writes_and_stays_unchanged(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], served: redis.Redis
) -> None:
    _topo, cuts = recorded
    _seek(served, "AT", _at(cuts[1]["vector"]))
    writes: list[tuple[str, ...]] = [
        ("XADD", "s", "*", "n", "x"),
        ("DEL", "s"),
        ("XDEL", "s", "1-1"),
        ("XTRIM", "s", "MAXLEN", "0"),
        ("XGROUP", "CREATE", "s", "new", "0"),
        ("XGROUP", "DESTROY", "s", "g"),
        ("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">"),
        ("XACK", "s", "g", "1-1"),
        ("XCLAIM", "s", "g", "carol", "0", "1-1"),
        ("FLUSHALL",),
    ]
    for write in writes:
        with pytest.raises(redis.ResponseError) as refused:
            served.execute_command(*write)  # type: ignore[no-untyped-call]
        assert str(refused.value) == READONLY, write
    assert _look(served) == cuts[1]["look"]
    with pytest.raises(redis.ResponseError, match="unsupported command 'set'"):
        served.set("k", "v")
    with pytest.raises(redis.ResponseError, match="not available on a replay"):
        served.execute_command("MULTI")  # type: ignore[no-untyped-call]
    # A blocking read that finds nothing answers nil at once: the view never moves by itself.
    assert served.xread({"s": "$"}, block=0) in (None, [])


def test_seek_moves_the_view_and_a_bad_position_leaves_it(
    recorded: tuple[LocalTopology, list[dict[str, Any]]], served: redis.Redis
) -> None:
    topo, cuts = recorded
    at_end = _seek(served, "END")
    assert at_end["at"].decode() == _at(cuts[-1]["vector"]) and at_end["asked"] == b"end"
    assert at_end["digest"] == cuts[-1]["look"]["digest"]
    offsets = _seek(served, "OFFSETS", "r1.oplog=0,r2.oplog=0,r3.oplog=0,r1.local=0")
    assert offsets["at"] == b"" and served.dbsize() == 0
    for bad in (("r9=1",), ("r1=100000",), ("TIME", "yesterday"), ("SOMEWHERE",)):
        with pytest.raises(redis.ResponseError):
            served.execute_command("REPLAY.SEEK", *bad)  # type: ignore[no-untyped-call]
        assert _position(served)["at"] == b""
    _seek(served, _at(cuts[1]["vector"]))
    assert _look(served) == cuts[1]["look"]
    # Connection basics, RESP3 included.
    assert served.echo("hi") == b"hi"
    resp3 = redis.Redis(port=served.connection_pool.connection_kwargs["port"], protocol=3)
    try:
        assert resp3.ping() is True
        assert resp3.xlen("s") == cuts[1]["look"]["xlen s"]
    finally:
        resp3.close()
