"""Pure parts of the pipeline (no Spark, no Kafka): options, offset planning, the causal fold."""

from __future__ import annotations

import io
import random

import pytest

from streams.crdt import ops
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.pipeline.fold import causal_rank, fold_key, state_of
from streams.pipeline.kafka_io import Range, split
from streams.pipeline.options import OptionError, parse
from streams.pipeline.snapshot_file import key_part, write_parts
from streams.pipeline.source import cap
from streams.snapshot import write_snapshot

B = {"kafka.bootstrap.servers": "h:1"}


def test_options_are_read_in_any_case_with_kafka_source_names() -> None:
    opts = parse(
        {
            "Kafka.Bootstrap.Servers": "h:1",
            "SUBSCRIBE": "r1.oplog, r2.oplog",
            "startingoffsets": '{"r1.oplog": {"0": 5}}',
            "maxOffsetsPerTrigger": "10",
            "minPartitions": "3",
            "failOnDataLoss": "false",
            "includeHeaders": "true",
        }
    )
    assert opts.bootstrap == "h:1"
    assert opts.subscribe == ("r1.oplog", "r2.oplog")
    assert opts.starting == {"r1.oplog": {0: 5}}
    assert (opts.max_offsets_per_trigger, opts.min_partitions) == (10, 3)
    assert not opts.fail_on_data_loss and opts.include_headers
    assert parse(B).wants("a.oplog") and not parse(B).wants("a.local")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "kafka.bootstrap.servers is required"),
        ({**B, "subscribe": "a", "subscribePattern": "b"}, "exclude each other"),
        ({**B, "startingOffsets": "soon"}, "expected earliest, latest or JSON"),
        ({**B, "endingOffsets": "earliest"}, "expected latest or JSON"),
        ({**B, "startingOffsets": '{"t": {"0": -3}}'}, "integer >= -2"),
        ({**B, "maxOffsetsPerTrigger": "0"}, "positive integer"),
        ({**B, "failOnDataLoss": "maybe"}, "true or false"),
        ({**B, "subscribePattern": "("}, "not a regular expression"),
        ({**B, "startingOffsets": "earliest", "startingTimestamp": "1"}, "exclude each other"),
        ({**B, "sbscribe": "x"}, "unknown option"),
    ],
)
def test_bad_options_are_refused_with_the_option_named(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError, match=message):
        parse(options)


def test_min_partitions_splits_big_ranges_without_gaps_or_overlaps() -> None:
    ranges = [Range("a", 0, 10, 110), Range("b", 0, 0, 10), Range("c", 0, 5, 5)]
    out = split(ranges, 8)
    assert len(out) >= 7
    for topic, lo, hi in (("a", 10, 110), ("b", 0, 10)):
        pieces = sorted((r.start, r.end) for r in out if r.topic == topic)
        assert pieces[0][0] == lo and pieces[-1][1] == hi
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))
    assert not [r for r in out if r.topic == "c"]


def test_read_limit_caps_offsets_and_always_progresses() -> None:
    begin = {"a": {0: 0}, "b": {0: 100}}
    latest = {"a": {0: 1000}, "b": {0: 101}, "new": {0: 50}}
    assert cap(begin, latest, None) == {"a": {0: 1000}, "b": {0: 101}, "new": {0: 50}}
    capped = cap(begin, latest, 10)
    taken = capped["a"][0] + capped["b"][0] - 100 + capped["new"][0]
    assert taken == 10
    assert capped["b"][0] == 101  # the small backlog still moves
    assert cap({"a": {0: 7}}, {"a": {0: 7}}, 5) == {"a": {0: 7}}


def _random_history(seed: int) -> tuple[list[Region], list[ops.Op]]:
    rng = random.Random(seed)
    regions = [Region(i, IdMode.SEMI_STRICT) for i in (1, 2, 3)]
    log: list[ops.Op] = []
    inbox: list[list[ops.Op]] = [[], [], []]
    for step in range(400):
        i = rng.randrange(3)
        r = regions[i]
        key = rng.choice([b"a", b"b", b"c"])
        kind = rng.random()
        ks = r.state.get(key)
        if kind < 0.6 or ks is None:
            body: ops.ReplicatedBody = ops.XAdd(key, (step + 1, i + 1), (b"f", b"%d" % step))
        elif kind < 0.7:
            body = ops.Del(key)
        elif kind < 0.8:
            ids = [sid for sid, _o, _f in ks.entries.range((0, 0), (2**64 - 1, 2**64 - 1))]
            body = ops.XDel(key, tuple(rng.sample(ids, min(2, len(ids)))))
        elif kind < 0.9:
            body = ops.XTrim(key, tuple((o, (step - 20, 0)) for o in (1, 2, 3)))
        else:
            body = ops.GroupCreate(key, b"g%d" % rng.randrange(2), (0, 0), (), None)
        op = r.issue(body, step)
        log.append(op)
        for j in range(3):
            if j != i:
                inbox[j].append(op)
        if rng.random() < 0.3:  # deliver some region's backlog (in order, like a mirror)
            j = rng.randrange(3)
            for pending in inbox[j]:
                regions[j].receive(pending)
            inbox[j] = []
    for j in range(3):
        for pending in inbox[j]:
            regions[j].receive(pending)
    return regions, log


@pytest.mark.parametrize("seed", range(8))
def test_per_key_fold_in_shuffled_input_gives_the_regions_digest(seed: int) -> None:
    regions, log = _random_history(seed)
    assert len({r.state.digest() for r in regions}) == 1
    shuffled = log + log[:50]  # duplicates are dropped, as at-least-once mirroring needs
    random.Random(seed).shuffle(shuffled)
    by_key: dict[bytes, list[ops.Op]] = {}
    for op in shuffled:
        by_key.setdefault(op.body.key, []).append(op)
    states = []
    for key, key_ops in by_key.items():
        ks = fold_key(key_ops).state.raw(key)
        if ks is not None:
            states.append((key, ks))
    assert state_of(states).digest() == regions[0].state.digest()


def test_causal_rank_puts_a_local_record_after_the_ops_it_saw() -> None:
    op = ops.Op(2, 3, ((1, 4),), 0, ops.Del(b"k"))
    seen = ops.LocalOp(1, 1, 0, ops.Ack(b"k", b"g", ()), ((1, 4), (2, 3)))
    unseen = ops.Op(1, 5, ((2, 3),), 0, ops.Del(b"k"))
    assert causal_rank(op) < causal_rank(seen) < causal_rank(unseen)


def _region_with_groups(seed: int, entries: int) -> Region:
    """A region with many entries (several blocks and chunks), tombstones, groups, PELs and
    consumers, a deleted key and a key that no longer exists."""
    rng = random.Random(seed)
    r = Region(1, IdMode.SEMI_STRICT)
    keys = [b"k%d" % i for i in range(7)] + [b"\xff\x00bin"]
    for step in range(entries):
        key = rng.choice(keys)
        fields = (b"f", b"v" * rng.randrange(1, 40), b"g", b"%d" % step)
        r.issue(ops.XAdd(key, (step + 1, 1), fields), step)
    r.issue(ops.Del(b"k6"), entries)
    for key in keys[:3]:
        r.issue(ops.GroupCreate(key, b"grp", (0, 0), (), None), entries)
        ks = r.state.raw(key)
        assert ks is not None
        refs = tuple((1, sid) for sid, _o, _f in ks.entries.range((0, 0), (2**64 - 1, 2**64 - 1)))
        for c in range(3):
            part = refs[c::3][:1500]
            r.apply_local(
                r.issue_local(
                    ops.Deliver(key, b"grp", b"c%d" % c, 1000 + c, part, False, len(part)), 1000 + c
                )
            )
    return r


@pytest.mark.parametrize("seed", range(2))
def test_snapshot_from_key_parts_is_write_snapshot_byte_for_byte(seed: int) -> None:
    region = _region_with_groups(seed, 6000 if seed else 300)
    positions = {("r1.oplog", 0): 10, ("r2.oplog", 0): 3, ("r1.local", 0): 7}
    meta = {"writer": "test"}
    ref = io.BytesIO()
    write_snapshot(region, positions, ref, region_name="r1", meta=meta)
    marker = ref.getvalue()[-16:]  # the file ends with a block's sync marker
    parts = [key_part(k, ks) for k, ks in sorted(region.state.keys.items())]
    header = Region(region.id, region.mode)
    header.local_seq = region.local_seq
    header.causal.applied.update(region.causal.applied)
    got = io.BytesIO()
    digest = write_parts(
        header, positions, parts, got, region_name="r1", meta=meta, sync_marker=marker, threads=3
    )
    assert digest == region.state.digest()
    assert got.getvalue() == ref.getvalue()
    assert sum(map(len, (p.digest_feed for p in parts))) > 0
    with pytest.raises(ValueError, match="out of order"):
        write_parts(header, positions, parts[::-1], io.BytesIO())
