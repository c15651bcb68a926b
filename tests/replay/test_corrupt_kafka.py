"""Corrupt records: the replay verbs fail closed; `--on-corrupt skip` goes on, writes each skipped
position to the audit file (the default one in the current directory, or `--audit`), and says the
state is tainted (exit 2). A run that skips nothing creates no audit file anywhere.

One embedded broker holding region r1's logs as a node writes them, with one undecodable record
between valid ops.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streams.cli import main
from streams.crdt import ops
from streams.crdt.region import Region
from streams.kafka.topics import ensure_topics
from streams.ops.codec import encode
from topology.broker import EmbeddedBroker


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, str]]:
    """(bootstrap, the digest of the valid ops folded)."""
    broker = EmbeddedBroker("replay-corrupt")
    broker.start()
    try:
        boot = broker.bootstrap
        ensure_topics(boot, ["r1.oplog", "r1.local"])
        region = Region(1)
        valid = [
            region.issue(ops.XAdd(b"k", (10 + i, 0), (b"n", b"%d" % i)), 10 + i) for i in range(3)
        ]
        producer = Producer({"bootstrap.servers": boot})
        for value in [encode(valid[0]), encode(valid[1]), b"\x00not an op", encode(valid[2])]:
            producer.produce("r1.oplog", value=value, partition=0)
        producer.flush(10)
        yield boot, region.state.digest()
    finally:
        broker.stop()


def test_a_corrupt_record_fails_closed_and_leaves_no_file(
    cluster: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    boot, _digest = cluster
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "--bootstrap", boot, "--region", "r1", "--digest"]) == 2
    assert "cannot decode the record at topic r1.oplog partition 0 offset 2" in (
        capsys.readouterr().err
    )
    assert main(["history", "--bootstrap", boot, "--region", "r1", "k"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_skip_writes_the_audit_file_and_marks_the_state_tainted(
    cluster: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    boot, digest = cluster
    monkeypatch.chdir(tmp_path)
    audit = tmp_path / "audit" / "skipped.jsonl"
    audit.parent.mkdir()
    skip = ["--region", "r1", "--on-corrupt", "skip"]
    assert main(["replay", "--bootstrap", boot, *skip, "--audit", str(audit), "--digest"]) == 2
    out, err = capsys.readouterr()
    assert out.strip() == digest and "TAINTED" in err
    [line] = [json.loads(x) for x in audit.read_text().splitlines()]
    assert (line["type"], line["topic"], line["offset"]) == ("skipped", "r1.oplog", 2)
    assert main(["history", "--bootstrap", boot, *skip, "--audit", str(audit), "k", "--json"]) == 2
    *steps, summary = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [s["offset"] for s in steps] == [0, 1, 3] and summary["tainted"] is True
    assert len(audit.read_text().splitlines()) == 2  # appended
    # Without --audit: the documented default, in the current directory.
    assert main(["replay", "--bootstrap", boot, *skip, "--digest"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit", "streams-skipped.jsonl"]
