"""Any arguments to the monitoring commands (SLOWLOG, LATENCY, CONFIG SET of their parameters,
INFO) get a reply from a node, never the internal error a bug gets: client input must not break
the node. The node runs on an in-memory op log with the slow log and latency monitor catching
everything, so the replies are built from real entries."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.config import RegionConfig, Topology
from streams.node.node import NodeOptions, RegionNode
from streams.node.runtime.memory import MemoryLog
from streams.reply import Reply
from streams.resp.encode import encode
from streams.resp.server import Session, final

TOPOLOGY = Topology(regions=(RegionConfig("r1", 1, "127.0.0.1:1", 7001),), mirror_naming="identity")
LOOP = asyncio.new_event_loop()
NODE = RegionNode(NodeOptions(TOPOLOGY, "r1"), log=MemoryLog())
LOOP.run_until_complete(NODE.start(serve_resp=False))
SESSION = Session(1)


@pytest.fixture(autouse=True, scope="module")
def _node_stopped() -> Iterator[None]:
    """The module's node is stopped, and its loop closed, after the module's tests: a node left
    running keeps tasks pending on a loop nobody drives again ("Task was destroyed")."""
    yield
    LOOP.run_until_complete(asyncio.wait_for(NODE.stop(), 10))
    LOOP.close()


def call(*args: bytes) -> Reply:
    async def answer() -> Reply:
        return await final(await NODE.handle(SESSION, list(args)))

    return LOOP.run_until_complete(answer())


for setup in (
    [b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"],
    [b"CONFIG", b"SET", b"latency-monitor-threshold", b"1"],
    [b"XADD", b"s", b"*", b"f", b"v" * 300],
    [b"XADD", b"s", b"*", *[b"%d" % i for i in range(50)]],
):
    call(*setup)
NODE.stats.latency.add("command", 5_000_000)

WORDS = st.sampled_from(
    [b"GET", b"LEN", b"RESET", b"HELP", b"LATEST", b"HISTORY", b"HISTOGRAM", b"DOCTOR", b"GRAPH"]
    + [b"command", b"fast-command", b"xadd", b"config", b"config|set", b"-1", b"0", b"10"]
    + [b"-2", b"99999999999999999999", b"x", b"", b"\x00\xff", b"1e2", b"nan", b"inf"]
)
ARG = st.one_of(WORDS, st.binary(max_size=12))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from([b"SLOWLOG", b"LATENCY", b"slowlog", b"latency"]),
    args=st.lists(ARG, max_size=5),
)
def test_slowlog_and_latency_answer_any_arguments(name: bytes, args: list[bytes]) -> None:
    reply = call(name, *args)
    assert b"internal error" not in encode(reply, 2)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    param=st.sampled_from(
        [
            b"latency-tracking-info-percentiles",
            b"latency-tracking",
            b"slowlog-log-slower-than",
            b"slowlog-max-len",
            b"latency-monitor-threshold",
        ]
    ),
    value=st.one_of(
        ARG, st.lists(st.floats(allow_nan=True), max_size=4).map(lambda f: str(f)[1:-1].encode())
    ),
)
def test_monitoring_parameters_take_any_value_or_refuse_it(param: bytes, value: bytes) -> None:
    reply = call(b"CONFIG", b"SET", param, value)
    assert b"internal error" not in encode(reply, 2)
    for section in (b"latencystats", b"commandstats", b"errorstats", b"stats"):
        assert isinstance(call(b"INFO", section), bytes)
    assert isinstance(call(b"LATENCY", b"DOCTOR"), bytes)
    call(b"CONFIG", b"SET", b"latency-tracking-info-percentiles", b"50 99 99.9")
    call(b"CONFIG", b"SET", b"slowlog-max-len", b"128")
