"""Positions belong to the Kafka cluster they were read from (streams/kafka/clusters.py): the
decisions readers take on a position of another cluster, the forms positions are written in
(`--offsets cluster=ID,...`, Spark's checkpointed offsets), and the claim the translation by seq
rests on: a snapshot's state folded over every log from its beginning is exactly the state its
own offsets give. Pure: no broker."""

from __future__ import annotations

import asyncio
import io
import logging
from pathlib import Path

import pytest

from streams.crdt import ops
from streams.crdt.fold import Fold
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.kafka import clusters
from streams.node.runtime.loader import Loader
from streams.node.runtime.memory import MemorySnapshots
from streams.node.runtime.oplog import Reader, ReaderSpec
from streams.node.runtime.replica import Replica
from streams.node.runtime.waiters import Waiters
from streams.pipeline.options import OptionError, offsets_cluster, offsets_from_json, offsets_json
from streams.pipeline.options import parse as parse_source
from streams.replay.positions import PositionError, offsets_text, parse_offsets_on
from streams.snapshot import read_snapshot, write_snapshot

A, B = "streams-r1", "streams-r2"
POSITIONS = {("r2.oplog", 0): 40, ("r1.local", 0): 7}


def test_a_position_of_the_same_cluster_is_used_as_it_is() -> None:
    assert clusters.translate(POSITIONS, A, A) == (POSITIONS, clusters.Origin.SAME)
    assert clusters.check("--offsets", A, A) is clusters.Origin.SAME


def test_a_snapshot_of_another_cluster_is_translated_to_reading_every_log_from_its_start() -> None:
    assert clusters.translate(POSITIONS, A, B) == ({}, clusters.Origin.OTHER)
    note = clusters.translated_note("snapshot s.snap", A, B)
    assert A in note and B in note and "dropped by seq" in note


def test_offsets_of_another_cluster_are_refused_naming_both_ids() -> None:
    with pytest.raises(clusters.ClusterMismatch) as refused:
        clusters.check("--offsets", A, B)
    assert (refused.value.taken_on, refused.value.here) == (A, B)
    assert f"cluster {A}" in str(refused.value) and f"cluster {B}" in str(refused.value)


def test_a_position_without_a_cluster_id_is_used_as_before() -> None:
    for taken_on, here in ((None, A), (A, None), (None, None)):
        assert clusters.translate(POSITIONS, taken_on, here) == (POSITIONS, clusters.Origin.UNKNOWN)
        assert clusters.check("--offsets", taken_on, here) is clusters.Origin.UNKNOWN
    assert clusters.snapshot_cluster({"writer": "x"}) is None
    assert clusters.snapshot_cluster({clusters.SNAPSHOT_META: A}) == A


def test_an_older_snapshot_written_from_another_address_is_told_apart_by_its_source() -> None:
    old = {"writer": "streams snapshot", "source": "kafka-a:9092"}
    assert clusters.elsewhere(old, "kafka-b:9092") == "kafka-a:9092"
    assert clusters.elsewhere(old, "kafka-a:9092") is None
    assert clusters.elsewhere({**old, clusters.SNAPSHOT_META: A}, "kafka-b:9092") is None
    assert clusters.elsewhere({"writer": "node r1"}, "kafka-b:9092") is None


def test_replay_offsets_are_printed_with_their_cluster_and_read_back() -> None:
    text = offsets_text(POSITIONS, A)
    assert text == f"cluster={A},r1.local:0=7,r2.oplog:0=40"
    assert parse_offsets_on(text) == (A, POSITIONS)
    assert parse_offsets_on("r2.oplog=40") == (None, {("r2.oplog", 0): 40})
    with pytest.raises(PositionError, match="named twice"):
        parse_offsets_on(f"cluster={A},cluster={B},r2.oplog=1")
    with pytest.raises(PositionError, match="without a cluster id"):
        parse_offsets_on("cluster=,r2.oplog=1")


def test_spark_offsets_carry_their_cluster_and_old_checkpoints_read_as_unknown() -> None:
    doc = offsets_json({"r1.oplog": {0: 5}}, A)
    assert doc == {"r1.oplog": {"0": 5}, "cluster": A}
    assert offsets_from_json(doc) == {"r1.oplog": {0: 5}} and offsets_cluster(doc) == A
    old = {"r1.oplog": {"0": 5}}
    assert offsets_from_json(old) == {"r1.oplog": {0: 5}} and offsets_cluster(old) is None
    opts = parse_source(
        {
            "kafka.bootstrap.servers": "h:1",
            "startingOffsets": '{"cluster": "X", "r1.oplog": {"0": 1}}',
        }
    )
    assert opts.offsets_cluster == "X" and opts.starting == {"r1.oplog": {0: 1}}
    with pytest.raises(OptionError, match="different clusters"):
        parse_source(
            {
                "kafka.bootstrap.servers": "h:1",
                "startingOffsets": '{"cluster": "X"}',
                "endingOffsets": '{"cluster": "Y"}',
            }
        )


# --- the translation by seq is exact --------------------------------------------------------


def _history() -> tuple[list[tuple[tuple[str, int], int, ops.Op | ops.LocalOp]], int]:
    """Region 1's own logs (`.local` first, as readers feed them) and region 2's op log, with
    local ops (a group, deliveries, an ack) between replicated ones; and where to cut it."""
    r1, r2 = Region(1), Region(2)
    oplog1: list[ops.Op] = []
    oplog2: list[ops.Op] = []
    local: list[ops.LocalOp] = []
    for i in range(6):
        oplog1.append(r1.issue(ops.XAdd(b"s", (100 + i, 1), (b"n", b"%d" % i)), 100 + i))
        op2 = r2.issue(ops.XAdd(b"t", (200 + i, 2), (b"n", b"%d" % i)), 200 + i)
        oplog2.append(op2)
        r1.receive(op2)
        if i == 1:
            oplog1.append(r1.issue(ops.GroupCreate(b"s", b"g", (0, 0), (), 0), 150))
        if i >= 2:
            entry = (1, (100 + i, 1))
            local.append(
                r1.issue_local(ops.Deliver(b"s", b"g", b"c", 300, (entry,), False, None), 300)
            )
        if i == 4:
            local.append(r1.issue_local(ops.Ack(b"s", b"g", ((102, 1),)), 400))
    logs: list[tuple[tuple[str, int], int, ops.Op | ops.LocalOp]] = []
    logs += [(("r1.local", 0), n, record) for n, record in enumerate(local)]
    logs += [(("r1.oplog", 0), 2 * n, record) for n, record in enumerate(oplog1)]  # markers
    logs += [(("r2.oplog", 0), n, record) for n, record in enumerate(oplog2)]
    return logs, 2


def _fold(
    region: Region, records: list[tuple[tuple[str, int], int, ops.Op | ops.LocalOp]], **kw: object
) -> Fold:
    fold = Fold(region, **kw)  # type: ignore[arg-type]
    for part, offset, record in records:
        fold.feed(part, offset, record)
    fold.finish()
    return fold


def test_a_snapshot_folded_over_every_log_from_its_start_is_the_state_its_offsets_give() -> None:
    logs, _ = _history()
    whole = _fold(Region(1), logs)
    for cut in range(1, 6):  # a snapshot after `cut` records of each log
        early = [x for x in logs if x[1] < cut]
        taken = _fold(Region(1), early)
        out = io.BytesIO()
        write_snapshot(taken.region, taken.safe_positions(), out, meta={clusters.SNAPSHOT_META: A})
        out.seek(0)
        region, positions, meta = read_snapshot(out)
        tail = [x for x in logs if x[1] >= positions.get(x[0], 0)]
        by_offsets = _fold(region, tail, positions=positions)
        translated, origin = clusters.translate(positions, clusters.snapshot_cluster(meta), B)
        assert origin is clusters.Origin.OTHER and translated == {}
        out.seek(0)
        again, _p, _m = read_snapshot(out)
        by_seq = _fold(again, logs)  # every log from its beginning
        for fold in (by_offsets, by_seq):
            assert fold.region.state.digest() == whole.region.state.digest(), cut
            assert fold.region.vector == whole.region.vector
            assert fold.region.local_seq == whole.region.local_seq
            group = fold.region.state.get(b"s").groups[b"g"]  # type: ignore[union-attr]
            assert len(group.pel) == len(whole.region.state.get(b"s").groups[b"g"].pel)  # type: ignore[union-attr]


# --- a node boots from a snapshot file of another cluster -----------------------------------


def _loader(
    tmp_path: Path, taken_on: str | None, here: str | None
) -> tuple[Loader, list[ReaderSpec]]:
    region = Region(1)
    region.issue(ops.XAdd(b"s", (1, 1), (b"f", b"v")), 1)
    path = tmp_path / "r1.snap"
    meta = {clusters.SNAPSHOT_META: taken_on} if taken_on else {}
    with open(path, "wb") as fp:
        write_snapshot(region, POSITIONS, fp, meta=meta)
    store = MemorySnapshots()
    store.cluster_id = here
    specs: list[ReaderSpec] = []

    def new_reader(spec: ReaderSpec) -> Reader:
        specs.append(spec)
        raise RuntimeError("stop here: the reader's start positions are what is checked")

    replica = Replica(1, IdMode.STRICT, Waiters())
    return Loader("r1", replica, new_reader, store, str(path)), specs


@pytest.mark.parametrize(
    ("taken_on", "here", "starts", "warned"),
    [
        (A, A, {"r2.oplog": 40, "r1.local": 7}, ""),
        (A, B, {}, "every log read from its start"),
        (None, B, {"r2.oplog": 40, "r1.local": 7}, "does not say which Kafka cluster"),
    ],
)
def test_a_node_boots_from_a_snapshot_of_another_cluster_reading_every_log_from_its_start(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    taken_on: str | None,
    here: str | None,
    starts: dict[str, int] | None,
    warned: str,
) -> None:
    loader, specs = _loader(tmp_path, taken_on, here)
    with caplog.at_level(logging.WARNING), pytest.raises(RuntimeError, match="stop here"):
        asyncio.run(loader.boot(timeout=1))
    (spec,) = specs
    assert spec.start_offsets == starts
    assert loader.replica.region.vector == {1: 1}  # the snapshot's state, in every case
    if taken_on != here and taken_on:
        assert f"taken on cluster {A}" in loader.booted_from
    text = caplog.text + loader.booted_from
    assert (warned in text) if warned else ("cluster" not in caplog.text)
