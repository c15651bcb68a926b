"""Any Redis client talks to any region: redis-py, sync and asyncio, RESP2 and RESP3.

Every scenario below is a list of redis-py API calls (`xadd(..., maxlen=...)`, `xreadgroup(...)`,
`xinfo_stream(..., full=True)`, ...). It runs once against a real region node (one module-scoped
`LocalTopology`, one region, liberal ID mode) and once against the real redis-server of the
session, through the same client variant, and the Python values redis-py parses out of the two
sets of replies must be equal. So the test proves both the wire shapes (RESP2 arrays, RESP3 maps
and nulls) and that redis-py's own response callbacks accept what the node sends.

Each scenario uses its own key names, the same on both servers (they appear in replies), so no
reset is needed between scenarios.

Normalised before comparing, because they come from clocks:
- server-generated IDs (XADD with `*`): the n-th generated ID of a scenario becomes `<gen n>` on
  both sides, wherever it appears later (XRANGE, XINFO last-generated-id, ...);
- idle times (`idle`, `time_since_delivered`) become `<clock>`, and absolute millisecond
  timestamps (delivery times and seen-time in XINFO STREAM FULL, anything >= 10**12) become
  `<time>`. A TIME given explicitly (XCLAIM ... TIME 1000) stays, so it is compared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import redis.asyncio
from differential.redis8_fields import redis7_parsed
from differential.redis_server import RedisServer

from topology.local import LocalTopology

CLOCK_KEYS = frozenset({"idle", "time_since_delivered", "inactive"})
TIMESTAMP_MIN = 10**12


# --- scenarios as data ---------------------------------------------------------------------------


@dataclass(frozen=True)
class K:
    """A key of the scenario; the runner prefixes it so every run has its own keys."""

    name: str


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def show(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.method}({', '.join(parts)})"


def c(method: str, *args: Any, **kwargs: Any) -> Call:
    return Call(method, args, kwargs)


def fill(key: str, ids: Sequence[str], **fields: str) -> list[Call]:
    body = fields or {"f": "v"}
    return [c("xadd", K(key), {**body, "n": i}, id=i) for i in ids]


ENTRIES: list[Call] = [
    c("xadd", K("s"), {"f": "v"}, id="1-1"),
    c("xadd", K("s"), {"f": "v2", "g": "w"}, id="1-2"),
    c("xadd", K("s"), {"a": "1"}, id="2"),
    c("xadd", K("s"), {"a": "2"}, id="2-*"),
    c("xadd", K("s"), {"f": "v"}, id="3-0", nomkstream=True),
    c("xadd", K("s"), {"f": "v"}, id="1-1"),  # equal or smaller than the top: an error
    c("xadd", K("s"), {"f": "v"}, id="0-0"),
    c("xadd", K("s"), {"x": "y"}),  # '*'
    c("xadd", K("s"), {"x": "z"}),
    c("xlen", K("s")),
    c("xlen", K("none")),
    c("xrange", K("s")),
    c("xrange", K("s"), min="1-2", max="+", count=2),
    c("xrange", K("s"), min="(1-1", max="2"),
    c("xrange", K("none")),
    c("xrevrange", K("s")),
    c("xrevrange", K("s"), max="2", min="-", count=1),
    c("xrevrange", K("s"), max="(3", min="(1-1"),
    c("xadd", K("s2"), {"f": "v"}, nomkstream=True),
    c("exists", K("s"), K("s2"), K("none")),
    c("type", K("s")),
    c("type", K("s2")),
    c("execute_command", "XADD", K("s"), "*", "f"),  # wrong arity
    c("delete", K("s"), K("none")),
    c("exists", K("s")),
    c("xrange", K("s")),
]

TRIMMING: list[Call] = [
    *fill("t", [f"{i}-1" for i in range(1, 11)]),
    c("xadd", K("t"), {"n": "11"}, id="11-1", maxlen=8, approximate=False),
    c("xlen", K("t")),
    c("xadd", K("t"), {"n": "12"}, id="12-1", minid="6", approximate=False),
    c("xrange", K("t")),
    c("xtrim", K("t"), maxlen=5, approximate=False),
    c("xtrim", K("t"), minid="10-1", approximate=False),
    c("xtrim", K("t"), maxlen=1),  # approximate: the one node is not full, nothing goes
    c("xtrim", K("t"), maxlen=2, approximate=True, limit=10),
    c("xtrim", K("t"), minid="11", limit=5),
    c("xdel", K("t"), "10-1", "99-1"),
    c("xdel", K("none"), "1-1"),
    c("xrange", K("t")),
    c("xinfo_stream", K("t")),
    c("execute_command", "XSETID", K("t"), "100-0"),
    c("xinfo_stream", K("t")),
    c("execute_command", "XSETID", K("t"), "200-0", "ENTRIESADDED", "50", "MAXDELETEDID", "150-0"),
    c("xinfo_stream", K("t")),
    c("execute_command", "XSETID", K("t"), "1-0"),  # below the top entry: an error
    c("execute_command", "XSETID", K("none"), "1-0"),
    c("xadd", K("t"), {"f": "v"}, id="150-0"),
    c("xadd", K("t"), {"f": "v"}, id="200-*"),
    c("xinfo_stream", K("t"), full=True),
    c("xtrim", K("t"), maxlen=-1, approximate=False),
]

APPROXIMATE: list[Call] = [
    *fill("big", [f"{i}-1" for i in range(1, 251)]),
    c("xinfo_stream", K("big")),
    c("xtrim", K("big"), maxlen=120),
    c("xlen", K("big")),
    c("xadd", K("big"), {"n": "251"}, id="251-1", maxlen=10),
    c("xlen", K("big")),
    c("xadd", K("big"), {"n": "252"}, id="252-1", minid="240", limit=100),
    c("xrange", K("big"), count=3),
    c("xinfo_stream", K("big")),
]

XREAD: list[Call] = [
    c("xadd", K("a"), {"f": "1"}, id="1-0"),
    c("xadd", K("a"), {"f": "2"}, id="2-0"),
    c("xadd", K("b"), {"g": "1"}, id="1-5"),
    c("xread", {K("a"): "0", K("b"): "0"}),
    c("xread", {K("a"): "0", K("b"): "0"}, count=1),
    c("xread", {K("a"): "1-0", K("b"): "1-5"}),
    c("xread", {K("b"): "1", K("a"): "1"}),
    c("xread", {K("a"): "$"}),
    c("xread", {K("a"): "5", K("none"): "0"}),
    c("xread", {K("a"): "+"}),
    c("xread", {K("a"): ">"}),
    c("xread", {K("a"): "0"}, block=50, count=1),
    c("xread", {K("a"): "$"}, block=50),
]

GROUPS: list[Call] = [
    c("xgroup_create", K("s"), "g1", id="0", mkstream=True),
    c("exists", K("s")),
    c("type", K("s")),
    c("xlen", K("s")),
    c("xinfo_stream", K("s")),
    c("xinfo_stream", K("s"), full=True),
    c("xinfo_groups", K("s")),
    c("xgroup_create", K("s"), "g1", id="0"),
    c("xgroup_create", K("none"), "g", id="0"),
    *fill("s", ["1-1", "2-1", "3-1"]),
    c("xgroup_create", K("s"), "g2", id="$"),
    c("xgroup_create", K("s"), "g3", id="1-0", entries_read=1),
    c("xgroup_create", K("s"), "g4", id="2-1", entries_read=-1),
    c("xinfo_groups", K("s")),
    c("xgroup_setid", K("s"), "g2", "0", entries_read=0),
    c("xgroup_setid", K("s"), "g3", "$"),
    c("xgroup_setid", K("s"), "nogroup", "$"),
    c("xinfo_groups", K("s")),
    c("xgroup_createconsumer", K("s"), "g1", "alice"),
    c("xgroup_createconsumer", K("s"), "g1", "alice"),
    c("xgroup_createconsumer", K("s"), "g1", "bob"),
    c("xinfo_consumers", K("s"), "g1"),
    c("xgroup_delconsumer", K("s"), "g1", "alice"),
    c("xgroup_delconsumer", K("s"), "g1", "carol"),
    c("xinfo_consumers", K("s"), "g1"),
    c("xgroup_destroy", K("s"), "g3"),
    c("xgroup_destroy", K("s"), "g3"),
    c("xgroup_destroy", K("none"), "g3"),
    c("xinfo_groups", K("s")),
    c("xinfo_consumers", K("s"), "nogroup"),
    c("xinfo_groups", K("none")),
    c("delete", K("s")),
    c("xinfo_groups", K("s")),
]

READGROUP: list[Call] = [
    *fill("s", ["1-1", "2-1", "3-1", "4-1", "5-1"]),
    *fill("t", ["1-1"]),
    c("xgroup_create", K("s"), "g", "0"),
    c("xgroup_create", K("t"), "g", "0"),
    c("xreadgroup", "g", "c1", {K("s"): ">"}, count=2),
    c("xreadgroup", "g", "c2", {K("s"): ">", K("t"): ">"}, count=1),
    c("xreadgroup", "g", "c1", {K("s"): "0"}),
    c("xreadgroup", "g", "c1", {K("s"): "1-1"}, count=1),
    c("xreadgroup", "g", "c3", {K("s"): ">"}, noack=True, count=1),
    c("xreadgroup", "g", "c1", {K("s"): ">"}),
    c("xreadgroup", "g", "c1", {K("s"): ">"}),
    c("xreadgroup", "g", "c1", {K("s"): ">"}, block=50),
    c("xreadgroup", "g", "c9", {K("s"): "0"}),
    c("xinfo_groups", K("s")),
    c("xpending", K("s"), "g"),
    c("xpending", K("t"), "g"),
    c("xpending_range", K("s"), "g", min="-", max="+", count=10),
    c("xpending_range", K("s"), "g", "-", "+", 10, consumername="c1"),
    c("xpending_range", K("s"), "g", "(1-1", "4", 2),
    c("xpending_range", K("s"), "g", "-", "+", 10, idle=100000),
    c("xpending_range", K("s"), "g", "-", "+", 10, idle=0, consumername="c2"),
    c("xack", K("s"), "g", "1-1", "9-9"),
    c("xack", K("s"), "g", "1-1"),
    c("xack", K("s"), "nogroup", "1-1"),
    c("xdel", K("s"), "2-1"),
    c("xreadgroup", "g", "c1", {K("s"): "0"}),
    c("xinfo_stream", K("s"), full=True),
    c("xinfo_groups", K("s")),
    c("xinfo_consumers", K("s"), "g"),
    c("xreadgroup", "nogroup", "c1", {K("s"): ">"}),
    c("xreadgroup", "g", "c1", {K("s"): "$"}),
    c("xreadgroup", "g", "c1", {K("none"): ">"}),
]

CLAIMS: list[Call] = [
    *fill("s", ["1-1", "2-1", "3-1", "4-1"]),
    c("xgroup_create", K("s"), "g", "0"),
    c("xreadgroup", "g", "c1", {K("s"): ">"}),
    c("xclaim", K("s"), "g", "c2", 0, ["1-1"]),
    c("xclaim", K("s"), "g", "c2", 0, ["2-1"], justid=True),
    c("xclaim", K("s"), "g", "c3", 100000, ["3-1"]),
    c("xclaim", K("s"), "g", "c3", 0, ["3-1"], idle=5000),
    c("xclaim", K("s"), "g", "c3", 0, ["4-1"], time=1000),
    c("xclaim", K("s"), "g", "c3", 0, ["1-1"], retrycount=7),
    c("xclaim", K("s"), "g", "c4", 0, ["9-9"], force=True),
    c("xadd", K("s"), {"f": "v"}, id="5-1"),
    c("xclaim", K("s"), "g", "c4", 0, ["5-1"]),
    c("xclaim", K("s"), "g", "c4", 0, ["5-1"], force=True, justid=True),
    c("xclaim", K("s"), "nogroup", "c4", 0, ["5-1"]),
    c("xpending_range", K("s"), "g", "-", "+", 10),
    c("xinfo_stream", K("s"), full=True),
    c("xautoclaim", K("s"), "g", "c5", 0, start_id="0-0", count=2),
    c("xautoclaim", K("s"), "g", "c5", 0, start_id="3", justid=True),
    c("xautoclaim", K("s"), "g", "c5", 100000, start_id="0-0"),
    c("xdel", K("s"), "3-1"),
    c("xautoclaim", K("s"), "g", "c6", 0, "0-0"),
    c("xautoclaim", K("s"), "g", "c6", 0, "0-0", count=1, justid=True),
    c("xautoclaim", K("s"), "nogroup", "c6", 0, "0-0"),
    c("xinfo_consumers", K("s"), "g"),
    c("xpending", K("s"), "g"),
    c("xinfo_stream", K("s"), full=True),
    c("xgroup_delconsumer", K("s"), "g", "c6"),
    c("xpending", K("s"), "g"),
]

SCENARIOS: dict[str, list[Call]] = {
    "entries": ENTRIES,
    "trimming": TRIMMING,
    "approximate": APPROXIMATE,
    "xread": XREAD,
    "groups": GROUPS,
    "readgroup": READGROUP,
    "claims": CLAIMS,
}


# --- running a scenario --------------------------------------------------------------------------


@dataclass(frozen=True)
class Failed:
    """A call that raised: its exception type and message, compared like a reply."""

    kind: str
    message: str


def _resolve(value: Any, prefix: str) -> Any:
    if isinstance(value, K):
        return prefix + value.name
    if isinstance(value, dict):
        return {_resolve(k, prefix): _resolve(v, prefix) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_resolve(v, prefix) for v in value)
    return value


def _failed(exc: Exception) -> Failed:
    return Failed(type(exc).__name__, str(exc))


def run_sync(client: redis.Redis, calls: list[Call], prefix: str) -> list[Any]:
    out: list[Any] = []
    for call in calls:
        method: Callable[..., Any] = getattr(client, call.method)
        try:
            out.append(method(*_resolve(call.args, prefix), **_resolve(call.kwargs, prefix)))
        except (redis.ResponseError, redis.DataError) as exc:
            out.append(_failed(exc))
    return out


async def run_async(client: redis.asyncio.Redis, calls: list[Call], prefix: str) -> list[Any]:
    out: list[Any] = []
    for call in calls:
        method: Callable[..., Any] = getattr(client, call.method)
        try:
            out.append(await method(*_resolve(call.args, prefix), **_resolve(call.kwargs, prefix)))
        except (redis.ResponseError, redis.DataError) as exc:
            out.append(_failed(exc))
    return out


# --- normalising ---------------------------------------------------------------------------------


def generated_ids(calls: list[Call], results: list[Any]) -> dict[Any, str]:
    """The IDs a server generated for XADD `*`, in order, mapped to `<gen n>`."""
    found: dict[Any, str] = {}
    for call, result in zip(calls, results, strict=True):
        if call.method == "xadd" and call.kwargs.get("id", "*") == "*":
            if isinstance(result, bytes | str) and result not in found:
                found[result] = f"<gen {len(found)}>"
    return found


def normalise(value: Any, gen: Mapping[Any, str], key: str | None = None) -> Any:
    if key in CLOCK_KEYS:
        assert isinstance(value, int) and value >= 0, f"{key} = {value!r}"
        return "<clock>"
    if isinstance(value, bool) or value is None or isinstance(value, Failed):
        return value
    if isinstance(value, int):
        return "<time>" if value >= TIMESTAMP_MIN else value
    if isinstance(value, bytes | str):
        return gen.get(value, value)
    if isinstance(value, dict):
        return {normalise(k, gen): normalise(v, gen, _key_text(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(normalise(v, gen) for v in value)
    return value


def _key_text(k: Any) -> str | None:
    if isinstance(k, bytes):
        return k.decode("utf-8", "replace")
    return k if isinstance(k, str) else None


def compare(calls: list[Call], ours: list[Any], theirs: list[Any]) -> None:
    ours_n = [normalise(redis7_parsed(r), generated_ids(calls, ours)) for r in ours]
    theirs_n = [normalise(r, generated_ids(calls, theirs)) for r in theirs]
    wrong = [
        f"  #{i} {call.show()}\n    node:  {a!r}\n    redis: {b!r}"
        for i, (call, a, b) in enumerate(zip(calls, ours_n, theirs_n, strict=True))
        if a != b
    ]
    assert not wrong, "node and redis-server differ:\n" + "\n".join(wrong)


# --- fixtures and tests --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def topology() -> Iterator[LocalTopology]:
    with LocalTopology(regions=1, manual_sync=True, id_mode="liberal") as topo:
        yield topo


VARIANTS = ["sync-resp2", "sync-resp3", "async-resp2", "async-resp3"]


def run_variant(variant: str, port: int, calls: list[Call], prefix: str) -> list[Any]:
    protocol = 3 if variant.endswith("resp3") else 2
    if variant.startswith("sync"):
        client = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=30)
        try:
            return run_sync(client, calls, prefix)
        finally:
            client.close()

    async def main() -> list[Any]:
        aclient = redis.asyncio.Redis(
            host="127.0.0.1", port=port, protocol=protocol, socket_timeout=30
        )
        try:
            return await run_async(aclient, calls, prefix)
        finally:
            await aclient.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_redis_py_parses_the_same_values_from_node_and_redis(
    topology: LocalTopology, redis_server: RedisServer, variant: str, scenario: str
) -> None:
    calls = SCENARIOS[scenario]
    prefix = f"{variant}:{scenario}:"
    theirs = run_variant(variant, redis_server.port, calls, prefix)
    ours = run_variant(variant, topology.ports[1], calls, prefix)
    compare(calls, ours, theirs)


@pytest.mark.parametrize("variant", VARIANTS)
def test_hello_and_connection_setup(topology: LocalTopology, variant: str) -> None:
    """redis-py's connection handshake (HELLO 3 for RESP3, CLIENT SETINFO) is accepted."""
    calls = [c("ping"), c("xadd", K("h"), {"f": "v"}, id="1-1"), c("xlen", K("h"))]
    results = run_variant(variant, topology.ports[1], calls, f"{variant}:hello:")
    assert results == [True, b"1-1", 1]


def test_resp3_maps_reach_redis_py_as_dicts(topology: LocalTopology) -> None:
    """In RESP3 the node answers XINFO and XREAD with maps, which redis-py hands out as dicts
    without its RESP2 pair-folding callbacks."""
    client = redis.Redis(host="127.0.0.1", port=topology.ports[1], protocol=3)
    try:
        key = "resp3:maps"
        client.xadd(key, {"f": "v"}, id="1-1")
        client.xgroup_create(key, "g", "0")
        read = client.xread({key: "0"})
        assert read == {key.encode(): [[(b"1-1", {b"f": b"v"})]]}
        info = client.execute_command("XINFO", "STREAM", key)  # type: ignore[no-untyped-call]
        assert isinstance(info, dict) and info[b"length"] == 1
        groups = client.execute_command("XINFO", "GROUPS", key)  # type: ignore[no-untyped-call]
        assert isinstance(groups[0], dict) and groups[0][b"name"] == b"g"
    finally:
        client.close()
