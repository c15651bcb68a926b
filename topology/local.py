"""`LocalTopology`: the embedded multi-region topology on localhost (docs/architecture.md,
"Other runtime facts").

One Tansu broker per region (memory-only, free loopback ports), the mirrors between them (threads
of this process), and one region node per region (a `python -m streams.node` subprocess, so a
test can SIGKILL it). Tests outside this repo drive the product through this class: keep its
surface stable.

    with LocalTopology(regions=3, manual_sync=True) as topo:
        topo.client(1).xadd("x", {"f": "v"})
        topo.sync()
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis

from topology.broker import EmbeddedBroker
from topology.config import RegionConfig, Topology, dumps
from topology.mirror import MirrorSet
from topology.ports import free_port


class TopologyError(RuntimeError):
    pass


class LocalTopology:
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
    ) -> None:
        """`external`: run nodes and mirrors for an existing topology (its own Kafka clusters)
        instead of starting embedded brokers; `port_base`: RESP ports base, base+1, ... instead
        of free ports; `node_args`: extra `python -m streams.node` options for every node (e.g.
        `["--requirepass", "pw"]`: `client(i)` and `sync()` then authenticate with it, or as the
        `--user NAME:PASS` given when there is no requirepass); every node gets the same options,
        so `--port` has no place there."""
        if external is not None:
            regions = len(external.regions)
        if not 1 <= regions <= 255:
            raise ValueError("regions must be within 1..255")
        self.n = regions
        self.manual_sync = manual_sync
        self.id_mode = id_mode
        self.mirror_naming = mirror_naming
        self.node_log_level = node_log_level
        self.debug_clock = debug_clock
        self.port_base = port_base
        self.external = external
        self.node_args = list(node_args or [])
        self.username: str | None = None
        self.password = _option(self.node_args, "--requirepass")
        user = _option(self.node_args, "--user")
        if not self.password and user is not None and ":" in user:
            self.username, self.password = user.split(":", 1)  # the default user is disabled
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="streams-topology-"))
        self.brokers: dict[int, EmbeddedBroker] = {}
        self.topology: Topology | None = None
        self.topology_path = self.workdir / "topology.toml"
        self.mirrors: MirrorSet | None = None
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._clients: dict[int, redis.Redis] = {}
        self.ports: dict[int, int] = {}
        self.bootstrap: dict[int, str] = {}
        self.names: dict[int, str] = {}

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
        self.topology = self.external or self._embedded()
        for cfg in self.topology.regions:
            self.names[cfg.id] = cfg.name
            self.ports[cfg.id] = cfg.resp_port
            self.bootstrap[cfg.id] = cfg.bootstrap
        self.topology_path.write_text(dumps(self.topology))
        self.mirrors = MirrorSet(self.topology)
        for i in self.ports:
            self._spawn(i)
        for i in self.ports:
            self._wait_ready(i)
        if not self.manual_sync:
            self.mirrors.start()

    def _embedded(self) -> Topology:
        for i in range(1, self.n + 1):
            broker = EmbeddedBroker(f"r{i}")
            broker.start()
            self.brokers[i] = broker
            self.bootstrap[i] = broker.bootstrap
            self.ports[i] = free_port() if self.port_base is None else self.port_base + i - 1
        return Topology(
            regions=tuple(
                RegionConfig(
                    name=f"r{i}",
                    id=i,
                    bootstrap=self.bootstrap[i],
                    resp_port=self.ports[i],
                    id_mode=self.id_mode,
                    alias=f"c{i}",
                )
                for i in range(1, self.n + 1)
            ),
            mirror_naming=self.mirror_naming,
        )

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        for i in list(self._procs):
            self._terminate(i)
        if self.mirrors is not None:
            self.mirrors.stop()
            self.mirrors = None
        for broker in self.brokers.values():
            broker.stop()
        self.brokers.clear()
        if self._own_workdir and not os.environ.get("STREAMS_KEEP_WORKDIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # --- the stable surface ----------------------------------------------------------------------

    def client(self, i: int) -> redis.Redis:
        """A redis-py client for region i (1-based), RESP2, bytes replies."""
        if i not in self.ports:
            raise KeyError(f"no region {i}: regions are 1..{self.n}")
        if i not in self._clients:
            self._clients[i] = redis.Redis(
                host="127.0.0.1",
                port=self.ports[i],
                decode_responses=False,
                protocol=2,
                username=self.username,
                password=self.password,
            )
        return self._clients[i]

    def pause(self) -> None:
        """Stop replication (the mirrors copy nothing until resume())."""
        assert self.mirrors is not None
        self.mirrors.pause()

    def resume(self) -> None:
        """Replicate continuously from now on (also ends manual_sync)."""
        assert self.mirrors is not None
        self.manual_sync = False
        self.mirrors.resume()
        self.mirrors.start()

    def sync(self, regions: list[int] | None = None, timeout: float = 30) -> None:
        """Replicate among `regions` (all when None) until each applied every op of the others.

        First every region logs what it holds back for coalescing (CRDT.FLUSH: the
        consecutive-XACK effect and pending local ops).
        """
        assert self.mirrors is not None
        chosen = list(regions) if regions is not None else sorted(self.ports)
        names = [self.names[i] for i in chosen]
        deadline = time.monotonic() + timeout
        for i in chosen:
            self.client(i).execute_command("CRDT.FLUSH")  # type: ignore[no-untyped-call]
        self.mirrors.copy_among(names, timeout)
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
                raise TimeoutError(
                    "sync did not converge: "
                    + ", ".join(
                        f"{self.names[i]} applied {self.names[j]} up to "
                        f"{vectors[i].get(self.names[j], 0)} of {vectors[j].get(self.names[j], 0)}"
                        for i, j in behind
                    )
                )
            if not self.manual_sync:
                time.sleep(0.01)
            else:
                self.mirrors.copy_among(names, timeout)
                time.sleep(0.005)

    def vector(self, i: int) -> dict[str, int]:
        flat = self.client(i).execute_command("CRDT.VECTOR")  # type: ignore[no-untyped-call]
        return {
            flat[k].decode(): int(flat[k + 1]) for k in range(0, len(flat), 2)
        }

    def kill_node(self, i: int) -> None:
        """SIGKILL region i's node (no clean shutdown: un-flushed local ops are lost)."""
        proc = self._procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        client = self._clients.pop(i, None)
        if client is not None:
            client.close()

    def start_node(self, i: int, extra_args: list[str] | None = None) -> None:
        """Start region i's node again; `extra_args`: more `python -m streams.node` options for
        this start only (e.g. `["--snapshot", FILE]`)."""
        if i in self._procs:
            raise TopologyError(f"region {i}'s node is already running")
        self._spawn(i, extra_args or [])
        self._wait_ready(i)

    # --- processes -----------------------------------------------------------------------------

    def _spawn(self, i: int, extra_args: list[str] | None = None) -> None:
        log = open(self.workdir / f"node-r{i}.log", "ab")
        cmd = [
            sys.executable,
            "-m",
            "streams.node",
            "--topology",
            str(self.topology_path),
            "--region",
            self.names[i],
            "--log-level",
            self.node_log_level,
        ] + (["--debug-clock"] if self.debug_clock else []) + self.node_args + (extra_args or [])
        self._procs[i] = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
        log.close()

    def _wait_ready(self, i: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        probe = redis.Redis(host="127.0.0.1", port=self.ports[i], socket_timeout=1)
        try:
            while True:
                proc = self._procs[i]
                if proc.poll() is not None:
                    raise TopologyError(
                        f"region r{i}'s node exited with {proc.returncode}:\n{self.node_log(i)}"
                    )
                try:
                    if probe.ping():
                        return
                except redis.AuthenticationError:
                    return  # it answered NOAUTH: it serves (node_args set a password)
                except (redis.ConnectionError, redis.TimeoutError):
                    pass  # not listening yet, or too busy to answer within the probe's timeout
                if time.monotonic() > deadline:
                    raise TopologyError(f"region r{i}'s node did not start:\n{self.node_log(i)}")
                time.sleep(0.05)
        finally:
            probe.close()

    def node_log(self, i: int, tail: int = 40) -> str:
        path = self.workdir / f"node-r{i}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-tail:])

    def _terminate(self, i: int) -> None:
        proc = self._procs.pop(i)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _option(args: list[str], name: str) -> str | None:
    """The value of `name VALUE` or `name=VALUE` in a node command line (the last one wins)."""
    value: str | None = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value
