"""The node's CRDT-layer figures for Prometheus (`--metrics-port`): replication lag, commits,
snapshots, tombstones, records skipped.

Why a custom collector: the figures already live in the node's parts (the causal buffer, the
applied vectors, the snapshotter, the materializer's consumer), so they are read when Prometheus
scrapes, on the node's event loop (the parts are not thread-safe and the HTTP server runs in a
thread of its own), and nothing is counted twice. The write path pays only for the two
histograms, observed once per committed transaction (`WritePath.observe`), never per op.

What the node cannot see: the end of an origin region's op log on that region's own Kafka
cluster (the node talks only to its region's cluster), so "mirror lag" is what reached this
cluster and was not read yet (`streams_log_offsets_behind`), and a paused mirror shows in
`streams_replication_lag_ops` only once an op that did reach this region names the missing ops
in its causal context; until then only `streams_replication_last_op_age_seconds` grows (as it
also does when the origin is idle). Figures that compare the origin's clock with this node's are
local diagnostics, never used for anything that must agree across regions.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streams.crdt.region import Region
from streams.node.kafka.materializer import Materializer
from streams.node.node import RegionNode
from streams.node.runtime.shard import Shard

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 5.0
"""How long a scrape waits for the event loop (busy loading a snapshot, say) before failing."""

COMMIT_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS_OPS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384)

_SNAPSHOT_ID = re.compile(r"snapshot (\d+)-\d+ ")
"""A stored snapshot's id in `Loader.booted_from` ("snapshot <ms>-<seq> from ...")."""

HELP = {
    "replication_lag_ops": "Ops of the origin region this node knows exist but has not applied "
    "(summed over the node's shards): the highest op of the origin named by an op waiting in "
    "the causal buffer (its own dot or its causal context) minus the origin's applied seq. Ops "
    "no op that reached this region names are not known, so not counted",
    "replication_lag_seconds": "Seconds the oldest op waiting for the origin's missing ops has "
    "waited since it was issued (origin clock vs this node's; max over shards): a lower bound of "
    "the age of the oldest missing op; 0 when replication_lag_ops is 0",
    "replication_last_op_age_seconds": "Seconds since the newest op of the origin applied live was "
    "issued (origin clock vs this node's; CRDT.INFO ms_since_last_op). Grows when ops stop "
    "arriving, also when the origin is simply idle",
    "applied_seq": "Ops of the origin region applied by this node (its applied vector, summed "
    "over shards; CRDT.VECTOR)",
    "causal_waiting_ops": "Ops received but held in the causal buffer until the ops they depend "
    "on arrive (CRDT.INFO waiting_ops)",
    "log_offsets_behind": "Offsets of a topic on this region's Kafka cluster not read yet by the "
    "node (the broker's last reported high watermark minus the read position, summed over the "
    "node's shards; transaction markers count). For a mirrored origin log this is mirror lag "
    "as far as the node can see: records copied here but not applied. Records the mirror has "
    "not copied yet are on the origin's cluster, which the node does not read",
    "snapshot_age_seconds": "Seconds since the newest snapshot of the shard known to this node "
    "was taken (the one it wrote, else the one it booted from); absent when there is none",
    "snapshots_taken": "Snapshots this node wrote for the shard since it started",
    "tombstones": "DEL and XGROUP DESTROY tombstones the shard holds (dropped once every region "
    "applied them)",
    "tombstones_collected": "Tombstones the shard dropped by causal stability since start",
    "records_skipped": "Undecodable op-log records skipped as --skip-record named them "
    "(CRDT.INFO records_skipped), since the shard's reader started",
    "commit_seconds": "Time to commit one write batch to the op log (one Kafka transaction: "
    "append and commit), seconds, per transaction",
    "batch_ops": "Ops per committed write batch (one Kafka transaction), per transaction",
}


class MetricsPortError(OSError):
    """`--metrics-port` cannot be listened on (in use, not permitted)."""


@dataclass(frozen=True)
class Behind:
    """One shard's view of one origin: ops known missing, and when the oldest op waiting on
    them was issued (origin milliseconds)."""

    ops: int
    oldest_ms: int | None


def behind(region: Region) -> dict[int, Behind]:
    """Per origin with ops known but not applied, from the ops held in the causal buffer: an op
    held names its own dot and its causal context, so every op of an origin up to the highest
    seq named exists; the ops waiting for them were issued after them."""
    applied = region.causal.applied
    highest: dict[int, int] = {}
    oldest: dict[int, int] = {}
    for op in region.causal.held():
        for origin, seq in ((op.origin, op.seq), *op.ctx):
            if seq > applied.get(origin, 0):
                highest[origin] = max(highest.get(origin, 0), seq)
                oldest[origin] = min(oldest.get(origin, op.ts_ms), op.ts_ms)
    return {o: Behind(s - applied.get(o, 0), oldest.get(o)) for o, s in highest.items()}


def snapshot_ms(shard: Shard) -> int | None:
    """When the shard's newest known snapshot was taken (node clock ms; its id says it)."""
    if shard.snapshotter.last:
        return int(shard.snapshotter.last.split("-", 1)[0])
    found = _SNAPSHOT_ID.match(shard.loader.booted_from)
    return int(found.group(1)) if found else None


class NodeCollector(Collector):
    """Reads the node's figures at scrape time, on its event loop (`loop`; None: the caller
    is on it, as in tests that build a node from parts)."""

    def __init__(self, node: RegionNode, loop: asyncio.AbstractEventLoop | None) -> None:
        self.node = node
        self.loop = loop

    def describe(self) -> Iterable[Metric]:
        return []  # registering must not read the node from another thread

    def collect(self) -> Iterable[Metric]:
        loop = self.loop
        if loop is None or _running_loop() is loop:
            return self.families()

        async def on_loop() -> list[Metric]:
            return self.families()

        return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(SCRAPE_TIMEOUT_S)

    def families(self) -> list[Metric]:
        node = self.node
        name = node.name
        shards = node.shards.shards
        now_ms = node.clock.now_ms()
        names = node.report.names
        origins = [o for o in sorted(names) if o != node.region.id]

        def gauge(key: str, labels: Sequence[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"streams_{key}", HELP[key], labels=["region", *labels])

        def counter(key: str, labels: Sequence[str]) -> CounterMetricFamily:
            return CounterMetricFamily(f"streams_{key}", HELP[key], labels=["region", *labels])

        lag_ops = gauge("replication_lag_ops", ["origin"])
        lag_s = gauge("replication_lag_seconds", ["origin"])
        last_age = gauge("replication_last_op_age_seconds", ["origin"])
        applied = gauge("applied_seq", ["origin"])
        views = [behind(s.replica.region) for s in shards]
        vector = node.shards.vector()
        for origin in origins:
            label = [name, names[origin]]
            known = [v[origin] for v in views if origin in v]
            lag_ops.add_metric(label, sum(b.ops for b in known))
            waited = [now_ms - b.oldest_ms for b in known if b.oldest_ms is not None]
            lag_s.add_metric(label, max([0, *waited]) / 1000)
            newest = [s.replica.last_ts[origin] for s in shards if origin in s.replica.last_ts]
            if newest:
                last_age.add_metric(label, max(0, now_ms - max(newest)) / 1000)
        for origin in sorted(names):
            applied.add_metric([name, names[origin]], vector.get(origin, 0))

        offsets = gauge("log_offsets_behind", ["topic"])
        per_topic: dict[str, int] = {}
        for shard in shards:
            reader = shard.loader.reader
            if isinstance(reader, Materializer):
                for topic, n in reader.behind().items():
                    per_topic[topic] = per_topic.get(topic, 0) + n
        for topic, n in sorted(per_topic.items()):
            offsets.add_metric([name, topic], n)

        waiting = gauge("causal_waiting_ops", ["shard"])
        age = gauge("snapshot_age_seconds", ["shard"])
        taken = counter("snapshots_taken", ["shard"])
        held = gauge("tombstones", ["shard"])
        collected = counter("tombstones_collected", ["shard"])
        skipped = counter("records_skipped", ["shard"])
        for shard in shards:
            label = [name, str(shard.index)]
            region = shard.replica.region
            waiting.add_metric(label, region.causal.waiting)
            when = snapshot_ms(shard)
            if when is not None:
                age.add_metric(label, max(0, now_ms - when) / 1000)
            taken.add_metric(label, shard.snapshotter.taken)
            held.add_metric(label, region.state.tombstones_held())
            collected.add_metric(label, shard.tombstones_collected)
            reader = shard.loader.reader
            skipped.add_metric(label, reader.records_skipped if reader is not None else 0)
        return [
            lag_ops,
            lag_s,
            last_age,
            applied,
            offsets,
            waiting,
            age,
            taken,
            held,
            collected,
            skipped,
        ]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def instrument(node: RegionNode, registry: CollectorRegistry) -> None:
    """Register the two write-path histograms and hand each shard's write path its observer."""
    commit = Histogram(
        "streams_commit_seconds",
        HELP["commit_seconds"],
        ["region", "shard"],
        registry=registry,
        buckets=COMMIT_BUCKETS_S,
    )
    batch = Histogram(
        "streams_batch_ops",
        HELP["batch_ops"],
        ["region", "shard"],
        registry=registry,
        buckets=BATCH_BUCKETS_OPS,
    )
    for shard in node.shards.shards:
        labels = (node.name, str(shard.index))
        seconds, ops = commit.labels(*labels), batch.labels(*labels)

        def observe(
            elapsed: float, n: int, seconds: Histogram = seconds, ops: Histogram = ops
        ) -> None:
            seconds.observe(elapsed)
            ops.observe(n)

        shard.writepath.observe = observe


def registry_of(node: RegionNode, loop: asyncio.AbstractEventLoop | None) -> CollectorRegistry:
    """A registry of this node's own (several nodes may share a process in tests)."""
    return attach(CollectorRegistry(), node, loop)


def attach(
    registry: CollectorRegistry, node: RegionNode, loop: asyncio.AbstractEventLoop | None
) -> CollectorRegistry:
    instrument(node, registry)
    registry.register(NodeCollector(node, loop))
    return registry


@dataclass
class Exporter:
    """The metrics HTTP server of one node: listening first (so a port that cannot be used
    stops the start before the node reaches for Kafka), the node attached once built."""

    registry: CollectorRegistry
    server: WSGIServer
    thread: threading.Thread
    bind: str
    port: int

    @classmethod
    def listen(cls, bind: str, port: int) -> Exporter:
        """Serve /metrics on bind:port (0: a free port) from a thread, empty until `attach`;
        MetricsPortError names the port when it cannot be listened on."""
        registry = CollectorRegistry()
        try:
            server, thread = start_http_server(port, bind, registry)
        except OSError as exc:
            raise MetricsPortError(
                f"--metrics-port {port}: cannot listen on {bind}:{port}: {exc.strerror or exc} "
                "(choose another port, or 0 for a free one)"
            ) from exc
        return cls(registry, server, thread, bind, server.server_port)

    def attach(self, node: RegionNode) -> None:
        """Export `node`'s figures; call it on the node's event loop."""
        attach(self.registry, node, asyncio.get_running_loop())
        log.info("%s: metrics on http://%s:%d/metrics", node.name, self.bind, self.port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
