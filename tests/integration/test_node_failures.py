"""Failure handling of the runtime: a second writer fences the first, a corrupt record stops the
materializer with its position named, a mirror restarted mid-stream loses and repeats nothing."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time

import pytest
import redis
from confluent_kafka import Producer
from support import topic_values

from streams.config import dumps
from streams.ops.pack import decode_all
from topology.local import LocalTopology
from topology.mirror import MirrorSet
from topology.ports import free_port


def _oplog_seqs(bootstrap: str, topic: str) -> list[int]:
    return [record.seq for value in topic_values(bootstrap, topic) for record in decode_all(value)]


def _start_second_node(topo: LocalTopology, region: int) -> tuple[subprocess.Popen[bytes], int]:
    assert topo.topology is not None
    port = free_port()
    regions = tuple(
        dataclasses.replace(r, resp_port=port) if r.id == region else r
        for r in topo.topology.regions
    )
    path = topo.workdir / "second.toml"
    path.write_text(dumps(dataclasses.replace(topo.topology, regions=regions)))
    proc = subprocess.Popen(
        [
            *[sys.executable, "-m", "streams.node", "--topology", str(path)],
            *["--region", f"r{region}", "--takeover"],  # the first node is live: take it over
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if redis.Redis(port=port).ping():
                return proc, port
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_second_writer_for_a_region_fences_the_first() -> None:
    with LocalTopology(regions=1) as topo:
        first = topo.client(1)
        for i in range(10):
            first.xadd("s", {"n": i})
        proc, port = _start_second_node(topo, 1)
        try:
            second = redis.Redis(port=port)
            assert second.xlen("s") == 10
            try:
                first.xadd("s", {"n": "zombie"})
                raise AssertionError("the fenced writer accepted a write")
            except redis.ResponseError as exc:
                assert "fenced" in str(exc)
            for i in range(5):
                second.xadd("s", {"n": f"new{i}"})
            assert second.xlen("s") == 15
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:  # the fenced node reloads its state from the log (LOADING) first
                    if first.xlen("s") == 15:
                        break
                except redis.BusyLoadingError:
                    pass
                time.sleep(0.02)
            assert first.xlen("s") == 15  # reads go on, following the new writer's log
            assert _oplog_seqs(topo.bootstrap[1], "r1.oplog") == list(range(1, 16))
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_a_corrupt_record_stops_the_materializer_naming_its_position() -> None:
    with LocalTopology(regions=2) as topo:
        topo.client(1).xadd("s", {"a": "1"})
        topo.sync()
        producer = Producer({"bootstrap.servers": topo.bootstrap[2]})
        producer.produce("r1.oplog", key=b"s", value=b"\xc3\x01not an op")
        producer.flush(5)
        deadline = time.monotonic() + 10
        while True:
            info = dict(zip(*[iter(topo.client(2).execute_command("CRDT.INFO"))] * 2, strict=True))
            error = info[b"materializer_error"].decode()
            if error or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert "topic r1.oplog partition 0 offset" in error
        assert topo.client(2).xlen("s") == 1  # what was applied stays readable
        try:
            topo.client(2).xadd("s", {"b": "2"})
            raise AssertionError("a node with a stopped materializer accepted a write")
        except redis.ResponseError as exc:
            assert "cannot decode" in str(exc)


def test_a_mirror_restarted_mid_stream_loses_and_repeats_nothing() -> None:
    with LocalTopology(regions=2) as topo:
        assert topo.topology is not None and topo.mirrors is not None
        c1 = topo.client(1)
        for i in range(100):
            c1.xadd("s", {"n": i})
        topo.mirrors.copy_among(["r1", "r2"])
        topo.mirrors.stop()
        for i in range(100, 200):
            c1.xadd("s", {"n": i})
        topo.mirrors = MirrorSet(topo.topology)
        topo.sync()
        assert topo.client(2).xlen("s") == 200
        assert _oplog_seqs(topo.bootstrap[2], "r1.oplog") == list(range(1, 201))
        assert topo.client(1).execute_command("CRDT.DIGEST") == topo.client(2).execute_command(
            "CRDT.DIGEST"
        )


def test_a_write_kafka_refuses_is_refused_and_writes_resume_after_the_state_is_reloaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMS_MAX_RECORD_BYTES", str(256 * 1024))
    with LocalTopology(regions=1) as topo:
        client = topo.client(1)
        client.xadd("s", {"n": "1"})
        try:
            client.xadd("s", {"big": b"x" * (512 * 1024)})
            raise AssertionError("an op over the record limit was acknowledged")
        except redis.ResponseError as exc:
            assert "did not acknowledge" in str(exc)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.xadd("s", {"n": "2"})
                break
            except redis.ResponseError as exc:  # refused while the log is re-read
                assert "writes refused" in str(exc), exc
                assert time.monotonic() < deadline, "writes stayed refused"
                time.sleep(0.05)
        assert [f for _id, f in client.xrange("s")] == [{b"n": b"1"}, {b"n": b"2"}]
        assert _oplog_seqs(topo.bootstrap[1], "r1.oplog") == [1, 2]
