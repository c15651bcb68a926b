"""`streams up`, the README's main command: starts an embedded topology, prints where each region
and each of its nodes listens (with the node's slots and shards) and that the embedded brokers
keep nothing on disk, serves, and stops on Ctrl-C. These run it `--ephemeral` (speed); the
durable default is tested in tests/integration/test_durable_topology.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from topology.mm2 import EXAMPLE_TOPOLOGY


def streams(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "streams.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its brokers and nodes are its group: all go if a test fails
    )


@contextmanager
def streams_up(*args: str, durable: bool = False) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`streams up ARGS` once it serves, with what it printed until then; killed if the test
    leaves it running. Ephemeral brokers unless `durable`."""
    proc = streams("up", *args) if durable else streams("up", "--ephemeral", *args)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("replicating continuously"):
                break
        text = "".join(lines)
        assert "replicating continuously" in text, text
        yield proc, text
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def region_ports(text: str) -> list[int]:
    """The RESP port of each region's first node, from the region table."""
    return [int(p) for p in re.findall(r"^r\d+\s+\d+\s+[\d.]+:(\d+)", text, re.M)]


def replicates(
    first: redis.Redis | redis.RedisCluster, second: redis.Redis | redis.RedisCluster, key: bytes
) -> None:
    entry = first.xadd(key, {b"f": b"v"})
    deadline = time.monotonic() + 30
    while second.xlen(key) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert second.xrange(key) == [(entry, {b"f": b"v"})]


def stop_with_ctrl_c(proc: subprocess.Popen[str], text: str) -> None:
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, text + rest
    assert "stopping" in rest


def test_streams_up_serves_says_the_brokers_keep_nothing_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    with streams_up("--regions", "2", "--state-dir", str(tmp_path)) as (proc, text):
        assert "the brokers keep nothing once they stop" in text and "--data-dir" in text, text
        ports = region_ports(text)
        assert len(ports) == 2, text
        # One shard on one node: every slot on the region's port, and no cluster hint.
        for name, port in zip(("r1", "r2"), ports, strict=True):
            assert f"  {name}: 127.0.0.1:{port} (slots 0-16383, shard 0)\n" in text, text
        assert "redis-cli -c" not in text
        r1, r2 = (redis.Redis(port=p, socket_timeout=10) for p in ports)
        replicates(r1, r2, b"up")
        r1.close()
        r2.close()
        stop_with_ctrl_c(proc, text)


def test_streams_up_with_two_shards_prints_each_nodes_slots_and_replicates(
    tmp_path: Path,
) -> None:
    args = ("--regions", "2", "--shards", "2", "--state-dir", str(tmp_path))
    with streams_up(*args) as (proc, text):
        assert "2 shard(s) on 1 node(s) each" in text, text
        ports = region_ports(text)
        assert len(ports) == 2, text
        for name, port in zip(("r1", "r2"), ports, strict=True):
            assert f"  {name}: 127.0.0.1:{port} (slots 0-16383, shards 0-1)\n" in text, text
        assert "shards = 2" in (tmp_path / "topology.toml").read_text()
        r1, r2 = (redis.Redis(port=p, socket_timeout=10) for p in ports)
        for key in (b"a", b"b", b"c", b"{x}d"):  # keys of both shards
            replicates(r1, r2, key)
        r1.close()
        r2.close()
        status = subprocess.run(
            [sys.executable, "-m", "streams.cli", "status", "--state-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"r1 (id 1, strict) on 127.0.0.1:{ports[0]} (slots 0-16383, shards 0-1)" in (
            status.stdout
        )
        stop_with_ctrl_c(proc, text)


def test_streams_up_with_several_nodes_prints_each_and_the_cluster_hint(tmp_path: Path) -> None:
    args = ("--regions", "2", "--shards", "4", "--nodes", "2", "--state-dir", str(tmp_path))
    with streams_up(*args) as (proc, text):
        nodes = re.findall(
            r"^  (r\d): 127\.0\.0\.1:(\d+) \(slots 0-8191, shards 0-1\), "
            r"127\.0\.0\.1:(\d+) \(slots 8192-16383, shards 2-3\)$",
            text,
            re.M,
        )
        assert [name for name, _, _ in nodes] == ["r1", "r2"], text
        assert f"redis-cli -c -p {nodes[0][1]}" in text
        assert region_ports(text) == [int(first) for _, first, _ in nodes]
        clusters = [
            redis.RedisCluster(host="127.0.0.1", port=int(first), socket_timeout=10)
            for _, first, _ in nodes
        ]
        for key in (b"a", b"b", b"c", b"{x}d"):
            replicates(clusters[0], clusters[1], key)
        for cluster in clusters:
            cluster.close()
        stop_with_ctrl_c(proc, text)


def test_streams_up_with_metrics_prints_where_each_node_serves_them(tmp_path: Path) -> None:
    with streams_up("--regions", "2", "--metrics", "--state-dir", str(tmp_path)) as (proc, text):
        urls = dict(re.findall(r"^  (r\d): (http://127\.0\.0\.1:\d+/metrics)$", text, re.M))
        assert sorted(urls) == ["r1", "r2"], text
        r1 = redis.Redis(port=region_ports(text)[0], socket_timeout=10)
        r1.xadd(b"m", {b"f": b"v"})
        r1.close()
        with urllib.request.urlopen(urls["r1"], timeout=10) as answer:
            exposition = answer.read().decode()
        assert 'streams_batch_ops_count{region="r1",shard="0"} 1.0' in exposition, exposition
        assert "# HELP streams_replication_lag_ops" in exposition
        stop_with_ctrl_c(proc, text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shards", "2", "--nodes", "3"], "3 nodes cannot each own some of 2 shards"),
        (["--shards", "0"], r"shards must be within 1\.\.1024"),
        (
            ["--topology", str(EXAMPLE_TOPOLOGY), "--shards", "2"],
            r"--shards and --nodes shape embedded regions; with --topology the file says them",
        ),
    ],
)
def test_streams_up_refuses_shapes_it_cannot_run(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = streams("up", *args, "--state-dir", str(tmp_path))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 64, out  # usage (streams.exits.USAGE)
    assert re.search(message, out), out
    assert "starting" not in out  # refused before anything started
