"""The node's Prometheus metrics (`streams.node.metrics`) over nodes built from parts on in-memory
op logs: every family is served over HTTP with its help text, and the figures are the node's."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from memory_node import run, serving, stop_all
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from streams.config import RegionConfig, Topology
from streams.crdt import ops
from streams.errors import CommandError
from streams.node import metrics
from streams.node.node import NodeOptions, RegionNode
from streams.node.runtime.memory import MemoryLog
from streams.node.runtime.oplog import Decoded
from streams.ops.codec import decode
from streams.resp.server import Session, final

TOPOLOGY = Topology(
    regions=(
        RegionConfig("r1", 1, "127.0.0.1:1", 7001),
        RegionConfig("r2", 2, "127.0.0.1:2", 7002),
    ),
    mirror_naming="identity",
)

FAMILIES = {
    "streams_replication_lag_ops": "gauge",
    "streams_replication_lag_seconds": "gauge",
    "streams_replication_last_op_age_seconds": "gauge",
    "streams_applied_seq": "gauge",
    "streams_log_offsets_behind": "gauge",
    "streams_causal_waiting_ops": "gauge",
    "streams_snapshot_age_seconds": "gauge",
    "streams_snapshots_taken": "counter",
    "streams_tombstones": "gauge",
    "streams_tombstones_collected": "counter",
    "streams_records_skipped": "counter",
    "streams_commit_seconds": "histogram",
    "streams_batch_ops": "histogram",
}


@pytest.fixture(autouse=True)
def _nodes_stopped() -> Iterator[None]:
    """Every node a test started is stopped after it (`memory_node.stop_all`)."""
    yield
    stop_all()


def node_of(region: str, clock: Callable[[], float]) -> RegionNode:
    """A node on an in-memory op log with an event loop of its own (run only while a test
    drives it), nothing to catch up with."""
    return serving(RegionNode(NodeOptions(TOPOLOGY, region, clock=clock), log=MemoryLog(region)))


class Client:
    """One connection; `call` waits for a held reply's batch to commit."""

    def __init__(self, node: RegionNode) -> None:
        self.node = node
        self.session = Session(1)

    def call(self, *args: str) -> None:
        async def answer() -> None:
            reply = await self.node.handle(self.session, [a.encode() for a in args])
            assert not isinstance(await final(reply), CommandError)

        run(self.node, answer())


def r2_ops(count: int) -> list[ops.Op]:
    """`count` ops a real r2 node issued (one XADD each), as its log holds them."""
    r2 = node_of("r2", lambda: 1.0)
    client = Client(r2)
    for n in range(count):
        client.call("XADD", "s", "*", "n", str(n))
    log = r2.log
    assert isinstance(log, MemoryLog)
    found = [decode(r.value) for batch, _local in log.writers[0].appends for r in batch]
    return [op for op in found if isinstance(op, ops.Op)]


def scrape(node: RegionNode) -> dict[str, tuple[str, str, dict[str, float]]]:
    """GET /metrics from a real HTTP server while the node's event loop runs (the collector
    reads the node on its loop): per family, its type, help and samples by label text."""
    loop = run(node, _loop())
    server, _thread = start_http_server(0, "127.0.0.1", metrics.registry_of(node, loop))
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"

        def get() -> str:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())

        async def fetched() -> str:
            return await loop.run_in_executor(None, get)

        text = run(node, fetched())
    finally:
        server.shutdown()
        server.server_close()
    return {
        family.name: (
            family.type,
            family.documentation,
            {
                s.name + str(sorted(s.labels.items())): s.value
                for s in family.samples
                if "_created" not in s.name
            },
        )
        for family in text_string_to_metric_families(text)
        if not family.name.endswith("_created")  # prometheus_client's own, per histogram
    }


async def _loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_every_family_is_served_with_its_help_and_the_node_s_figures() -> None:
    held = r2_ops(3)
    r1 = node_of("r1", lambda: 3.5)
    client = Client(r1)
    for n in range(5):
        client.call("XADD", "s", "*", "n", str(n))
    client.call("XADD", "gone", "*", "n", "1")
    client.call("DEL", "gone")  # one DEL tombstone
    shard = r1.shards.shards[0]
    assert run(r1, shard.snapshotter.take()) is not None  # a snapshot needs nothing waiting
    # r2's first op applied, its third received: the second is known missing, the third waits.
    shard.replica.feed([Decoded("r2.oplog", 0, 0, held[0]), Decoded("r2.oplog", 0, 4, held[2])])

    families = scrape(r1)
    assert {name: kind for name, (kind, _help, _samples) in families.items()} == FAMILIES
    for name, (_kind, help_text, _samples) in families.items():
        assert help_text == metrics.HELP[name.removeprefix("streams_")], name

    def value(name: str, sample: str | None = None, **labels: str) -> float:
        key = (sample or name) + str(sorted({"region": "r1", **labels}.items()))
        return families[name][2][key]

    assert value("streams_replication_lag_ops", origin="r2") == 2
    assert value("streams_replication_lag_seconds", origin="r2") == 2.5  # issued at 1.0 s
    assert value("streams_replication_last_op_age_seconds", origin="r2") == 2.5
    assert value("streams_applied_seq", origin="r1") == 7  # 6 XADD, 1 DEL
    assert value("streams_applied_seq", origin="r2") == 1
    assert value("streams_causal_waiting_ops", shard="0") == 1
    assert value("streams_snapshot_age_seconds", shard="0") == 0
    assert value("streams_snapshots_taken", "streams_snapshots_taken_total", shard="0") == 1
    assert value("streams_tombstones", shard="0") == 1
    assert (
        value("streams_tombstones_collected", "streams_tombstones_collected_total", shard="0") == 0
    )
    assert value("streams_records_skipped", "streams_records_skipped_total", shard="0") == 0
    assert families["streams_log_offsets_behind"][2] == {}  # no Kafka reader on a MemoryLog


def test_the_histograms_observe_once_per_committed_transaction() -> None:
    r1 = node_of("r1", lambda: 1.0)
    run(r1, _loop())
    registry = metrics.registry_of(r1, None)
    client = Client(r1)
    client.call("MULTI")
    for n in range(4):
        client.call("XADD", "s", "*", "n", str(n))
    client.call("EXEC")  # one transaction of 4 ops
    client.call("XADD", "s", "*", "n", "5")  # one of 1
    labels = {"region": "r1", "shard": "0"}
    assert registry.get_sample_value("streams_batch_ops_count", labels) == 2
    assert registry.get_sample_value("streams_batch_ops_sum", labels) == 5
    assert registry.get_sample_value("streams_commit_seconds_count", labels) == 2
    assert registry.get_sample_value("streams_batch_ops_bucket", {**labels, "le": "1.0"}) == 1


def test_a_metrics_port_in_use_stops_the_start_with_a_clear_error(tmp_path: Path) -> None:
    """Checked before the node reaches for Kafka (the topology's broker does not exist)."""
    config = tmp_path / "topology.toml"
    config.write_text(
        '[[region]]\nname = "r1"\nid = 1\nbootstrap = "127.0.0.1:1"\nresp_port = 7999\n'
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "streams.node", "--topology", str(config), "--region", "r1"]
            + ["--metrics-port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"streams node r1: cannot start: --metrics-port {port}: cannot listen on "
        f"127.0.0.1:{port}: Address already in use (choose another port, or 0 for a free one)"
    )
