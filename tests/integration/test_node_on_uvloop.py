"""A node on uvloop (STREAMS_EVENT_LOOP=uvloop) serves clients over real sockets as on asyncio's
loop: replies, pipelines, a blocked read woken by a write, a client that goes away."""

from __future__ import annotations

import threading

import pytest
import redis

from topology.local import LocalTopology

pytestmark = [pytest.mark.slow, pytest.mark.kafka]


def test_a_node_on_uvloop_serves_commands_pipelines_and_blocked_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.setenv("STREAMS_EVENT_LOOP", "uvloop")  # the node processes inherit it
    with LocalTopology(regions=1) as topo:
        maps = open(f"/proc/{topo._procs[(1, 0)].pid}/maps").read()
        assert "/uvloop/loop." in maps  # the node process really runs uvloop
        client = topo.client(1)
        pipe = client.pipeline(transaction=False)
        for i in range(500):
            pipe.xadd("s", {"i": str(i)})
        ids = pipe.execute()
        assert len(set(ids)) == 500 and client.xlen("s") == 500
        got: list[object] = []
        reader = threading.Thread(
            target=lambda: got.append(topo.client(1).xread({"t": "$"}, block=10_000))
        )
        reader.start()
        other = redis.Redis(port=topo.ports[1])
        while not any(
            c.get("cmd") == "xread"
            for c in other.client_list()  # type: ignore[union-attr]
        ):
            pass
        added = other.xadd("t", {"woke": "1"})
        reader.join(15)
        assert got and got[0] == [[b"t", [(added, {b"woke": b"1"})]]]
        gone = redis.Redis(port=topo.ports[1])
        gone.ping()
        gone.connection_pool.disconnect()
        assert client.xlen("s") == 500
