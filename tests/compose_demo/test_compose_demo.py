"""docker-compose.yml run for real, under podman-compose with no image pulled (issue 36), through
the entry point users get, `scripts/compose-local.sh`: three Apache Kafka brokers, MirrorMaker 2
and five region nodes in containers, built on a Debian base image made here with debootstrap.

What a user would check, in order (the tests share one running demo and run in file order):
every node answers PING on its published port; an XADD in r1 is read in r2 and r3; the SDK demo
service passes; a node killed inside its container (SIGKILL to its process, a crash) comes back
by its restart policy with what it served; `down` then `up` keeps every region's data (the
brokers' named volumes); `down -v` starts empty. The module always ends with `down -v`.

Skips, with the reason, where podman cannot run here, unless CI is set (then it fails: CI must
run it). Built images are kept between runs (podman's store): the first run builds them.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compose-local.sh"
PROJECT = "streams-compose-test"
PASSWORD = "compose-test-password"
NODES = {
    "region-r1": 6380,
    "region-r1-n1": 6390,
    "region-r2": 6381,
    "region-r2-n1": 6391,
    "region-r3": 6382,
}
FIRST_NODE = {"r1": 6380, "r2": 6381, "r3": 6382}
"""Each region's first node: shards 0-1 in r1 and r2 (same split), every shard in r3."""
UP_TIMEOUT = 1200
"""Seconds one `up` may take: the first builds both images (and the base) on a 2-core machine."""

pytestmark = [pytest.mark.slow, pytest.mark.compose]


def _unusable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the compose demo: {reason}", pytrace=False)
    pytest.skip(reason)


def _containers_conf(directory: Path) -> Path:
    """What these machines need (issue 36): no ulimits raised, runc (crun fails on hybrid
    cgroups) where installed."""
    conf = directory / "containers.conf"
    text = "[containers]\ndefault_ulimits = []\n"
    if shutil.which("runc"):
        text += '\n[engine]\nruntime = "runc"\n'
    conf.write_text(text)
    return conf


class Demo:
    """The demo as `scripts/compose-local.sh` runs it, forced onto podman."""

    def __init__(self, conf: Path) -> None:
        self.env = {
            **os.environ,
            "CONTAINERS_CONF": str(conf),
            "STREAMS_COMPOSE_ENGINE": "podman",
            "STREAMS_COMPOSE_PROJECT": PROJECT,
            "STREAMS_PASSWORD": PASSWORD,
            "STREAMS_COMPOSE_TIMEOUT": str(UP_TIMEOUT),
        }
        self.timings: dict[str, float] = {}

    def script(
        self, *args: str, timeout: float = UP_TIMEOUT + 300
    ) -> subprocess.CompletedProcess[str]:
        began = time.monotonic()
        result = subprocess.run(
            [str(SCRIPT), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.timings[" ".join(args)] = time.monotonic() - began
        return result

    def run_ok(self, *args: str) -> str:
        result = self.script(*args)
        assert result.returncode == 0, (
            f"compose-local.sh {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
        return result.stdout + result.stderr

    def podman(self, *args: str) -> str:
        return subprocess.run(
            ["podman", *args], env=self.env, capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()

    def container(self, service: str) -> str:
        """podman-compose 1.0.3's container name for a service."""
        return f"{PROJECT}_{service}_1"


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    for tool in ("podman", "podman-compose"):
        if shutil.which(tool) is None:
            _unusable(f"no {tool}: apt-get install -y podman podman-compose runc debootstrap")
    conf = _containers_conf(tmp_path_factory.mktemp("podman"))
    d = Demo(conf)
    info = subprocess.run(["podman", "info"], env=d.env, capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        _unusable(f"podman does not work here: {info.stderr.strip()[-300:]}")
    base = subprocess.run(
        ["podman", "image", "exists", "localhost/streams-base:bookworm"], env=d.env, timeout=60
    )
    if base.returncode != 0 and (os.geteuid() != 0 or shutil.which("debootstrap") is None):
        _unusable("the base image must be made with debootstrap, as root")
    busy = [p for p in [*NODES.values(), 19092, 19093, 19094] if _port_busy(p)]
    if busy:
        pytest.fail(f"ports the compose file publishes are taken on 127.0.0.1: {busy}")
    try:
        out = d.run_ok("up")
        assert "podman" in out  # it says which way it ran
        yield d
    finally:
        down = d.script("down", "-v", timeout=600)
        print(f"\ncompose timings (s): { ({k: round(v, 1) for k, v in d.timings.items()}) }")
        assert down.returncode == 0, down.stderr[-2000:]


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, password=PASSWORD, socket_timeout=10, decode_responses=True)


def _local_key(port: int, prefix: str) -> str:
    """A key the node on `port` serves itself (a key of another node's shards gets MOVED to a
    service name the host cannot resolve)."""
    client = _client(port)
    for i in range(1000):
        key = f"{prefix}-{i}"
        try:
            client.xlen(key)
            return key
        except redis.exceptions.MovedError:  # redis-py's reply error for MOVED
            continue
    raise AssertionError(f"no key of node {port} among 1000 tries")


def _wait_entry(port: int, key: str, entry_id: str, timeout: float = 180) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    client = _client(port)
    while True:
        try:
            found = client.xrange(key, entry_id, entry_id)
            if found:
                fields: dict[str, str] = found[0][1]
                return fields
        except (redis.ConnectionError, redis.TimeoutError):
            pass  # a node restarting
        if time.monotonic() > deadline:
            raise AssertionError(f"{key} {entry_id} not on 127.0.0.1:{port} in {timeout} s")
        time.sleep(1)


def _wait_ping(port: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if _client(port).ping():
                return
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"127.0.0.1:{port} did not answer PING in {timeout} s")
        time.sleep(1)


STATE: dict[str, tuple[str, str]] = {}
"""Entries written by the tests: region -> (key, entry id)."""


def test_every_node_answers_ping(demo: Demo) -> None:
    for service, port in NODES.items():
        assert _client(port).ping(), service
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=6382, password="wrong", socket_timeout=10).ping()


def test_an_xadd_in_r1_is_read_in_r2_and_r3(demo: Demo) -> None:
    key = _local_key(FIRST_NODE["r1"], "compose-r1")
    entry_id = _client(FIRST_NODE["r1"]).xadd(key, {"from": "r1"})
    STATE["r1"] = (key, entry_id)
    for region in ("r2", "r3"):
        assert _wait_entry(FIRST_NODE[region], key, entry_id) == {"from": "r1"}, region


def test_the_demo_service_passes(demo: Demo) -> None:
    out = demo.run_ok("demo")
    assert "podman" in out
    assert "1000 entries from producers in r1 and r2" in out and "0 missing, 0 duplicates" in out


def test_a_failing_demo_fails_the_script(demo: Demo) -> None:
    """The script's exit code is the demo's (podman-compose 1.0's `run` exits 0 regardless)."""
    wrong = dict(demo.env, STREAMS_PASSWORD="not-the-password")
    result = subprocess.run(
        ["bash", str(SCRIPT), "demo"], env=wrong, capture_output=True, text=True, timeout=300
    )
    assert result.returncode != 0
    assert "invalid username-password pair" in result.stdout + result.stderr


def test_a_node_killed_in_its_container_comes_back_by_its_restart_policy(demo: Demo) -> None:
    name = demo.container("region-r3")
    restarts = int(demo.podman("inspect", "--format", "{{.RestartCount}}", name) or 0)
    pid = int(demo.podman("inspect", "--format", "{{.State.Pid}}", name))
    assert pid > 0
    os.kill(pid, signal.SIGKILL)  # the node process in the container: a crash, not a stop
    deadline = time.monotonic() + 120
    while int(demo.podman("inspect", "--format", "{{.RestartCount}}", name) or 0) <= restarts:
        assert time.monotonic() < deadline, f"{name} was not restarted in 120 s"
        time.sleep(1)
    assert int(demo.podman("inspect", "--format", "{{.State.Pid}}", name)) != pid
    _wait_ping(FIRST_NODE["r3"])
    key, entry_id = STATE["r1"]
    assert _wait_entry(FIRST_NODE["r3"], key, entry_id) == {"from": "r1"}


def test_down_then_up_keeps_every_regions_data(demo: Demo) -> None:
    for region in ("r2", "r3"):
        # A key of shards 0-1: every region's first node serves it (r3's would otherwise be
        # MOVED to region-r1-n1 when read on r1).
        key = _local_key(FIRST_NODE["r1"], f"compose-{region}")
        STATE[region] = (key, _client(FIRST_NODE[region]).xadd(key, {"from": region}))
    for region, port in FIRST_NODE.items():  # every region has every entry before down
        for origin, (key, entry_id) in STATE.items():
            assert _wait_entry(port, key, entry_id) == {"from": origin}, (region, origin)
    demo.run_ok("down")
    assert not any(_port_busy(p) for p in NODES.values())
    demo.run_ok("up")
    for region, port in FIRST_NODE.items():
        for origin, (key, entry_id) in STATE.items():
            assert _wait_entry(port, key, entry_id, timeout=60) == {"from": origin}, (
                region,
                origin,
            )


def test_down_v_starts_empty(demo: Demo) -> None:
    demo.run_ok("down", "-v")
    volumes = demo.podman("volume", "ls", "--format", "{{.Name}}").split()
    assert not [v for v in volumes if v.startswith(f"{PROJECT}_")], volumes
    demo.run_ok("up")
    for region, port in FIRST_NODE.items():
        client = _client(port)
        assert client.dbsize() == 0, region
        for key, _ in STATE.values():
            assert client.exists(key) == 0, (region, key)
