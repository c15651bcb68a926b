"""`streams up` keeps its data: stopped with Ctrl-C and started again with the same command
(Apache Kafka brokers keeping their logs under --data-dir, MirrorMaker 2), every region has the
same streams, groups, pending entries and digest; the node boots from the snapshot it stored and
reads the tail. While it runs, a second `streams up` on the same data directory is refused; once
it stopped, no process of it is left (no broker, no MirrorMaker).

Two regions here (the suite's time); the issue's three-region run is reported in
docs/durability.md.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from integration.test_streams_up import region_ports
from integration.test_streams_up import streams_up as cli_up

from streams import exits

KEYS = [b"d:%d" % i for i in range(4)]
GROUP = b"g"


@contextmanager
def streams_up(data: Path, state: Path) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """`streams up --regions 2` (durable) once it serves, with each region's RESP port; killed
    if the test leaves it running."""
    args = ("--regions", "2", "--data-dir", str(data), "--state-dir", str(state))
    with cli_up(*args, durable=True) as (proc, text):
        assert f"on Apache Kafka, durable (data in {data.resolve()})" in text, text
        assert "replicated by MirrorMaker 2" in text, text
        ports = region_ports(text)
        assert len(ports) == 2, text
        yield proc, ports


def write(client: redis.Redis, tag: bytes, count: int) -> None:
    """XADDs over the keys in pipelines, a group read of each key, half of it acknowledged."""
    pipe = client.pipeline(transaction=False)
    for n in range(count):
        pipe.xadd(KEYS[n % len(KEYS)], {b"t": tag, b"n": b"%d" % n})
    pipe.execute()
    for key in KEYS:
        read = client.xreadgroup(GROUP, b"c-" + tag, {key: ">"}, count=count // 8)
        ids = [eid for _stream, entries in read for eid, _ in entries]
        client.xack(key, GROUP, *ids[::2])


def observe(client: redis.Redis) -> dict[str, object]:
    """CRDT.DIGEST, XLEN, XPENDING (summary and entries, without idle times) and XINFO GROUPS."""
    seen: dict[str, object] = {"digest": client.execute_command("CRDT.DIGEST")}
    for key in KEYS:
        seen[f"xlen {key!r}"] = client.xlen(key)
        seen[f"xpending {key!r}"] = client.xpending(key, GROUP)
        seen[f"entries {key!r}"] = [
            (row["message_id"], row["consumer"], row["times_delivered"])
            for row in client.xpending_range(key, GROUP, "-", "+", 10_000)
        ]
        seen[f"groups {key!r}"] = client.xinfo_groups(key)
    return seen


def converged(clients: list[redis.Redis], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len({c.execute_command("CRDT.DIGEST") for c in clients}) > 1:
        assert time.monotonic() < deadline, "regions did not converge"
        time.sleep(0.05)


def processes_naming(*needles: str) -> list[str]:
    """Command lines of live processes that contain any of `needles` (this test's paths)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(needle in cmd for needle in needles):
            found.append(f"{entry.name}: {cmd}")
    return found


def test_streams_up_stopped_with_ctrl_c_comes_back_with_every_stream_group_and_pel(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with streams_up(data, tmp_path / "first") as (proc, ports):
        clients = [redis.Redis(port=p, socket_timeout=30) for p in ports]
        for key in KEYS:
            clients[0].xgroup_create(key, GROUP, id="0", mkstream=True)
        converged(clients)
        write(clients[0], b"r1", 400)
        write(clients[1], b"r2", 400)
        for client in clients:
            client.execute_command("CRDT.SNAPSHOT")  # the restart boots from it ...
        write(clients[0], b"r1-tail", 80)  # ... and reads this tail
        write(clients[1], b"r2-tail", 80)
        for client in clients:
            client.execute_command("CRDT.FLUSH")
        converged(clients)
        before = [observe(client) for client in clients]
        assert sum(before[0][f"xlen {k!r}"] for k in KEYS) == 960  # type: ignore[misc]

        second = subprocess.run(
            [sys.executable, "-m", "streams.cli", "up", "--regions", "2"]
            + ["--data-dir", str(data), "--state-dir", str(tmp_path / "second")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == exits.FAILED, second.stdout + second.stderr
        assert f"data directory {data} is in use" in second.stderr, second.stderr

        assert (data / "r1" / "kafka" / "kraft" / "meta.properties").is_file()
        topology = (tmp_path / "first" / "topology.toml").read_text()
        bootstraps = re.findall(r'bootstrap = "([\d.:]+)"', topology)
        assert len(bootstraps) == 2, topology
        for client in clients:
            client.close()
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, rest
    left = processes_naming(str(data), str(tmp_path / "first"), *bootstraps)
    assert not left, f"processes left after Ctrl-C: {left}"

    with streams_up(data, tmp_path / "again") as (proc, ports):
        clients = [redis.Redis(port=p, socket_timeout=30) for p in ports]
        after = [observe(client) for client in clients]
        for was, now in zip(before, after, strict=True):
            assert now == was
        booted = clients[0].execute_command("CRDT.INFO")
        facts = {booted[i]: booted[i + 1] for i in range(0, len(booted), 2)}
        assert facts[b"booted_from"].startswith(b"snapshot "), facts
        # Writing goes on where it stopped, and replicates.
        entry = clients[1].xadd(KEYS[0], {b"t": b"after"})
        converged(clients)
        assert clients[0].xrange(KEYS[0], min=entry, max=entry) == [(entry, {b"t": b"after"})]
        for client in clients:
            client.close()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert proc.returncode == 0
