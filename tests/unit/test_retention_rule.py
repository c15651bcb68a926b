"""The retention rule (`streams.kafka.retention`) and the `[retention]` table of the topology file
(`streams.config.retention`): which offset may go, given the kept snapshots' positions, the
other regions' applied seqs and the tail; and bad values refused in one line."""

from __future__ import annotations

import pytest

from streams.config import Topology, TopologyError, dumps, loads
from streams.kafka import retention

HEAD = """
[topology]
mirror_naming = "identity"

[[region]]
name = "r1"
id = 1
bootstrap = "127.0.0.1:9092"
resp_port = 6380
"""


def test_the_retention_table_reads_and_writes_back() -> None:
    topology = loads(HEAD + "\n[retention]\nsnapshots = 3\ntail_seconds = 60\n")
    assert topology.retention is not None
    assert (topology.retention.snapshots, topology.retention.tail_seconds) == (3, 60)
    assert loads(dumps(topology)) == topology
    assert loads(HEAD).retention is None
    assert "[retention]" not in dumps(loads(HEAD))


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("snapshots = 0", "field 'snapshots' must be an integer 1..1000"),
        ('snapshots = "3"', "field 'snapshots' must be an integer"),
        ("snapshots = 2\ntail_seconds = -1", "field 'tail_seconds' must be an integer >= 0"),
        ("snapshots = 2\ntail_seconds = 1.5", "field 'tail_seconds' must be an integer >= 0"),
        ("tail_seconds = 5", "field 'snapshots' is required"),
        ("snapshots = 2\nkeep = 1", "unknown key(s) 'keep'"),
    ],
)
def test_bad_retention_values_are_refused_in_one_line(table: str, says: str) -> None:
    with pytest.raises(TopologyError) as caught:
        loads(HEAD + "\n[retention]\n" + table + "\n", source="t.toml")
    text = str(caught.value)
    assert says in text and text.startswith("t.toml: [retention]") and "\n" not in text


def test_a_retention_that_is_not_a_table_is_refused() -> None:
    with pytest.raises(TopologyError, match="'retention' must be a table"):
        loads("retention = 3\n" + HEAD)


def test_the_anchor_is_the_oldest_snapshot_kept() -> None:
    assert retention.choose_anchor([], 3) is None
    assert retention.choose_anchor([10, 20], 3) == 0  # fewer than kept: the oldest there is
    assert retention.choose_anchor([10, 20, 30, 40], 3) == 1
    assert retention.choose_anchor([10, 20, 30, 40], 1) == 3


def test_the_cut_is_the_smallest_bound_and_any_unknown_bound_keeps_everything() -> None:
    assert retention.cut(0, [100, 40, 70]) == 40
    assert retention.cut(0, [100, None]) is None  # e.g. no kept snapshot covers the log
    assert retention.cut(40, [40, 90]) is None  # nothing before the start left to delete
    assert retention.cut(10, [40]) == 40
    assert retention.cut(0, []) is None


def test_every_other_region_must_have_applied_an_op_before_its_home_record_goes() -> None:
    assert retention.copied_seq([{1: 7, 2: 3}, {1: 5}], origin=1) == 5
    assert retention.copied_seq([{1: 7}, None], origin=1) == 0  # a region without a snapshot
    assert retention.copied_seq([{2: 9}], origin=1) == 0  # applied nothing of origin 1
    # Records (offset, highest seq): up to seq 5 may go, so the cut is the record holding 6.
    records = [(0, 2), (1, 4), (3, 6), (4, 9)]  # offset 2: a transaction marker
    assert retention.first_offset_past(records, 5) == 3
    assert retention.first_offset_past(records, 9) is None  # all covered: the other bounds rule
    assert retention.first_offset_past(records, 0) == 0


def test_a_reader_that_needs_deleted_records_is_told_so() -> None:
    assert retention.reaches(0, None) and retention.reaches(5, 5) and not retention.reaches(6, 5)
    retention.check_reaches("n", {("r2.oplog", 0): 5}, {("r2.oplog", 0): 7}, "from a snapshot")
    with pytest.raises(retention.LogTruncated) as caught:
        retention.check_reaches(
            "node r1", {("r2.oplog", 0): 50}, {("r2.oplog", 0): 0}, "from the log's beginning"
        )
    text = str(caught.value)
    assert "r2.oplog partition 0 now starts at offset 50" in text
    assert "from the log's beginning needs it from offset 0" in text
    assert caught.value.low == 50 and caught.value.start == 0


def test_a_topology_object_takes_a_policy() -> None:
    from streams.config.retention import RetentionPolicy

    base = loads(HEAD)
    with pytest.raises(TopologyError):
        RetentionPolicy(snapshots=-2)
    policy = RetentionPolicy(snapshots=2, tail_seconds=0)
    topology = Topology(base.regions, retention=policy)
    assert loads(dumps(topology)).retention == policy


def test_the_command_refuses_a_bad_retention_table_in_one_line(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    from streams.cli import main

    assert isinstance(tmp_path, Path)
    path = tmp_path / "t.toml"
    path.write_text(HEAD + '\n[retention]\nsnapshots = 2\ntail_seconds = "1h"\n')
    assert main(["retention", "apply", "--topology", str(path)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "field 'tail_seconds' must be an integer >= 0" in err
    path.write_text(HEAD)
    assert main(["retention", "apply", "--topology", str(path)]) == 3
    assert "has no [retention] table" in capsys.readouterr().err
    assert main(["region", "add", "r2", "--topology", str(path)]) == 3
    assert "--bootstrap and --port are needed" in capsys.readouterr().err
