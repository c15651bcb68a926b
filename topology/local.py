"""`LocalTopology`: the embedded multi-region topology on localhost (docs/architecture.md,
"Other runtime facts").

One broker per region on free loopback ports (`broker`: "tansu", the embedded Tansu of the
light stack, the default here; or "kafka", Apache Kafka, `topology.brokers`), the mirrors
between them (`mirror`: "embedded", threads of this process; or "mm2", MirrorMaker 2 processes,
`topology.replication`), and the node processes of each region (`python -m streams.node`
subprocesses, so a test can SIGKILL one). Without `data_dir` everything is ephemeral; with it
(Apache Kafka only), each region's broker keeps its log dir under `data_dir/<region>/kafka`,
and a topology started again on the same directory finds every stream, group, PEL and snapshot
again (docs/durability.md). Tests outside
this repo drive the product through this class: keep its surface stable.

    with LocalTopology(regions=3, manual_sync=True) as topo:
        topo.client(1).xadd("x", {"f": "v"})
        topo.sync()

Shards (DESIGN.md section 13): `shards=S` gives the database S shards, `nodes=M` runs M node
processes per region, each owning a contiguous group of the shards (`streams.cluster.spread`) on
its own port; with M > 1 a region's nodes speak the Redis Cluster protocol and
`cluster_client(i)` follows their MOVED replies. `.ports[i]` stays the first node's port, so
everything written for one node per region keeps working.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

import redis
from redis.cluster import RedisCluster

from streams.cluster.layout import spread
from streams.config import MAX_SHARDS, NodeConfig, RegionConfig, Topology, dumps
from streams.config.kafka import DEFAULT_COMPRESSION
from streams.config.retention import parse_retention
from streams.node.kafka import log_retention
from streams.resp.tls import TlsOptions
from topology import join
from topology import regions as region_changes
from topology.apache_kafka import client_tls_settings
from topology.brokers import BROKERS, NODE_ARGS, Broker, BrokerHost, make_broker, restartable
from topology.certs import TlsFiles, make_tls_files
from topology.datadir import DataDirLock, in_parallel
from topology.mirror import MirrorSet
from topology.node_procs import NodeProcesses, TopologyError
from topology.ports import free_port
from topology.replication import (
    MIRRORS,
    EmbeddedReplication,
    Replication,
    make_replication,
)

__all__ = ["LocalTopology", "TopologyError"]


class LocalTopology(NodeProcesses):
    def __init__(
        self,
        regions: int = 3,
        manual_sync: bool = True,
        id_mode: str = "strict",
        mirror_naming: str = "identity",
        workdir: str | None = None,
        node_log_level: str = "WARNING",
        debug_clock: bool = False,
        port_base: int | None = None,
        external: Topology | None = None,
        node_args: list[str] | None = None,
        shards: int = 1,
        nodes: int = 1,
        metrics: bool = False,
        data_dir: str | Path | None = None,
        broker: str = "tansu",
        mirror: str = "embedded",
        broker_hosts: dict[int, BrokerHost] | None = None,
        retention: dict[str, int] | None = None,
        tls: bool = False,
        compression: str | None = None,
    ) -> None:
        """`external`: run nodes and mirrors for an existing topology (its own Kafka clusters)
        instead of starting embedded brokers (its file decides shards and nodes); `port_base`:
        RESP ports base, base+1, ... (region by region, node by node) instead of free ports;
        `node_args`: extra `python -m streams.node` options for every node (e.g.
        `["--requirepass", "pw"]`: `client(i)` and `sync()` then authenticate with it, or as the
        `--user NAME:PASS` given when there is no requirepass); every node gets the same options,
        so `--port` and `--node` have no place there. `shards`: the database's shard count
        (1..1024); `nodes`: node processes per region (1..shards), each owning a contiguous group
        of shards. `metrics`: every node serves Prometheus metrics (`--metrics-port`) on a free
        port: `.metrics_ports[i]` (the first node's), `.node_metrics_ports[i]` (each node's).
        `data_dir`: durable brokers (Apache Kafka), each region's log dir under
        `data_dir/r<i>/kafka`; the directory is locked while the topology runs (a second topology
        on it
        is refused with `DataDirInUse`). `broker`: "tansu" or "kafka" (`topology.brokers`);
        `mirror`: "embedded" or "mm2" (`topology.replication`); `broker_hosts`: per region, a
        network namespace and address to run its (Apache Kafka) broker on. `retention`: the
        topology file's `[retention]` table (`{"snapshots": N, "tail_seconds": S}`,
        `streams.config.retention`), applied by `apply_retention()`.
        `tls`: TLS
        everywhere (Apache Kafka only): a CA and a certificate under `data_dir/tls` (or the work
        directory), brokers serving SSL only with client certificates required, nodes serving
        RESP over TLS only (`.ports` are TLS ports, `client(i)` speaks TLS, `.tls_ca` is the CA
        file), mirrors and MirrorMaker 2 over SSL (`topology.certs`). `compression`: the op logs'
        compression.type ([topology] compression; None: the default)."""
        self.broker_hosts = dict(broker_hosts or {})
        self.retention = None if retention is None else parse_retention(retention)
        if broker not in BROKERS:
            raise ValueError(f"broker must be one of {', '.join(BROKERS)}, not {broker!r}")
        if mirror not in MIRRORS:
            raise ValueError(f"mirror must be one of {', '.join(MIRRORS)}, not {mirror!r}")
        self.broker = broker
        self.mirror = mirror
        if tls and broker != "kafka":
            raise ValueError(
                "tls=True needs broker='kafka': the embedded Tansu runs in plaintext here (its"
                " --cert/--key options are not wired or tested)"
            )
        if tls and external is not None:
            raise ValueError(
                "tls=True makes certificates for embedded brokers; an external topology says"
                " its own TLS settings ([region.tls], [region.kafka])"
            )
        self.tls = tls
        self.compression = compression
        self.tls_files: TlsFiles | None = None
        """The CA, certificate and key of a topology over TLS (None: plaintext)."""
        if external is not None:
            regions = len(external.regions)
            if (shards, nodes) != (1, 1):
                raise ValueError(
                    "shards and nodes come from the topology file when `external` is given"
                )
            shards = external.shards
        if not 1 <= regions <= 255:
            raise ValueError("regions must be within 1..255")
        if not 1 <= shards <= MAX_SHARDS:
            raise ValueError(f"shards must be within 1..{MAX_SHARDS}, not {shards}")
        self._groups = spread(shards, nodes)  # each node's shards; refuses nodes > shards
        self.n = regions
        self.shards = shards
        self.manual_sync = manual_sync
        self.id_mode = id_mode
        self.mirror_naming = mirror_naming
        self.node_log_level = node_log_level
        self.debug_clock = debug_clock
        self.port_base = port_base
        self.external = external
        self.node_args = list(node_args or [])
        if external is None and "--catch-up-wait-ms" not in self.node_args:
            self.node_args += NODE_ARGS[broker]  # what its nodes want (topology.brokers)
        self.username: str | None = None
        self.password = _option(self.node_args, "--requirepass")
        user = _option(self.node_args, "--user")
        if not self.password and user is not None and ":" in user:
            self.username, self.password = user.split(":", 1)  # the default user is disabled
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="streams-topology-"))
        self.brokers: dict[int, Broker] = {}
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self._lock: DataDirLock | None = None
        self.topology: Topology | None = None
        self.topology_path = self.workdir / "topology.toml"
        self.replication: Replication | None = None
        # Keyed by (region, node): node 0 is the region's first (and usually only) node.
        self._procs: dict[tuple[int, int], subprocess.Popen[bytes]] = {}
        self._clients: dict[tuple[int, int], redis.Redis] = {}
        self._cluster_clients: dict[int, RedisCluster] = {}
        self.ports: dict[int, int] = {}
        self.node_ports: dict[int, list[int]] = {}
        self.bootstrap: dict[int, str] = {}
        self.names: dict[int, str] = {}
        self.metrics = metrics
        self.metrics_ports: dict[int, int] = {}
        self.node_metrics_ports: dict[int, list[int]] = {}
        self._broker_failure: BaseException | None = None
        self.removed: dict[int, str] = {}
        """Regions removed while the topology ran (`remove_region`): id -> name."""
        self.timings: dict[str, float] = {}
        """How long `start` took to have the brokers, the nodes and the mirrors up (seconds)."""

    # --- context manager -------------------------------------------------------------------------

    def __enter__(self) -> LocalTopology:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Brokers, then the nodes (each serving once it read its logs), then the mirrors;
        `timings` says how long each step took (seconds, from the call)."""
        began = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.topology = self.external or self._embedded()
        brokers = self._start_brokers()
        for cfg in self.topology.regions:
            self.names[cfg.id] = cfg.name
            self.ports[cfg.id] = cfg.resp_port or cfg.tls_port
            self.node_ports[cfg.id] = [node.resp_port or node.tls_port for node in cfg.nodes]
            self.bootstrap[cfg.id] = cfg.bootstrap
            if self.metrics:
                self.node_metrics_ports[cfg.id] = [free_port() for _ in cfg.nodes]
                self.metrics_ports[cfg.id] = self.node_metrics_ports[cfg.id][0]
        self.topology_path.write_text(dumps(self.topology))
        self.replication = make_replication(
            self.mirror, self.topology, self.workdir, per_flow=self.manual_sync
        )
        for i, node in self._every_node():
            self._spawn(i, node=node)
        brokers.join()  # the nodes start meanwhile: they wait for their broker to answer
        if self._broker_failure is not None:
            raise self._broker_failure
        self.timings["brokers"] = time.monotonic() - began
        for i, node in self._every_node():
            self._wait_ready(i, node=node)
        self.timings["nodes"] = time.monotonic() - began
        self.replication.start(copying=not self.manual_sync)
        self.timings["mirrors"] = time.monotonic() - began

    def _start_brokers(self) -> threading.Thread:
        """Start every broker at once, on a thread: the node processes start meanwhile (a
        Python process takes a second or two to import and connect, a JVM broker several), and
        each node waits for its broker to answer before it reads its logs."""
        self._broker_failure = None

        def run() -> None:
            try:
                in_parallel([broker.start for broker in self.brokers.values()])
            except BaseException as exc:  # raised on the caller's thread
                self._broker_failure = exc

        thread = threading.Thread(target=run, name="brokers")
        thread.start()
        return thread

    @property
    def tls_ca(self) -> str | None:
        """The CA file clients of a topology over TLS trust (None: plaintext)."""
        return None if self.tls_files is None else str(self.tls_files.ca)

    @property
    def mirrors(self) -> MirrorSet | None:
        """The embedded mirrors (`mirror="embedded"`), for tests that drive one pair."""
        replication = self.replication
        return replication.mirrors if isinstance(replication, EmbeddedReplication) else None

    @mirrors.setter
    def mirrors(self, value: MirrorSet) -> None:
        assert isinstance(self.replication, EmbeddedReplication)
        self.replication.mirrors = value

    def _embedded(self) -> Topology:
        count = len(self._groups)
        if self.data_dir is not None:
            self._lock = DataDirLock(self.data_dir)
            self._lock.acquire()
        if self.tls:
            self.workdir.mkdir(parents=True, exist_ok=True)
            base = self.data_dir if self.data_dir is not None else self.workdir
            self.tls_files = make_tls_files(base / "tls")
        for i in range(1, self.n + 1):
            own = None if self.data_dir is None else self.data_dir / f"r{i}" / "kafka"
            self.brokers[i] = make_broker(
                self.broker, f"r{i}", own, self.broker_hosts.get(i), self.tls_files
            )
        for i, broker in self.brokers.items():
            self.bootstrap[i] = broker.bootstrap
            self.node_ports[i] = [
                free_port() if self.port_base is None else self.port_base + (i - 1) * count + k
                for k in range(count)
            ]
        files = self.tls_files
        # Over TLS every node serves RESP over TLS only (resp_port 0, as Redis's `port 0`).
        plain, secure = (0, 1) if files is not None else (1, 0)
        return Topology(
            regions=tuple(
                RegionConfig(
                    name=f"r{i}",
                    id=i,
                    bootstrap=self.bootstrap[i],
                    resp_port=self.node_ports[i][0] * plain,
                    tls_port=self.node_ports[i][0] * secure,
                    id_mode=self.id_mode,
                    alias=f"c{i}",
                    # One node: the region's default node (its file reads as before shards).
                    nodes=tuple(
                        NodeConfig(k, "127.0.0.1", port * plain, group, tls_port=port * secure)
                        for k, (port, group) in enumerate(
                            zip(self.node_ports[i], self._groups, strict=True)
                        )
                    )
                    if count > 1
                    else (),
                    tls=TlsOptions(str(files.cert), str(files.key), str(files.ca))
                    if files is not None
                    else TlsOptions(),
                    kafka=client_tls_settings(files) if files is not None else {},
                )
                for i in range(1, self.n + 1)
            ),
            mirror_naming=self.mirror_naming,
            shards=self.shards,
            retention=self.retention,
            compression=self.compression or DEFAULT_COMPRESSION,
        )

    def crash(self) -> None:
        """SIGKILL every process of the topology at once (nodes, brokers, mirrors) and drop
        the mirrors and the data directory lock, as a power cut would leave it; a new topology on
        the same `data_dir` then recovers (fault tests). Stops this object for good."""
        for key in list(self._procs):
            self._procs[key].kill()
        if self.replication is not None:
            self.replication.kill()
        for broker in self.brokers.values():
            broker.kill()
        for key in list(self._procs):
            self._procs.pop(key).wait()
        self.close()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        for cluster in self._cluster_clients.values():
            cluster.close()
        self._cluster_clients.clear()
        self._terminate_all(list(self._procs))
        # An ephemeral topology's brokers and mirrors are discarded: nothing starts on their data
        # again, and a clean stop of MirrorMaker 2 alone took ~9 s of each test's time.
        ephemeral = self.data_dir is None
        if self.replication is not None:
            if ephemeral:
                self.replication.discard()
            else:
                self.replication.stop()
            self.replication = None
        in_parallel(
            [broker.discard if ephemeral else broker.stop for broker in self.brokers.values()]
        )
        self.brokers.clear()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._own_workdir and not os.environ.get("STREAMS_KEEP_WORKDIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # --- the stable surface ----------------------------------------------------------------------

    def apply_retention(self) -> log_retention.Report:
        """Delete what the `retention` policy lets go from every op log now (as `streams
        retention apply` does); ValueError without a policy."""
        assert self.topology is not None, "start the topology first"
        return log_retention.apply(self.topology)

    def remove_region(self, i: int, force: bool = False) -> None:
        """Region i leaves while the others serve (`topology.regions`): its nodes stop, its ops
        reach every other region (unless `force`), the topology file lists it as removed (the
        nodes stop waiting for it in causal stability), its mirrors and broker stop. Its id and
        name are never used again."""
        region_changes.remove_region(self, i, force)

    def add_region(self) -> int:
        """A new region joins while the others serve and write (`topology.join`): a fresh id
        (never one a region had), the running nodes count it, its node boots from a peer's
        snapshot, the mirrors carry its log and the others'. Returns its index (its id).
        Ephemeral plaintext topologies only; over op logs a retention policy truncated, with the
        embedded mirror only (else TopologyError)."""
        return join.add_region(self)

    def pause(self) -> None:
        """Stop replication (the mirrors copy nothing until resume())."""
        assert self.replication is not None
        self.replication.pause()

    def resume(self) -> None:
        """Replicate continuously from now on (also ends manual_sync)."""
        assert self.replication is not None
        self.manual_sync = False
        self.replication.resume()

    def kill_mirror(self) -> None:
        """SIGKILL the mirrors (MirrorMaker 2's processes; the embedded mirror's threads are
        stopped at once): nothing is copied until `start_mirror`."""
        assert self.replication is not None
        self.replication.kill()

    def start_mirror(self) -> None:
        """Start the mirrors again after `kill_mirror`: they resume from what they committed
        (MirrorMaker 2) or from what the targets hold (the embedded mirror)."""
        assert self.replication is not None
        self.replication.restart()

    def kill_broker(self, i: int) -> None:
        """SIGKILL region i's broker (its nodes refuse writes and serve reads until it is back)."""
        self.brokers[i].kill()

    def start_broker(self, i: int, timeout: float | None = None) -> None:
        """Start region i's broker again on its data, on the same port (the topology names it);
        `timeout`: how long it may take to be ready (default: the broker's own start timeout)."""
        broker = self.brokers[i]
        restartable(broker)
        if timeout is None:
            broker.start()
        else:
            broker.start(timeout)

    def sync(self, regions: list[int] | None = None, timeout: float = 30) -> None:
        """Replicate among `regions` (all when None) until each applied every op of the others.

        First every node of those regions logs what it holds back for coalescing (CRDT.FLUSH:
        the consecutive-XACK effect and pending local ops). Convergence is judged on region
        totals (`vector`): with one seq per shard, region i applied everything of region j once
        its total for j reaches j's own total for j.
        """
        assert self.replication is not None
        chosen = list(regions) if regions is not None else sorted(self.ports)
        names = [self.names[i] for i in chosen]
        deadline = time.monotonic() + timeout
        for i in chosen:
            for node in range(len(self._ports_of(i))):
                self._node_client(i, node).execute_command("CRDT.FLUSH")  # type: ignore[no-untyped-call]
        self.replication.copy_among(names, timeout)
        try:
            self._converge(chosen, deadline, names, timeout)
        finally:
            self.replication.hold()

    def _converge(
        self, chosen: list[int], deadline: float, names: list[str], timeout: float
    ) -> None:
        assert self.replication is not None
        while True:
            vectors = {i: self.vector(i) for i in chosen}
            behind = [
                (i, j)
                for i in chosen
                for j in chosen
                if vectors[i].get(self.names[j], 0) < vectors[j].get(self.names[j], 0)
            ]
            if not behind:
                return
            if time.monotonic() > deadline:
                failed = self.replication.failures()
                raise TimeoutError(
                    ("mirrors failed: " + "; ".join(failed) + "; " if failed else "")
                    + "sync did not converge: "
                    + ", ".join(
                        f"{self.names[i]} applied {self.names[j]} up to "
                        f"{vectors[i].get(self.names[j], 0)} of {vectors[j].get(self.names[j], 0)}"
                        for i, j in behind
                    )
                )
            if self.manual_sync and self.mirror == "embedded":
                self.replication.copy_among(names, timeout)
                time.sleep(0.005)
            else:
                time.sleep(0.01)

    def vector(self, i: int) -> dict[str, int]:
        """Region i's applied ops per origin region, summed over its shards: what CRDT.VECTOR
        answers, added up here from every node's CRDT.SHARDS (each node reports its own shards,
        so no node has to ask the others)."""
        total: dict[str, int] = {}
        for node in range(len(self._ports_of(i))):
            shards = self._node_client(i, node).execute_command("CRDT.SHARDS")  # type: ignore[no-untyped-call]
            for _index, _digest, flat in shards:
                for k in range(0, len(flat), 2):
                    origin = flat[k].decode()
                    total[origin] = total.get(origin, 0) + int(flat[k + 1])
        return total


def _option(args: list[str], name: str) -> str | None:
    """The value of `name VALUE` or `name=VALUE` in a node command line (the last one wins)."""
    value: str | None = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value
