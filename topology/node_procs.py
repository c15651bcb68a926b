"""The node processes of a local topology: `python -m streams.node` children, one per node of
each region, started, waited for, killed (SIGKILL) and started again; their logs in the work
directory. A mixin of `topology.local.LocalTopology`, which holds the state it reads."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

from streams.config import Topology, dumps
from topology.certs import TlsFiles


class TopologyError(RuntimeError):
    pass


class NodeProcesses:
    names: dict[int, str]
    node_ports: dict[int, list[int]]
    node_metrics_ports: dict[int, list[int]]
    metrics: bool
    node_args: list[str]
    node_log_level: str
    debug_clock: bool
    topology_path: Path
    topology: Topology | None
    id_mode: str
    workdir: Path
    _procs: dict[tuple[int, int], subprocess.Popen[bytes]]
    username: str | None
    password: str | None
    _clients: dict[tuple[int, int], redis.Redis]
    _cluster_clients: dict[int, RedisCluster]
    tls_files: TlsFiles | None

    def _tls_client_options(self) -> dict[str, Any]:
        """redis-py options of a client of a topology over TLS (its CA, its certificate: the
        nodes require one), else none."""
        files = self.tls_files
        if files is None:
            return {}
        return {
            "ssl": True,
            "ssl_ca_certs": str(files.ca),
            "ssl_certfile": str(files.cert),
            "ssl_keyfile": str(files.key),
        }

    def _ports_of(self, i: int) -> list[int]:
        gone = getattr(self, "removed", {}).get(i)
        if gone is not None:
            raise TopologyError(
                f"region {gone} (id {i}) was removed from the topology: its id and name are"
                " never used again"
            )
        if i not in self.node_ports:
            raise KeyError(f"no region {i}: regions are {sorted(self.node_ports)}")
        return self.node_ports[i]

    def _every_node(self) -> list[tuple[int, int]]:
        """(region, node) for every node process, region by region, in node order."""
        return [(i, k) for i, ports in sorted(self.node_ports.items()) for k in range(len(ports))]

    def kill_node(self, i: int, node: int = 0) -> None:
        """SIGKILL node `node` of region i (no clean shutdown: un-flushed local ops are lost)."""
        proc = self._procs.pop((i, node))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self._drop_clients(i, node)

    def _drop_clients(self, i: int, node: int) -> None:
        client = self._clients.pop((i, node), None)
        if client is not None:
            client.close()
        cluster = self._cluster_clients.pop(i, None)  # its connection to that node is dead
        if cluster is not None:
            cluster.close()

    def stop_node(self, i: int, node: int = 0, timeout: float = 30.0) -> None:
        """Stop node `node` of region i cleanly (SIGTERM: it commits what it took, snapshots when
        enough came since its last snapshot, and exits); SIGKILL after `timeout` seconds."""
        self._drop_clients(i, node)
        self._terminate((i, node), timeout)

    def start_node(self, i: int, extra_args: list[str] | None = None, node: int = 0) -> None:
        """Start node `node` of region i again; `extra_args`: more `python -m streams.node`
        options for this start only (e.g. `["--snapshot", FILE]`)."""
        if (i, node) in self._procs:
            raise TopologyError(f"{self._node_name(i, node)} is already running")
        self._spawn(i, extra_args or [], node)
        self._wait_ready(i, node=node)

    def restart_nodes(self, id_mode: str | None = None) -> None:
        """Stop every node cleanly and start them all again, brokers and mirrors untouched;
        with `id_mode`, every region's nodes start in that ID mode (the topology file says so).
        The seed tables of the three ID modes share one set of JVM brokers and MirrorMaker 2
        processes this way, each table on keys of its own: a topology of those takes ~30 s to
        start and ~10 s to stop on 2 cores, the nodes ~5 s."""
        every = self._every_node()
        for i, node in every:
            self._drop_clients(i, node)
        self._terminate_all(every, 30.0)
        if id_mode is not None and self.topology is not None:
            self.id_mode = id_mode
            self.topology = dataclasses.replace(
                self.topology,
                regions=tuple(
                    dataclasses.replace(region, id_mode=id_mode) for region in self.topology.regions
                ),
            )
            self.topology_path.write_text(dumps(self.topology))
        for i, node in every:
            self._spawn(i, node=node)
        for i, node in every:
            self._wait_ready(i, node=node)

    # --- clients --------------------------------------------------------------------------------

    def client(self, i: int) -> redis.Redis:
        """A redis-py client for region i (1-based), RESP2, bytes replies, on its first node
        (with several nodes per region that node answers MOVED for other shards' keys: use
        `cluster_client(i)`)."""
        return self._node_client(i, 0)

    def cluster_client(self, i: int) -> RedisCluster:
        """A redis-py cluster client for region i, every node of the region a startup node
        (RESP2, bytes replies): it follows MOVED to the node owning a key's slot. Only for a
        region of several nodes: a lone node does not speak the Redis Cluster protocol."""
        ports = self._ports_of(i)
        if len(ports) == 1:
            raise TopologyError(
                f"region {self.names[i]} runs one node, which does not speak the Redis Cluster"
                " protocol: use client(i), or start the topology with nodes > 1"
            )
        if i not in self._cluster_clients:
            self._cluster_clients[i] = RedisCluster(
                startup_nodes=[
                    ClusterNode("127.0.0.1", port)  # type: ignore[no-untyped-call]
                    for port in ports
                ],
                decode_responses=False,
                protocol=2,
                username=self.username,
                password=self.password,
                **self._tls_client_options(),
            )
        return self._cluster_clients[i]

    def _node_client(self, i: int, node: int) -> redis.Redis:
        """A plain client of one node (admin commands: every node answers for its own shards)."""
        ports = self._ports_of(i)
        if not 0 <= node < len(ports):
            raise KeyError(f"region {self.names[i]} has no node {node} (nodes 0..{len(ports) - 1})")
        if (i, node) not in self._clients:
            self._clients[(i, node)] = redis.Redis(
                host="127.0.0.1",
                port=ports[node],
                decode_responses=False,
                protocol=2,
                username=self.username,
                password=self.password,
                **self._tls_client_options(),
            )
        return self._clients[(i, node)]

    # --- processes -----------------------------------------------------------------------------

    def _node_name(self, i: int, node: int) -> str:
        """How messages name a node: `region r1's node`, or `region r1's node 2` among several."""
        several = len(self._ports_of(i)) > 1
        return f"region {self.names[i]}'s node" + (f" {node}" if several else "")

    def _log_path(self, i: int, node: int) -> Path:
        """`node-r1.log` for a region's first node (as before shards), `node-r1-n2.log` after."""
        return self.workdir / (f"node-r{i}.log" if node == 0 else f"node-r{i}-n{node}.log")

    def _spawn(self, i: int, extra_args: list[str] | None = None, node: int = 0) -> None:
        log = open(self._log_path(i, node), "ab")
        # A region of one node runs it without --node (node 0 is the default), so such regions
        # run on any node build; several nodes need the option.
        which = ["--node", str(node)] if len(self._ports_of(i)) > 1 else []
        cmd = (
            [
                sys.executable,
                "-m",
                "streams.node",
                "--topology",
                str(self.topology_path),
                "--region",
                self.names[i],
                *which,
                "--log-level",
                self.node_log_level,
            ]
            + (["--debug-clock"] if self.debug_clock else [])
            + self.node_args
            + (["--metrics-port", str(self.node_metrics_ports[i][node])] if self.metrics else [])
            + (extra_args or [])
        )
        self._procs[(i, node)] = subprocess.Popen(
            cmd, stdout=log, stderr=log, start_new_session=True
        )
        log.close()

    def _wait_ready(self, i: int, timeout: float = 60, node: int = 0) -> None:
        deadline = time.monotonic() + timeout
        name = self._node_name(i, node)
        probe = redis.Redis(
            host="127.0.0.1",
            port=self._ports_of(i)[node],
            socket_timeout=1,
            **self._tls_client_options(),
        )
        try:
            while True:
                proc = self._procs[(i, node)]
                if proc.poll() is not None:
                    raise TopologyError(
                        f"{name} exited with {proc.returncode}:\n{self.node_log(i, node=node)}"
                    )
                try:
                    if probe.ping():
                        return
                except redis.AuthenticationError:
                    return  # it answered NOAUTH: it serves (node_args set a password)
                except (redis.ConnectionError, redis.TimeoutError):
                    pass  # not listening yet, or too busy to answer within the probe's timeout
                if time.monotonic() > deadline:
                    raise TopologyError(f"{name} did not start:\n{self.node_log(i, node=node)}")
                time.sleep(0.05)
        finally:
            probe.close()

    def node_log(self, i: int, tail: int = 40, node: int = 0) -> str:
        """The last `tail` lines of the log of node `node` of region i."""
        path = self._log_path(i, node)
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-tail:])

    def _terminate(self, key: tuple[int, int], timeout: float = 10.0) -> None:
        self._terminate_all([key], timeout)

    def _terminate_all(self, keys: list[tuple[int, int]], timeout: float = 10.0) -> None:
        """SIGTERM to every node of `keys` at once, then wait for them (SIGKILL for those still
        running `timeout` seconds a node after the signal: nodes that snapshot a large state
        at once share the cores). A clean stop commits, closes its producer and may snapshot,
        ~0.5 s a node, which one after another added up over the tests' many topologies."""
        procs = [self._procs.pop(key) for key in keys]
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout * len(procs)
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
