"""A throw-away real Redis Cluster of N masters for differential tests of `streams.cluster`.

`RedisCluster(n)` starts n Debian `redis-server`s with `cluster-enabled yes` (each its own
temporary directory and nodes.conf, no persistence), gives master i the config epoch i + 1 and
the slots of `streams.slots.shard_ranges(n)[i]` (what `Layout.build` gives node i of a region
with one shard per node), introduces them with CLUSTER MEET and waits until every node reports
`cluster_state:ok` and knows every other. `stop` always kills every process.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

from support import RawClient, free_port, wait_until

from differential.redis_server import find_redis_server
from streams.slots import shard_ranges

READY_TIMEOUT_S = 30.0
MAX_CLUSTER_PORT = 55535
"""redis-server refuses to start in cluster mode on a higher port."""


class RedisCluster:
    """`start()` runs the masters (on `ports`, ids in `ids`), `stop()` kills them."""

    def __init__(self, masters: int) -> None:
        found = find_redis_server()
        if found is None:
            raise FileNotFoundError("redis-server is not on PATH")
        self.executable = found
        self.masters = masters
        self.ports: list[int] = []
        self.ids: list[str] = []
        self._processes: list[subprocess.Popen[bytes]] = []
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="redis-cluster-")
        try:
            for i in range(self.masters):
                self._start_one(i)
            for i in range(self.masters):
                wait_until(lambda i=i: self._answers_ping(i), READY_TIMEOUT_S, 0.05)
            self._form()
        except BaseException:
            self.stop()
            raise

    def _start_one(self, i: int) -> None:
        assert self._dir is not None
        port = free_port()
        while port > MAX_CLUSTER_PORT:  # its bus port (port + 10000) must exist too
            port = free_port()
        home = os.path.join(self._dir.name, str(i))
        os.mkdir(home)
        self.ports.append(port)
        self._processes.append(
            subprocess.Popen(
                [
                    self.executable,
                    "--port", str(port),
                    "--bind", "127.0.0.1",
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", os.path.join(home, "nodes.conf"),
                    "--save", "",
                    "--appendonly", "no",
                    "--dir", home,
                    "--logfile", os.path.join(home, "redis.log"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )  # fmt: skip

    def _answers_ping(self, i: int) -> bool:
        if self._processes[i].poll() is not None:
            raise RuntimeError(f"redis-server {i} exited: {self.log(i)}")
        try:
            conn = RawClient(self.ports[i], timeout_s=1.0)
        except OSError:
            return False
        try:
            return conn.call([b"PING"]) == b"+PONG\r\n"
        except OSError:
            return False
        finally:
            conn.close()

    def _form(self) -> None:
        ranges = shard_ranges(self.masters)
        for i in range(self.masters):
            self.command(i, b"CLUSTER", b"SET-CONFIG-EPOCH", b"%d" % (i + 1))
            r = ranges[i]
            self.command(i, b"CLUSTER", b"ADDSLOTSRANGE", b"%d" % r.start, b"%d" % (r.stop - 1))
            self.ids.append(self.command(i, b"CLUSTER", b"MYID").decode())
        for port in self.ports[1:]:
            self.command(0, b"CLUSTER", b"MEET", b"127.0.0.1", b"%d" % port)
        wait_until(lambda: all(self._ready(i) for i in range(self.masters)), READY_TIMEOUT_S, 0.1)

    def _ready(self, i: int) -> bool:
        info = self.command(i, b"CLUSTER", b"INFO").decode()
        known = f"cluster_known_nodes:{self.masters}\r\n"
        return "cluster_state:ok\r\n" in info and known in info

    def command(self, i: int, *args: bytes) -> bytes:
        """One command on master i; its parsed reply as bytes (an error raises)."""
        conn = RawClient(self.ports[i])
        try:
            conn.send(*args)
            reply = conn.reply()
        finally:
            conn.close()
        if isinstance(reply, Exception):
            raise RuntimeError(f"{args!r} on master {i}: {reply}")
        assert isinstance(reply, bytes), reply
        return reply

    def connect(self, i: int) -> RawClient:
        return RawClient(self.ports[i])

    def log(self, i: int) -> str:
        if self._dir is None:
            return "(no log)"
        try:
            with open(os.path.join(self._dir.name, str(i), "redis.log"), errors="replace") as fh:
                return fh.read()[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
        self._processes = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
