"""CheckpointConsumer (seed 002), the `streams group` verb and the example scripts, against one
real region node."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.sdk import CheckpointConsumer, CheckpointTx, Producer, SQLiteStore, groupcli
from streams.sdk.checkpoint import SQLiteTx
from topology.local import LocalTopology

ROOT = Path(__file__).resolve().parents[2]


class Boom(Exception):
    pass


def test_checkpoint_consumer_commits_effects_with_the_checkpoint_and_skips_double_sends(
    url: str, stream: str, tmp_path: Path
) -> None:
    # The keys as `_idk` fields, as a producer writes them where the server has no XADD IDMP
    # (which would drop the double send before any consumer saw it).
    with Producer(url, stream) as producer:
        producer.send_many([{"v": i, "_idk": k} for i, k in zip(range(1, 6), "abcde", strict=True)])
        producer.send_many([{"v": 4, "_idk": "d"}, {"v": 5, "_idk": "e"}])  # double send
        producer.send_many([{"v": 6, "_idk": "f"}])
    store = SQLiteStore(tmp_path / "c.sqlite3")
    store.conn.execute("CREATE TABLE total (n INTEGER)")
    store.conn.execute("INSERT INTO total VALUES (0)")
    crash = {"at": 3}

    def handler(entry_id: str, fields: dict[bytes, bytes], tx: CheckpointTx) -> None:
        assert isinstance(tx, SQLiteTx)
        tx.conn.execute("UPDATE total SET n = n + ?", (int(fields[b"v"]),))
        if int(fields[b"v"]) == crash["at"]:
            raise Boom  # mid-batch: nothing of this batch may stay

    with CheckpointConsumer(url, stream, "c", handler, store, batch_size=3) as consumer:
        with pytest.raises(Boom):
            consumer.run_once()
        assert store.checkpoint("c") is None
        assert store.conn.execute("SELECT n FROM total").fetchone()[0] == 0
        crash["at"] = -1
        while consumer.run_once() or consumer.checkpoint != _last_id(url, stream):
            pass
        assert consumer.skipped == 2
    assert store.conn.execute("SELECT n FROM total").fetchone()[0] == 21
    store.close()


def _last_id(url: str, stream: str) -> str:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return client.xrevrange(stream, count=1)[0][0].decode()
    finally:
        client.close()


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def _group_verb(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    groupcli.add_parser(parser.add_subparsers(dest="command"))
    with _captured() as (out, err):
        code = groupcli.run(parser.parse_args(["group", *argv]))
    return code, out.getvalue(), err.getvalue()


def test_group_verb_shows_lag_pending_by_consumer_oldest_idle_and_dead_letters(
    region: LocalTopology, url: str, stream: str
) -> None:
    client = region.client(1)
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(10)])
    client.xgroup_create(stream, "g", "0")
    client.xreadgroup("g", "alice", {stream: ">"}, count=3)
    client.xreadgroup("g", "bob", {stream: ">"}, count=2)
    client.xadd(f"{stream}:dead", {"_dl_id": ids[0], "_dl_group": "g"})
    client.xadd(f"{stream}:dead", {"_dl_id": ids[1], "_dl_group": "other"})
    code, out, err = _group_verb("--endpoint", url, stream, "g")
    assert code == 0, err
    lines = out.splitlines()
    assert "region r1" in lines[0]
    assert any(line.split() == ["lag:", "5"] for line in lines), out
    assert any(line.split() == ["pending:", "5"] for line in lines), out
    assert any(line.split()[:2] == ["alice", "3"] for line in lines), out
    assert any(line.split()[:2] == ["bob", "2"] for line in lines), out
    oldest = next(line for line in lines if "oldest idle" in line)
    assert f"{ids[0]} held by alice" in oldest
    assert any("1 for this group (2 in" in line for line in lines), out


def test_group_verb_says_what_is_missing(url: str, stream: str) -> None:
    code, _, err = _group_verb("--endpoint", url, stream, "g")
    assert code == 3 and stream in err
    Producer(url, stream).send({"a": 1})
    code, _, err = _group_verb("--endpoint", url, stream, "nope")
    assert code == 3 and "no group 'nope'" in err
    code, _, err = _group_verb("--endpoint", "http://x", stream, "g")
    assert code == 64 and "redis://" in err


def test_streams_command_has_the_group_verb(url: str, stream: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "streams.cli", "group", "--endpoint", url, stream, "g"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert run.returncode == 3 and "no such key" in run.stderr.lower(), run.stderr


def test_rocket_rides_example_consumers_agree_despite_double_sends_and_crashes(url: str) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/sdk/rocket_rides.py"),
            "--endpoint",
            url,
            "--rides",
            "200",
            "--seed",
            "7",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "the consumers agree" in run.stdout
    assert "double-sent batches: 0" not in run.stdout  # the run did exercise double sends


def test_checkpoint_consumer_example_records_every_order_exactly_once(url: str) -> None:
    """The runnable CheckpointConsumer example docs/sdk.md points to (issue 26, item 6)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples/sdk/checkpoint_consumer.py"), "--endpoint", url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "resent 3 orders: the server kept 3 of them once (XADD IDMP)" in run.stdout, run.stdout
    assert "first run: 20 orders recorded, 0 double sends skipped" in run.stdout, run.stdout
    assert "after a restart: 5 new orders recorded" in run.stdout, run.stdout
    assert "25 rows for 25 orders: every order exactly once" in run.stdout, run.stdout
