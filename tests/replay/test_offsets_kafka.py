"""`--offsets` and `REPLAY.SEEK OFFSETS` take every offset `streams log` prints (issue 26, item 1).

The region's writer commits each command in a Kafka transaction, so every log holds transaction
markers between its records (`streams log` prints @0, 2, 4 ...) and the end of a partition is past
its last record. The replay once took "last record read + 1" as a partition's end and refused
`--offsets r1.oplog=6` with "ends at offset 5, before 6". Here every offset `streams log` prints,
and the end, must replay to exactly the records before it: r1's op seq (from `r1.oplog`) or its
local seq (from `r1.local`) equals the number of records listed before that offset.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replay.serving import serving
from streams import progress
from streams.cli import main
from streams.replay import reader
from streams.replay.run import Request, replay
from topology.local import LocalTopology


@pytest.fixture(scope="module")
def region() -> Iterator[LocalTopology]:
    with LocalTopology(regions=1, manual_sync=True) as topo:
        client = topo.client(1)
        for i in range(4):
            client.xadd("s", {"n": str(i)})  # one transaction each: markers in between
        client.xgroup_create("s", "g", id="0")
        got: Any = client.xreadgroup("g", "alice", {"s": ">"}, count=2)  # local ops: r1.local
        client.xack("s", "g", got[0][1][0][0])
        client.xadd("s", {"n": "last"})
        yield topo


def _listed(topo: LocalTopology, topic: str, capsys: pytest.CaptureFixture[str]) -> list[int]:
    """The offsets `streams log --json` prints for `topic`."""
    assert main(["log", "--bootstrap", topo.bootstrap[1], "--topic", topic, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return [line["offset"] for line in lines if line["type"] == "op"]


def _end(topo: LocalTopology, topic: str) -> int:
    """The partition's end (its EOF: past the last transaction's marker)."""
    return reader.read(topo.bootstrap[1], {(topic, 0): 0}, lambda _raw: True)[(topic, 0)]


@pytest.mark.parametrize("topic", ["r1.oplog", "r1.local"])
def test_replay_takes_every_offset_the_log_prints(
    region: LocalTopology, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    offsets = _listed(region, topic, capsys)
    assert len(offsets) >= 2
    assert offsets != list(range(len(offsets))), "no transaction markers between the records?"
    end = _end(region, topic)
    assert end > offsets[-1] + 1, "no marker after the last record?"
    for offset in [*sorted(set(offsets)), offsets[-1] + 1, end]:
        # Ops before the offset, not records: r1's coalesced AckEffect may share a record (a
        # pack) with the XADD written in the same batch, as CI met once.
        before = sum(1 for listed in offsets if listed < offset)
        result = replay(Request(bootstrap=region.bootstrap[1], offsets=f"{topic}={offset}"))
        applied = result.local_seq if topic.endswith(".local") else result.vector().get(1, 0)
        assert applied == before, (topic, offset, offsets)
        # The command line takes it too (it exited 3 for every offset but the markers').
        code = main(
            ["replay", "--bootstrap", region.bootstrap[1], "--offsets", f"{topic}={offset}"]
        )
        assert code == 0, (offset, capsys.readouterr().err)
    capsys.readouterr()
    code = main(["replay", "--bootstrap", region.bootstrap[1], "--offsets", f"{topic}=1000"])
    assert code == 3
    assert f"{topic}:0 ends at offset {end}, before 1000" in capsys.readouterr().err


def test_replay_seek_offsets_takes_every_offset_the_log_prints(
    region: LocalTopology, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    offsets = _listed(region, "r1.oplog", capsys)
    with serving(["--bootstrap", region.bootstrap[1]], tmp_path) as client:
        for offset in sorted(set(offsets)):
            before = sum(1 for listed in offsets if listed < offset)  # ops, not records (above)
            seek: Any = client.execute_command
            reply = seek("REPLAY.SEEK", "OFFSETS", f"r1.oplog={offset}")
            position = dict(zip(reply[::2], reply[1::2], strict=True))
            expected = {f"r1={before}".encode()} | ({b""} if before == 0 else set())
            assert position[b"at"] in expected, (offset, offsets, position)


def test_the_replay_header_counts_the_records_its_progress_counted(
    region: LocalTopology, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header once said 11 records while the progress line said 15 (EOF events counted)."""
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    assert main(["replay", "--bootstrap", region.bootstrap[1], "--progress"]) == 0
    shown = capsys.readouterr()
    header = re.search(r"; (\d+) records in ", shown.out)
    assert header is not None, shown.out
    counted = re.findall(r"^replay: ([\d,]+) records", shown.err, re.M)
    assert counted, shown.err
    assert int(counted[-1].replace(",", "")) == int(header.group(1)), (shown.out, shown.err)
