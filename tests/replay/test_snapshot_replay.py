"""Snapshot + tail replay equals a full replay, and a full replay equals the live region.

Pure: random 3-region histories (XADD, DEL, XDEL, XTRIM, group create/destroy, deliveries,
acks, consecutive-XACK effects, duplicated mirror records) over `streams.crdt`, no Kafka.
"""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.history import TARGET, History, Logged, actions, play
from streams.crdt.fold import Fold
from streams.crdt.region import Region
from streams.replay.describe import local_state
from streams.snapshot import read_snapshot, write_snapshot


def _full(h: History) -> Fold:
    fold = Fold(Region(TARGET))
    for part, offset, record in h.local + h.order:
        fold.feed(part, offset, record)
    fold.finish()
    return fold


def _snapshot_then_tail(h: History, cut: int) -> Fold:
    head = Fold(Region(TARGET))
    fed: list[Logged] = h.local + h.order[:cut]
    for part, offset, record in fed:
        head.feed(part, offset, record)
    buf = io.BytesIO()
    write_snapshot(head.region, head.safe_positions(), buf, region_name="r1")
    buf.seek(0)
    region, positions, _meta = read_snapshot(buf)
    tail = Fold(region, positions=positions)
    # The tail: every record at or after the snapshot's position of its topic, in log order
    # (the records the snapshot left unapplied first, as a reader starting there would see).
    for part, offset, record in fed + h.order[cut:]:
        if offset >= positions.get(part, 0):
            tail.feed(part, offset, record)
    tail.finish()
    return tail


def _same(a: Region, b: Region) -> None:
    assert a.state.digest() == b.state.digest()
    assert a.vector == b.vector
    assert a.local_seq == b.local_seq
    assert local_state(a) == local_state(b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=actions, data=st.data())
def test_snapshot_plus_tail_equals_full_replay(
    actions: list[tuple[int, ...]], data: st.DataObject
) -> None:
    h = play(actions)
    cut = data.draw(st.integers(0, len(h.order)), label="cut")
    _same(_snapshot_then_tail(h, cut).region, _full(h).region)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=actions)
def test_full_replay_equals_the_live_region(actions: list[tuple[int, ...]]) -> None:
    h = play(actions)
    live = h.regions[TARGET]
    replayed = _full(h).region
    assert replayed.state.digest() == live.state.digest()
    assert replayed.vector == live.vector
    assert local_state(replayed) == local_state(live)


@settings(max_examples=80, deadline=None)
@given(actions=actions, data=st.data())
def test_replay_to_a_recorded_prefix_equals_the_live_region_then(
    actions: list[tuple[int, ...]], data: st.DataObject
) -> None:
    """Cut the history at a step: replaying the logs as they were then gives the live state."""
    cut = data.draw(st.integers(0, len(actions)), label="step")
    before = play(actions[:cut])
    replayed = _full(before).region
    assert replayed.state.digest() == before.regions[TARGET].state.digest()
    assert local_state(replayed) == local_state(before.regions[TARGET])
