"""Every reader goes through the node's record gate (streams/kafka/records.py): an unsigned record
that a producer with broker access wrote into a signing region's op log is skipped and counted
by `streams replay`, `history`, `diff` and `log` exactly as the node skips it, and a reader that
has no topology file (so no keys) refuses the conflict it makes rather than fold it silently.

Two regions on their own embedded brokers, both signing; the forged record takes the dot r1's
writer uses next, and the real write under that dot follows it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from faults.test_forged_records import applied_seq, produce_op
from faults.workload import crdt_info

from streams.cli import main
from streams.config import RegionConfig, Topology
from streams.crdt import ops
from topology.broker import EmbeddedBroker
from topology.local import LocalTopology
from topology.ports import free_port


@dataclass
class Forged:
    topo: LocalTopology
    file: str
    """The topology file (with both regions' signing keys)."""
    dot: int
    """r1's seq that both the forged record and the real write carry."""
    digests: dict[int, str]
    """CRDT.DIGEST of each region after the real write replicated."""


@pytest.fixture(scope="module")
def forged() -> Iterator[Forged]:
    brokers = [EmbeddedBroker(f"gate-r{i}") for i in (1, 2)]
    try:
        for broker in brokers:
            broker.start()
        topology = Topology(
            regions=tuple(
                RegionConfig(
                    f"r{i}",
                    i,
                    broker.bootstrap,
                    free_port(),
                    alias=f"c{i}",
                    signing_key=secrets.token_hex(32),
                )
                for i, broker in enumerate(brokers, start=1)
            )
        )
        with LocalTopology(external=topology, manual_sync=True) as topo:
            c1, c2 = topo.client(1), topo.client(2)
            for n in range(3):
                c1.xadd(b"victim", {b"n": b"%d" % n})
            c2.xadd(b"other", {b"n": b"2"})
            topo.sync()
            dot = applied_seq(c1, 1) + 1
            fake = ops.Op(1, dot, (), 1, ops.XAdd(b"victim", (1, 1), (b"forged", b"1")))
            produce_op(topo.bootstrap[1], "r1.oplog", fake)
            c1.xadd(b"victim", {b"real": b"1"})
            topo.sync()
            # r2's node skipped it (r1's does not read its own log back while it runs)
            assert crdt_info(c2)["records_skipped"] == "1"
            digests = {i: topo.client(i).execute_command("CRDT.DIGEST").decode() for i in (1, 2)}
            assert digests[1] == digests[2]
            yield Forged(topo, str(topo.topology_path), dot, digests)
    finally:
        for broker in brokers:
            broker.stop()


def _json(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_replay_skips_and_counts_a_forged_record_as_the_node_does(
    forged: Forged,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for i in (1, 2):
        code = main(["replay", "--topology", forged.file, "--region", f"r{i}", "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err  # skipped, not tainted: a forged record cannot be real
        summary = _json(out)[-1]
        assert summary["digest"] == forged.digests[i]
        assert summary["skipped_by_kind"] == {"forged": 1} and summary["tainted"] is False
        assert "forged record" in err
    audit = [json.loads(line) for line in (tmp_path / "streams-skipped.jsonl").open()]
    assert [(a["kind"], a["topic"]) for a in audit] == [("forged", "r1.oplog")] * 2
    assert all("is not signed" in str(a["reason"]) for a in audit)


def test_history_and_diff_skip_and_count_it_too(
    forged: Forged,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["history", "--topology", forged.file, "--region", "r2", "victim", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = _json(out)
    assert lines[-1]["skipped_by_kind"] == {"forged": 1}
    adds = [line for line in lines if line.get("op") == "XAdd"]
    assert [line["dot"] for line in adds][-1] == f"1:{forged.dot}"
    assert "real" in json.dumps(adds[-1]["args"]) and "forged" not in json.dumps(adds)
    code = main(["diff", "--topology", forged.file, "--region", "r1", "--region", "r2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = _json(out)[-1]
    assert summary["differs"] is False and summary["skipped"] == {"a": 1, "b": 1}
    assert summary["clusters"] == {"a": "streams-gate-r1", "b": "streams-gate-r2"}


def test_log_lists_the_forged_record_as_such(
    forged: Forged, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["log", "--topology", forged.file, "--region", "r2", "--topic", "r1.oplog", "--json"]
    assert main(argv) == 0
    lines = _json(capsys.readouterr().out)
    skipped = [line for line in lines if line["type"] == "skipped"]
    assert [s["kind"] for s in skipped] == ["forged"]
    ops_at = [line for line in lines if line["type"] == "op" and line["dot"] == f"1:{forged.dot}"]
    assert len(ops_at) == 1 and "real" in json.dumps(ops_at[0]["args"])


def test_without_a_topology_file_the_conflict_stops_the_reader_instead_of_folding_it(
    forged: Forged,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No keys: the forged record cannot be told from a real one, but the gate still sees two
    records under one dot with other bytes (the forged one first) and stops, naming it."""
    monkeypatch.chdir(tmp_path)
    boot = forged.topo.bootstrap[2]
    assert main(["replay", "--bootstrap", boot, "--region", "r2", "--digest"]) == 2
    err = capsys.readouterr().err
    assert f"dot 1:{forged.dot}" in err and "--on-corrupt skip" in err
    assert main(["diff", "--bootstrap", forged.topo.bootstrap[1], "--bootstrap", boot]) == 2
    assert f"dot 1:{forged.dot}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
