"""The pure parts of `streams.node.kafka.presence`: who a partition of `<region>.writers` names as
the writer, what a node taken over answers, and when a recorded pid is known to be gone. The
Kafka round trip (probe, answer, takeover) is tests/integration/test_takeover.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from streams.node.kafka.presence import (
    Identity,
    _decode,
    current_writer,
    identity_of,
    pid_gone,
    record,
    taken_over_text,
)


def _me(run: str = "a", node: int = 0, port: int = 6379) -> Identity:
    return Identity(run, "r1", node, f"127.0.0.1:{port}", (0, 1), 4242, "h", "h/boot/1", "T")


def test_the_newest_start_is_the_writer_unless_its_run_stopped() -> None:
    a, b = _me("a"), _me("b", port=6380)
    assert current_writer([]) is None
    assert current_writer([record("start", a)])["run"] == "a"  # type: ignore[index]
    assert current_writer([record("start", a), record("stop", a)]) is None
    started_b = [record("start", a), record("start", b, takeover=True)]
    assert current_writer(started_b)["run"] == "b"  # type: ignore[index]
    # the fenced a stopping later does not unseat b; b stopping leaves no writer
    assert current_writer([*started_b, record("stop", a)])["run"] == "b"  # type: ignore[index]
    assert current_writer([*started_b, record("stop", b)]) is None
    probes = [record("probe", b, target="a", probe="p"), record("alive", a, probe="p")]
    assert current_writer([record("start", a), *probes])["run"] == "a"  # type: ignore[index]


def test_a_record_round_trips_and_garbage_is_ignored() -> None:
    me = _me()
    rec = _decode(json.dumps(record("start", me, takeover=False)).encode())
    assert rec is not None and identity_of(rec) == me
    assert _decode(b"not json") is None and _decode(b"[1]") is None and _decode(None) is None


def test_a_taken_over_node_names_the_new_writer() -> None:
    text = taken_over_text("r1", record("start", _me("b", port=7000), takeover=True))
    assert text.startswith("another writer took over region r1 (fenced): node 0 of r1 at ")
    assert "127.0.0.1:7000" in text and "pid 4242 on host h" in text
    assert "started with --takeover" in text and "restart it with --takeover" in text
    raced = taken_over_text("r1 shard 2", record("start", _me("b"), takeover=False))
    assert "region r1 shard 2 (fenced)" in raced and "at the same time" in raced


def test_a_pid_is_gone_once_the_process_ended() -> None:
    assert not pid_gone(os.getpid())
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert pid_gone(proc.pid)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while not pid_gone(zombie.pid):  # exited but not reaped: a zombie counts as gone
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        zombie.wait()
