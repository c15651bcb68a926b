"""Catch-up logic: every interleaving of last records and partition-EOF events ends caught up.

Issue: a node with a few thousand writes in its log could not restart. The cause was the fetch
wait (Tansu returns an empty fetch when assembling it takes longer than the wait, which a long
partition does), not the EOF bookkeeping; these tests pin both down. `EndTracker` and
`FetchPacer` are pure; the materializer loop is run against a scripted fake consumer.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError

from streams.crdt import ops
from streams.kafka import paced
from streams.kafka.reading import EndTracker, FetchPacer, Pacing
from streams.node.kafka.materializer import Materializer
from streams.node.runtime.oplog import Batch
from streams.ops.codec import encode

Event = tuple[str, str, int]  # (kind "rec" | "eof", topic, offset)


def splits(n: int) -> Iterator[list[int]]:
    """Every way to cut a sequence of n events into consecutive consume() batches."""
    for cuts in itertools.product([False, True], repeat=max(0, n - 1)):
        sizes, size = [], 1
        for cut in cuts:
            if cut:
                sizes.append(size)
                size = 1
            else:
                size += 1
        sizes.append(size)
        yield sizes


def interleavings(a: list[Event], b: list[Event]) -> Iterator[list[Event]]:
    """Every merge of two per-partition event streams that keeps each stream's order."""
    n = len(a) + len(b)
    for positions in itertools.combinations(range(n), len(a)):
        merged: list[Event] = []
        ia = ib = 0
        for i in range(n):
            if i in positions:
                merged.append(a[ia])
                ia += 1
            else:
                merged.append(b[ib])
                ib += 1
        yield merged


def partition_events(topic: str, records: list[int], eof: int) -> list[Event]:
    return [("rec", topic, o) for o in records] + [("eof", topic, eof)]


# Offsets with transaction control records in between: records at 0, 2, 4; markers at 1, 3, 5.
STREAM_A = partition_events("r1.oplog", [0, 2, 4], 6)
STREAM_B = partition_events("r2.oplog", [0, 1, 2], 3)


def feed(tracker: EndTracker, event: Event) -> None:
    kind, topic, offset = event
    if kind == "rec":
        tracker.on_record((topic, 0), offset)
    else:
        tracker.on_eof((topic, 0), offset)


def every_run(
    make: Callable[[], EndTracker], expect: Callable[[list[Event]], bool]
) -> Iterator[EndTracker]:
    """Feeds a fresh tracker every interleaving of STREAM_A and STREAM_B, cut into consume()
    batches every possible way; after each batch, caught_up() must equal expect(events so far).
    Yields each tracker once fed everything."""
    for events in interleavings(STREAM_A, STREAM_B):
        for sizes in splits(len(events)):
            tracker = make()
            i = 0
            for size in sizes:
                for event in events[i : i + size]:
                    feed(tracker, event)
                i += size
                assert tracker.caught_up() == expect(events[:i]), events[:i]
            yield tracker


def test_caught_up_exactly_when_every_partition_reported_its_end_in_every_interleaving() -> None:
    def make() -> EndTracker:
        tracker = EndTracker()
        tracker.assign(("r1.oplog", 0), 0)
        tracker.assign(("r2.oplog", 0), 0)
        return tracker

    def both_eofs(seen: list[Event]) -> bool:
        return {e[1] for e in seen if e[0] == "eof"} == {"r1.oplog", "r2.oplog"}

    cases = 0
    for tracker in every_run(make, both_eofs):
        assert tracker.partitions[("r1.oplog", 0)].position == 6
        assert tracker.partitions[("r2.oplog", 0)].position == 3
        cases += 1
    assert cases == 70 * 2**7  # C(8, 4) merges of 4 + 4 events, 2^7 ways to split each


def test_records_after_the_end_leave_catch_up_done_but_the_partition_not_at_its_end() -> None:
    tracker = EndTracker()
    part = ("r1.oplog", 0)
    tracker.assign(part, 0)
    tracker.on_record(part, 0)
    tracker.on_eof(part, 2)
    assert tracker.caught_up() and tracker.at_end(part)
    tracker.on_record(part, 2)  # the log grew
    assert tracker.caught_up() and not tracker.at_end(part)
    tracker.on_high_watermark(part, 10)
    assert tracker.behind(part)
    tracker.on_eof(part, 10)
    assert tracker.at_end(part) and not tracker.behind(part)


def test_a_partition_that_never_reports_its_end_is_named_with_its_position_and_known_end() -> None:
    tracker = EndTracker()
    tracker.assign(("r1.oplog", 0), 0)
    tracker.assign(("r1.local", 0), 0)
    tracker.on_eof(("r1.local", 0), 7)
    tracker.on_record(("r1.oplog", 0), 41)
    tracker.on_high_watermark(("r1.oplog", 0), 12000)
    assert not tracker.caught_up()
    text = tracker.describe()
    assert "r1.oplog at 42 of at least 12000" in text
    assert "r1.local at its end (7)" in text


def test_a_log_another_region_appends_to_steadily_is_caught_up_at_the_first_end_reported() -> None:
    """librdkafka reports EOF only after an empty fetch at the end, which a steady writer never
    allows: a restarted node waited as long as another region kept writing."""
    tracker = EndTracker()
    remote, own = ("r2.oplog", 0), ("r1.oplog", 0)
    tracker.assign(remote, 0, growing=True)
    tracker.assign(own, 0)
    tracker.on_eof(own, 4)
    tracker.on_high_watermark(remote, 9)  # the end when reading began
    for offset in range(0, 8, 2):  # records at even offsets, commit markers at odd ones
        tracker.on_record(remote, offset)
        tracker.on_high_watermark(remote, offset + 20)  # the writer goes on
        assert not tracker.caught_up(), offset
    tracker.on_record(remote, 8)
    assert tracker.caught_up()
    assert not tracker.at_end(remote)  # only caught up: the log goes on


def test_the_regions_own_log_still_needs_its_eof_however_far_reading_got() -> None:
    """A node must know its own last op exactly before it writes the next one."""
    tracker = EndTracker()
    own = ("r1.oplog", 0)
    tracker.assign(own, 0)
    tracker.on_high_watermark(own, 3)
    for offset in range(6):
        tracker.on_record(own, offset)
    assert not tracker.caught_up()
    tracker.on_eof(own, 6)
    assert tracker.caught_up()


def test_a_growing_log_is_caught_up_in_every_interleaving_by_its_eof_or_its_first_end() -> None:
    def make() -> EndTracker:
        tracker = EndTracker()
        tracker.assign(("r1.oplog", 0), 0)
        tracker.assign(("r2.oplog", 0), 0, growing=True)
        tracker.on_high_watermark(("r2.oplog", 0), 2)
        return tracker

    def own_eof_and_remote_past_2(seen: list[Event]) -> bool:
        own_done = ("eof", "r1.oplog", 6) in seen
        return own_done and any(e[1] == "r2.oplog" and e[2] >= 1 for e in seen)

    assert sum(1 for _ in every_run(make, own_eof_and_remote_past_2)) == 70 * 2**7


# --- the fetch pacer -----------------------------------------------------------------------

PACING = Pacing(active_ms=10, idle_ms=250, idle_after_s=2.0, catch_up_ms=500, max_ms=8000)
PART = ("r1.oplog", 0)


def test_pacer_reads_a_backlog_with_the_long_wait_then_the_short_one_while_records_flow() -> None:
    pacer = FetchPacer(PACING, now=0.0)
    assert pacer.wait_ms == 500
    assert pacer.observe(0.1, {PART}, set()) is None
    pacer.caught_up(0.2)
    assert pacer.observe(0.3, {PART}, set()) == 10
    assert pacer.observe(1.0, set(), set()) is None  # quiet, not yet idle
    assert pacer.observe(2.4, set(), set()) == 250  # idle: cheap for the broker
    assert pacer.observe(2.5, {PART}, set()) == 10  # records again


def test_pacer_doubles_the_wait_while_the_broker_returns_nothing_although_records_exist() -> None:
    pacer = FetchPacer(PACING, now=0.0, catching_up=False)
    assert pacer.wait_ms == 10
    now, waits = 0.0, []
    for _ in range(200):
        now += 0.05
        changed = pacer.observe(now, set(), {PART})
        if changed is not None:
            waits.append(changed)
    # Each step waits two fetches of the current wait: 10 s of silence reach 2.56 s.
    assert waits == [20, 40, 80, 160, 320, 640, 1280, 2560]
    # Once records flow with the larger wait, it stays: shorter ones could not be served.
    assert pacer.observe(now + 0.05, {PART}, set()) is None
    assert pacer.wait_ms == 2560 and pacer.floor_ms == 2560


def test_pacer_never_waits_longer_than_its_cap() -> None:
    pacer = FetchPacer(PACING, now=0.0, catching_up=True)
    now = 0.0
    for _ in range(2000):
        now += 0.5
        pacer.observe(now, set(), {PART})
    assert pacer.wait_ms == PACING.max_ms


def test_pacer_wakes_from_idle_when_records_are_expected() -> None:
    pacer = FetchPacer(PACING, now=0.0, catching_up=False)
    assert pacer.observe(3.0, set(), set()) == 250
    assert pacer.wake(3.1) == 10
    assert pacer.wake(3.2) is None


# --- the materializer loop against a scripted consumer ---------------------------------------


@dataclass
class FakeMessage:
    _topic: str
    _offset: int
    _value: bytes | None = None
    _eof: bool = False

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> Any:
        if not self._eof:
            return None
        return KafkaError(KafkaError._PARTITION_EOF)


class ScriptedConsumer:
    """Hands out scripted consume() batches in order, then nothing; a consumer created to change
    the fetch wait goes on where the previous one stopped, as a real one assigned there would."""

    script: Iterator[list[FakeMessage]] = iter([])
    topics: list[str] = []

    def __init__(self, config: dict[str, object]) -> None:
        self._batches = ScriptedConsumer.script
        self._pending: list[FakeMessage] = []

    def list_topics(self, timeout: float) -> Any:
        one_partition = type("TopicMetadata", (), {"partitions": {0: None}})()
        return type("Metadata", (), {"topics": dict.fromkeys(self.topics, one_partition)})()

    def incremental_assign(self, parts: list[Any]) -> None:
        pass

    def incremental_unassign(self, parts: list[Any]) -> None:
        pass

    def assign(self, parts: list[Any]) -> None:
        pass

    highs: dict[str, int] = {}

    def get_watermark_offsets(
        self, part: Any, timeout: float = 0.0, cached: bool = False
    ) -> tuple[int, int]:
        return (-1001, ScriptedConsumer.highs.get(part.topic, -1001))

    def poll(self, timeout: float) -> FakeMessage | None:
        self._pending = next(self._batches, [])
        if not self._pending:
            time.sleep(0.001)
            return None
        return self._pending.pop(0)

    def consume(self, n: int, timeout: float) -> list[FakeMessage]:
        rest, self._pending = self._pending, []
        return rest

    def close(self) -> None:
        pass


def _op(seq: int) -> bytes:
    return encode(ops.Op(1, seq, (), 1000, ops.XAdd(b"k", (1, seq), (b"f", b"v"))))


def script_for(events: list[Event], sizes: list[int]) -> list[list[FakeMessage]]:
    messages = [
        FakeMessage(topic, offset, _op(offset + 1) if kind == "rec" else None, kind == "eof")
        for kind, topic, offset in events
    ]
    out, i = [], 0
    for size in sizes:
        out.append(messages[i : i + size])
        i += size
    return out


@pytest.mark.parametrize(
    "sizes",
    [[1, 1, 1, 1], [4], [3, 1], [1, 3], [2, 2], [1, 2, 1]],
    ids=lambda s: "+".join(map(str, s)),
)
def test_materializer_signals_caught_up_however_records_and_eof_share_batches(
    monkeypatch: pytest.MonkeyPatch, sizes: list[int]
) -> None:
    events = partition_events("r1.oplog", [0, 1, 2], 3)
    ScriptedConsumer.script = iter(script_for(events, sizes))
    ScriptedConsumer.topics = ["r1.oplog"]
    monkeypatch.setattr(paced, "Consumer", ScriptedConsumer)
    received: list[Batch] = []
    errors: list[Exception] = []
    mat = Materializer("fake:1", "r1.local", received.append, errors.append)
    mat.start()
    try:
        assert mat.caught_up.wait(5), mat.progress()
    finally:
        mat.stop()
    assert not errors
    assert [d.offset for batch in received for d in batch] == [0, 1, 2]
    assert mat.positions == {"r1.oplog": 3}


def test_materializer_is_caught_up_once_every_topic_reported_its_end_even_while_one_grows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = [
        ("rec", "r1.oplog", 0),
        ("eof", "r1.oplog", 1),
        ("rec", "r2.oplog", 0),
        ("rec", "r1.oplog", 1),  # r1 grows after its EOF; no second EOF comes
        ("eof", "r2.oplog", 1),
    ]
    ScriptedConsumer.script = iter(script_for(events, [2, 1, 2]))
    ScriptedConsumer.topics = ["r1.oplog", "r2.oplog"]
    monkeypatch.setattr(paced, "Consumer", ScriptedConsumer)
    done = threading.Event()
    mat = Materializer("fake:1", "r1.local", lambda b: None, lambda e: done.set())
    mat.start()
    try:
        assert mat.caught_up.wait(5), mat.progress()
    finally:
        mat.stop()
    assert not done.is_set()


def test_materializer_catches_up_while_another_region_writes_without_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No EOF ever comes for r2.oplog (a fetch always finds new records): reading past the end
    the broker first reported is enough; the node's own r1.oplog still ends with its EOF."""
    events = [("eof", "r1.local", 0), ("rec", "r1.oplog", 0), ("eof", "r1.oplog", 1)]
    events += [("rec", "r2.oplog", o) for o in range(0, 40, 2)]
    ScriptedConsumer.script = iter(script_for(events, [1] * len(events)))
    ScriptedConsumer.topics = ["r1.local", "r1.oplog", "r2.oplog"]
    ScriptedConsumer.highs = {"r2.oplog": 11}
    monkeypatch.setattr(paced, "Consumer", ScriptedConsumer)
    received: list[int] = []
    mat = Materializer(
        "fake:1",
        "r1.local",
        lambda b: received.extend(d.offset for d in b if d.topic == "r2.oplog"),
        lambda e: None,
        own_topics=frozenset({"r1.oplog", "r1.local"}),
    )
    mat.start()
    try:
        assert mat.caught_up.wait(5), mat.progress()
    finally:
        mat.stop()
        ScriptedConsumer.highs = {}
    assert received[:6] == [0, 2, 4, 6, 8, 10]
