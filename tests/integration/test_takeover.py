"""A second node for a region that has a live writer (the README's `python -m streams.node`
beside a running topology) refuses to start unless told `--takeover`, naming the running node,
which keeps serving writes. With `--takeover` the old node is fenced and says so on every write
and in `streams status`, also after the new node stopped (streams/node/kafka/presence.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from confluent_kafka import Producer
from support import answers, free_port, wait_until

from streams.cli import main
from streams.node.kafka.presence import PROBE_WAIT_S, Identity, record
from topology.local import LocalTopology

TAKEN_OVER = "another writer took over region r1 (fenced)"


def _node(topo: LocalTopology, port: int, *extra: str) -> list[str]:
    return [
        *[sys.executable, "-m", "streams.node", "--topology", str(topo.topology_path)],
        *["--region", "r1", "--port", str(port), *extra],
    ]


def _fenced(client: redis.Redis) -> bytes:
    info = client.execute_command("CRDT.INFO")
    return dict(zip(info[::2], info[1::2], strict=True))[b"fenced"]  # type: ignore[no-any-return]


def _refusal(client: redis.Redis) -> str:
    """The error of a write, once the node no longer answers LOADING."""
    for _ in range(500):
        try:
            client.xadd("s", {"n": "zombie"})
        except redis.BusyLoadingError:
            time.sleep(0.02)
            continue
        except redis.ResponseError as exc:
            return str(exc)
        raise AssertionError("the old node accepted a write")
    raise AssertionError("the old node stayed LOADING")


def test_a_second_node_without_takeover_refuses_naming_the_running_one() -> None:
    with LocalTopology(regions=1) as topo:
        assert topo.topology is not None
        first = topo.client(1)
        first.xadd("s", {"n": "before"})
        running = topo.topology.region("r1").resp_port
        started = time.monotonic()
        out = subprocess.run(_node(topo, free_port()), capture_output=True, text=True, timeout=120)
        assert out.returncode == 3, out.stderr
        assert "already has a live writer" in out.stderr, out.stderr
        assert f"node 0 of r1 at 127.0.0.1:{running}" in out.stderr, out.stderr
        assert "--takeover" in out.stderr
        assert time.monotonic() - started < 60
        first.xadd("s", {"n": "after"})  # the running node was not fenced
        assert first.xlen("s") == 2
        assert _fenced(first) == b""


def test_takeover_fences_the_running_node_which_says_so_on_every_write_and_in_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LocalTopology(regions=1) as topo:
        first = topo.client(1)
        first.xadd("s", {"n": "before"})
        port = free_port()
        log = open(tmp_path / "second.log", "wb")
        proc = subprocess.Popen(
            _node(topo, port, "--takeover"), stdout=log, stderr=log, start_new_session=True
        )
        try:
            second = redis.Redis(port=port)
            wait_until(lambda: answers(second), timeout=60)
            second.xadd("s", {"n": "new writer"})
            # The old node learns of the takeover from the new one's announcement (a fetch or
            # two); a write in that moment gets the Kafka fence's shorter "(fenced)" error.
            wait_until(lambda: f"127.0.0.1:{port}".encode() in _fenced(first), timeout=15)
            for _ in range(3):  # every write, not only the first
                error = _refusal(first)
                assert TAKEN_OVER in error, error
                assert f"at 127.0.0.1:{port}" in error and "--takeover" in error, error
            assert main(["status", "--topology", str(topo.topology_path)]) == 1
            status = capsys.readouterr().out
            assert f"fenced: {TAKEN_OVER}" in status, status
            assert f"127.0.0.1:{port}" in status, status
        finally:
            proc.terminate()
            proc.wait(timeout=15)
            log.close()
        error = _refusal(first)  # the new node stopped: the old one stays fenced, and says so
        assert TAKEN_OVER in error, error
        wait_until(lambda: first.xlen("s") == 2, timeout=30)  # it reads the new writer's ops


def test_a_node_that_crashed_here_or_elsewhere_needs_no_takeover() -> None:
    """Killed on this host: its pid is gone, so the restart does not ask. Recorded as running on
    another host (a record written by hand): it is asked, does not answer within the probe
    wait, and the start goes on."""
    with LocalTopology(regions=1) as topo:
        topo.client(1).xadd("s", {"n": "1"})
        topo.kill_node(1)
        topo.start_node(1)
        assert "not running any more" in topo.node_log(1)
        topo.client(1).xadd("s", {"n": "2"})
        topo.kill_node(1)
        elsewhere = Identity("x" * 32, "r1", 0, "10.9.9.9:6379", (0,), 77, "far", "far/b/1", "T")
        producer = Producer({"bootstrap.servers": topo.bootstrap[1]})
        producer.produce("r1.writers", json.dumps(record("start", elsewhere)).encode(), partition=0)
        assert producer.flush(10) == 0
        started = time.monotonic()
        topo.start_node(1)
        assert time.monotonic() - started >= PROBE_WAIT_S  # it asked, and waited for an answer
        assert "node 0 of r1 at 10.9.9.9:6379 (pid 77 on host far" in topo.node_log(1)
        topo.client(1).xadd("s", {"n": "3"})
        assert topo.client(1).xlen("s") == 3
