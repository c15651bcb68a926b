"""Replay positions with shards: the plain `--at` names one shard's seqs, the per-shard form names
each shard's, `--offsets` takes an optional partition, and a printed position reads back."""

from __future__ import annotations

import pytest

from streams.replay.positions import (
    PositionError,
    at_text,
    is_per_shard,
    parse_offsets,
    resolve_cuts,
)
from streams.replay.verbs import shard_file

IDS = {"r1": 1, "r2": 2}
NAMES = {1: "r1", 2: "r2"}


def test_the_plain_form_applies_to_the_one_shard_replayed() -> None:
    assert resolve_cuts("r1=3,r2=1", IDS, 1, [0]) == {0: {1: 3, 2: 1}}
    assert resolve_cuts("r1=3", IDS, 4, [2]) == {2: {1: 3}}
    with pytest.raises(PositionError, match="add --shard N"):
        resolve_cuts("r1=3", IDS, 4, [0, 1, 2, 3])


def test_the_per_shard_form_names_each_shard_and_the_others_are_cut_at_zero() -> None:
    text = "0:r1=3,r2=1; 2:r2=5"
    assert is_per_shard(text) and not is_per_shard("r1=3,r2=1")
    assert resolve_cuts(text, IDS, 4, [0, 1, 2, 3]) == {0: {1: 3, 2: 1}, 1: {}, 2: {2: 5}, 3: {}}
    assert resolve_cuts(text, IDS, 4, [2]) == {2: {2: 5}}  # with --shard 2: that shard's part
    assert resolve_cuts("1:", IDS, 4, [1]) == {1: {}}
    for bad, why in (
        ("4:r1=1", "the region has 4"),
        ("0:r1=1;0:r2=1", "named twice"),
        ("0:r1=1;r2=1", "per-shard form"),
        ("0:r9=1", "unknown region 'r9'"),
    ):
        with pytest.raises(PositionError, match=why):
            resolve_cuts(bad, IDS, 4, [0, 1, 2, 3])


def test_a_printed_position_reads_back() -> None:
    vectors = {0: {1: 3, 2: 1}, 1: {}, 2: {2: 5}, 3: {}}
    text = at_text(vectors, NAMES, 4)
    assert text == "0:r1=3,r2=1;2:r2=5"
    assert resolve_cuts(text, IDS, 4, range(4)) == vectors
    assert at_text({0: {1: 3}}, NAMES, 1) == "r1=3"  # one shard: the form CRDT.VECTOR prints


def test_offsets_take_an_optional_partition() -> None:
    assert parse_offsets("r1.oplog=5,r1.oplog:3=7,r2.local:0=1") == {
        ("r1.oplog", 0): 5,
        ("r1.oplog", 3): 7,
        ("r2.local", 0): 1,
    }
    for bad in ("r1.oplog:x=1", ":2=1", "r1.oplog=-1", "r1.oplog"):
        with pytest.raises(PositionError):
            parse_offsets(bad)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("r1=4,r1=5", "region r1 named twice (r1=4 and r1=5)"),
        ("r1=4,1=5", "region 1 named twice (r1=4 and 1=5)"),  # by name and by id
        ("0:r2=1,r2=2;1:r1=1", "region r2 named twice"),  # within one shard's part
    ],
)
def test_a_region_named_twice_is_refused(text: str, message: str) -> None:
    """`--at r1=4,r1=5` once replayed to r1=5 without a word (issue 26, item 6)."""
    with pytest.raises(PositionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_cuts(text, IDS, 2, [0])


def test_a_partition_named_twice_is_refused() -> None:
    with pytest.raises(PositionError, match=r"r1.oplog:0 named twice \(3 and 5\)"):
        parse_offsets("r1.oplog=3,r1.oplog:0=5")


def test_snapshot_files_per_shard_carry_the_shard_before_the_extension() -> None:
    assert shard_file("out/r1.snap", 2) == "out/r1-s2.snap"
    assert shard_file("r1", 0) == "r1-s0"
