"""`streams.kafka.reading.poll_batch`, `ReadToEnd` and `PacedConsumer` against scripted consumers:
batches cut anywhere, EOF events at control-record offsets, records after an EOF, errors, timeouts
that say where each partition got, a new consumer assigned where reading stands whenever the fetch
wait changes. (Against real brokers they run in the materializer, mirror, replay, snapshot and
pipeline integration tests.)"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.kafka import paced
from streams.kafka.paced import PacedConsumer
from streams.kafka.reading import EndNotReached, Pacing, ReadToEnd, poll_batch


@dataclass
class Event:
    topic: str
    offset: int
    code: int | None = None  # None: a data record; else the error event's code

    def error(self) -> Any:
        return None if self.code is None else KafkaError(self.code)


def rec(topic: str, offset: int) -> Any:
    return _Msg(Event(topic, offset))


def eof(topic: str, offset: int) -> Any:
    return _Msg(Event(topic, offset, KafkaError._PARTITION_EOF))


def err(topic: str, code: int) -> Any:
    return _Msg(Event(topic, -1, code))


class _Msg:
    def __init__(self, event: Event) -> None:
        self.event = event

    def topic(self) -> str:
        return self.event.topic

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self.event.offset

    def error(self) -> Any:
        return self.event.error()

    def __repr__(self) -> str:
        e = self.event
        return f"{e.topic}@{e.offset}" + ("" if e.code is None else f"!{e.code}")


@dataclass
class ScriptedConsumer:
    """poll() hands out the next scripted batch's first event, consume(n, 0) up to n of the rest
    (what a real consumer has queued); then nothing."""

    batches: list[list[Any]]
    high: int = -1001
    calls: list[tuple[str, Any]] = field(default_factory=list)
    _pending: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script: Iterator[list[Any]] = iter(self.batches)

    def assign(self, parts: list[Any]) -> None:
        self.calls.append(("assign", sorted((p.topic, p.offset) for p in parts)))

    def incremental_assign(self, parts: list[Any]) -> None:
        self.calls.append(("incr_assign", sorted((p.topic, p.offset) for p in parts)))

    def incremental_unassign(self, parts: list[Any]) -> None:
        self.calls.append(("unassign", sorted(p.topic for p in parts)))

    def close(self) -> None:
        self.calls.append(("close", None))

    def get_watermark_offsets(self, part: Any, cached: bool = False) -> tuple[int, int]:
        return (0, self.high)

    def poll(self, timeout: float) -> Any:
        self.calls.append(("poll", timeout))
        if not self._pending:
            self._pending = list(next(self._script, []))
        return self._pending.pop(0) if self._pending else None

    def consume(self, n: int, timeout: float) -> list[Any]:
        self.calls.append(("consume", (n, timeout)))
        out, self._pending = self._pending[:n], self._pending[n:]
        return out


def cuts(events: list[Any]) -> Iterator[list[list[Any]]]:
    """Every way to cut the events into consecutive batches."""
    n = len(events)
    for mask in itertools.product([False, True], repeat=n - 1):
        out, start = [], 0
        for i, cut in enumerate(mask, 1):
            if cut:
                out.append(events[start:i])
                start = i
        out.append(events[start:])
        yield out


def offsets(messages: list[Any]) -> list[tuple[str, int]]:
    return [(m.topic(), m.offset()) for m in messages]


# --- poll_batch --------------------------------------------------------------------------------


def test_poll_batch_waits_for_one_event_then_takes_what_is_queued_without_waiting() -> None:
    consumer = ScriptedConsumer([[rec("a", 0), rec("a", 1), rec("a", 2)]])
    got = poll_batch(consumer, 0.3, 2)  # type: ignore[arg-type]
    assert offsets(got) == [("a", 0), ("a", 1)]
    assert consumer.calls == [("poll", 0.3), ("consume", (1, 0))]
    assert offsets(poll_batch(consumer, 0.3, 10)) == [("a", 2)]  # type: ignore[arg-type]


def test_poll_batch_returns_nothing_when_nothing_came_and_never_consumes_for_one_record() -> None:
    consumer = ScriptedConsumer([[rec("a", 0), rec("a", 1)]])
    assert offsets(poll_batch(consumer, 0.1, 1)) == [("a", 0)]  # type: ignore[arg-type]
    assert ("consume", (0, 0)) not in consumer.calls
    consumer = ScriptedConsumer([])
    assert poll_batch(consumer, 0.1, 100) == []  # type: ignore[arg-type]
    assert consumer.calls == [("poll", 0.1)]


# --- ReadToEnd ---------------------------------------------------------------------------------

# Transactional logs: records at even offsets, commit markers at odd ones; EOF past the last marker.
A = [rec("a", 0), rec("a", 2), eof("a", 4)]
B = [rec("b", 0), eof("b", 2)]


def merges(x: list[Any], y: list[Any]) -> Iterator[list[Any]]:
    n = len(x) + len(y)
    for where in itertools.combinations(range(n), len(x)):
        ix, iy, out = iter(x), iter(y), []
        for i in range(n):
            out.append(next(ix) if i in where else next(iy))
        yield out


def test_every_partition_is_read_to_its_eof_however_events_interleave_and_batch() -> None:
    cases = 0
    for events in merges(A, B):
        for batches in cuts(events):
            consumer = ScriptedConsumer(batches)
            reading = ReadToEnd(consumer, {("a", 0): 0, ("b", 0): 0}, timeout=5)  # type: ignore[arg-type]
            got = offsets(list(reading))
            assert sorted(got) == [("a", 0), ("a", 2), ("b", 0)]
            assert reading.ends == {("a", 0): 4, ("b", 0): 2}
            assert {p: s.position for p, s in reading.tracker.partitions.items()} == {
                ("a", 0): 4,
                ("b", 0): 2,
            }
            assert consumer.calls[0] == ("assign", [("a", 0), ("b", 0)])
            # The partition that ended first is let go while the other is still read, unless
            # both ended in the same poll.
            unassigned = [c for c in consumer.calls if c[0] == "unassign"]
            assert len(unassigned) <= 1
            cases += 1
    assert cases == 10 * 2**4


def test_records_after_a_partitions_eof_are_not_handed_out() -> None:
    consumer = ScriptedConsumer(
        [[rec("a", 0), eof("a", 1), rec("a", 1), rec("b", 0)], [eof("b", 1)]]
    )
    reading = ReadToEnd(consumer, {("a", 0): 0, ("b", 0): 0}, timeout=5)  # type: ignore[arg-type]
    assert offsets(list(reading)) == [("a", 0), ("b", 0)]
    assert ("unassign", ["a"]) in consumer.calls


def test_an_empty_partition_ends_at_its_eof_and_the_start_offset_is_assigned() -> None:
    consumer = ScriptedConsumer([[], [], [eof("a", 7)]])
    reading = ReadToEnd(consumer, {("a", 0): 7}, timeout=5, wait_s=0.01)  # type: ignore[arg-type]
    assert list(reading) == []
    assert reading.ends == {("a", 0): 7}
    assert consumer.calls[0] == ("assign", [("a", 7)])


def test_a_growing_log_ends_once_read_past_the_first_end_reported_without_an_eof() -> None:
    """A log its region writes steadily may never report an EOF; read as `growing`, it ends at
    the first high watermark reported (here 3), its later records not handed out; read as not
    growing, the same script never ends."""
    script = [[rec("a", 0)], [rec("a", 1)], [rec("a", 2)], [rec("a", 3)], [rec("a", 4)]]
    reading = ReadToEnd(
        ScriptedConsumer(script, high=3),  # type: ignore[arg-type]
        {("a", 0): 0},
        timeout=5,
        wait_s=0.01,
        growing=True,
    )
    assert offsets(list(reading)) == [("a", 0), ("a", 1), ("a", 2)]
    assert reading.ends == {("a", 0): 3}
    endless = ReadToEnd(
        ScriptedConsumer(script, high=3),  # type: ignore[arg-type]
        {("a", 0): 0},
        timeout=0.2,
        wait_s=0.01,
    )
    with pytest.raises(EndNotReached):
        list(endless)


def test_the_timeout_names_every_partitions_position_and_known_end() -> None:
    consumer = ScriptedConsumer([[rec("a", 0), rec("a", 2), eof("b", 3)]], high=40)
    reading = ReadToEnd(
        consumer,  # type: ignore[arg-type]
        {("a", 0): 0, ("b", 0): 3},
        doing="reading r1's logs",
        timeout=0.05,
        wait_s=0.01,
    )
    with pytest.raises(EndNotReached) as caught:
        list(reading)
    text = str(caught.value)
    assert text.startswith("reading r1's logs: not done in 0.05s: ")
    assert "a at 3 of at least 40" in text
    assert "b at its end (3)" in text


def test_the_stall_timeout_counts_from_the_last_event_and_the_error_type_is_the_callers() -> None:
    class Gone(RuntimeError):
        pass

    consumer = ScriptedConsumer([[rec("a", 0)]])
    reading = ReadToEnd(
        consumer,  # type: ignore[arg-type]
        {("a", 0): 0},
        doing="reading",
        stall_timeout=0.05,
        wait_s=0.01,
        timeout_error=Gone,
    )
    with pytest.raises(Gone, match=r"reading: no data nor end for 0.05s: a at 1, end not seen"):
        list(reading)


def test_error_events_go_to_the_callers_handler_else_raise() -> None:
    events = [[rec("a", 0), err("a", KafkaError._TRANSPORT), rec("a", 1), eof("a", 2)]]
    seen: list[int] = []
    reading = ReadToEnd(
        ScriptedConsumer(events),  # type: ignore[arg-type]
        {("a", 0): 0},
        timeout=5,
        on_error=lambda m: seen.append(m.error().code()),
    )
    assert offsets(list(reading)) == [("a", 0), ("a", 1)]
    assert seen == [KafkaError._TRANSPORT]
    with pytest.raises(KafkaException):
        list(ReadToEnd(ScriptedConsumer(events), {("a", 0): 0}, timeout=5))  # type: ignore[arg-type]


def test_follow_reads_past_eof_until_the_caller_finishes_the_partition() -> None:
    batches = [[rec("a", 0), eof("a", 1)], [rec("a", 1), eof("a", 2)], [rec("a", 2)], [rec("a", 3)]]
    reading = ReadToEnd(ScriptedConsumer(batches), {("a", 0): 0}, timeout=5, follow=True)  # type: ignore[arg-type]
    got = []
    for msg in reading:
        got.append(msg.offset())
        if msg.offset() == 2:
            reading.finish(("a", 0))
    assert got == [0, 1, 2]
    assert reading.ends == {("a", 0): 2}


def test_after_batch_sees_each_poll_after_its_records_were_handled_and_may_swap_consumers() -> None:
    first = ScriptedConsumer([[rec("a", 0), rec("a", 2)]])
    second = ScriptedConsumer([[], [rec("a", 4), eof("a", 5)]])
    handled: list[int] = []
    log: list[tuple[int, list[int]]] = []

    def swap(consumer: Any, batch: list[Any]) -> Any:
        log.append((len(handled), [m.offset() for m in batch]))
        return second if batch else consumer

    reading = ReadToEnd(first, {("a", 0): 0}, timeout=5, after_batch=swap)  # type: ignore[arg-type]
    for msg in reading:
        handled.append(msg.offset())
    assert handled == [0, 2, 4]
    assert log == [(2, [0, 2]), (2, []), (3, [4, 5])]
    assert [c for c in second.calls if c[0] == "assign"] == []  # the caller assigns a swap


def test_a_finished_read_with_one_partition_never_unassigns() -> None:
    consumer = ScriptedConsumer([[rec("a", 0), eof("a", 1)]])
    assert len(list(ReadToEnd(consumer, {("a", 0): 0}, timeout=5))) == 1  # type: ignore[arg-type]
    assert not [c for c in consumer.calls if c[0] == "unassign"]


# --- PacedConsumer -----------------------------------------------------------------------------


@dataclass
class Cluster:
    """Hands PacedConsumer scripted consumers (patched in for `Consumer`): each new consumer
    records its config and goes on with the script where the previous one stopped, as a real
    one assigned where reading stands would."""

    batches: list[list[Any]]
    high: int = -1001
    consumers: list[ScriptedConsumer] = field(default_factory=list)
    configs: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script = iter(self.batches)

    def __call__(self, config: dict[str, Any]) -> ScriptedConsumer:
        consumer = ScriptedConsumer([], high=self.high)
        consumer._script = self._script
        self.consumers.append(consumer)
        self.configs.append(config)
        return consumer

    def assigned(self, index: int) -> list[Any]:
        """What consumer `index` was assigned (assign / incremental_assign), in order."""
        return [c for c in self.consumers[index].calls if c[0] in ("assign", "incr_assign")]


def _paced(monkeypatch: pytest.MonkeyPatch, cluster: Cluster, **options: Any) -> PacedConsumer:
    monkeypatch.setattr(paced, "Consumer", cluster)
    return PacedConsumer("fake:1", "group", poll_s=0.001, **options)


PACING = Pacing(active_ms=10, idle_ms=250, idle_after_s=0.05, catch_up_ms=100, max_ms=8000)


def test_a_changed_wait_means_a_new_consumer_assigned_where_reading_stands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = Cluster([[rec("a", 0), rec("a", 2)], [rec("b", 5)]])
    reader = _paced(monkeypatch, cluster, pacing=PACING)
    reader.assign({("a", 0): 0})
    assert offsets(reader.poll()) == [("a", 0), ("a", 2)]
    assert [c["fetch.wait.max.ms"] for c in cluster.configs] == [100]  # still the backlog
    reader.assign({("b", 0): 5}, growing={("b", 0)})
    reader.leave_catch_up()
    assert offsets(reader.poll()) == [("b", 5)]
    # Records flow: the short wait, on a new consumer that goes on from a's 3 and b's 6.
    assert [c["fetch.wait.max.ms"] for c in cluster.configs] == [100, 10]
    assert ("close", None) in cluster.consumers[0].calls
    # The first consumer was opened by the first assign, the second added to it.
    assert cluster.assigned(0) == [("assign", [("a", 0)]), ("incr_assign", [("b", 5)])]
    assert cluster.assigned(1) == [("assign", [("a", 3), ("b", 6)])]
    assert reader.positions() == {("a", 0): 3, ("b", 0): 6}
    assert reader.tracker.partitions[("b", 0)].growing


def test_wake_leaves_the_idle_wait_at_the_next_step(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster([])
    reader = _paced(monkeypatch, cluster, pacing=PACING, catching_up=False)
    reader.assign({("a", 0): 7})
    time.sleep(PACING.idle_after_s * 2)
    assert reader.poll() == []
    assert reader.wait_ms == PACING.idle_ms  # quiet: the long wait, cheap for the broker
    reader.wake()
    assert reader.poll() == []
    assert [c["fetch.wait.max.ms"] for c in cluster.configs] == [10, 250, 10]
    assert cluster.assigned(2) == [("assign", [("a", 7)])]


def test_an_idle_step_polls_in_slices_until_a_record_and_an_interrupt_ends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Idle, one step waits up to IDLE_STEP_S in poll_s slices before its bookkeeping (an idle
    topology's readers woke 10-20 times a second); a record ends the wait at its slice."""
    monkeypatch.setattr(paced, "IDLE_STEP_S", 0.01)  # ten slices of poll_s = 0.001
    cluster = Cluster([[], [], [], [rec("a", 7)]])
    reader = _paced(monkeypatch, cluster, pacing=PACING, catching_up=False)

    def polls() -> int:
        return sum(1 for c in cluster.consumers for call in c.calls if call[0] == "poll")

    reader.assign({("a", 0): 7})
    time.sleep(PACING.idle_after_s * 2)
    assert reader.poll() == []  # the step that sees the quiet: the long wait from now on
    assert reader.wait_ms == PACING.idle_ms
    before = polls()
    assert offsets(reader.poll()) == [("a", 7)]
    assert polls() - before == 3  # two empty slices, then the record: one step
    assert reader.wait_ms == PACING.active_ms  # records flow again: the short wait
    time.sleep(PACING.idle_after_s * 2)
    assert reader.poll() == []
    assert reader.wait_ms == PACING.idle_ms
    before = polls()
    assert reader.poll() == []  # nothing comes: the whole step, ten slices
    assert polls() - before == 10
    reader.interrupt()
    before = polls()
    assert reader.poll() == []  # interrupted: one slice, and the pacing is unchanged
    assert polls() - before == 1
    assert reader.wait_ms == PACING.idle_ms
    before = polls()
    assert reader.poll() == []  # an interrupt ends one step only
    assert polls() - before == 10


def test_read_to_end_starts_every_partition_afresh_and_ends_once_each_reported_an_eof_since(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = Cluster(
        [
            [rec("a", 0), eof("a", 1), eof("b", 4)],  # both at their end before read_to_end
            [rec("a", 1)],
            [eof("a", 2)],
            [rec("a", 2)],  # a grows after its EOF: it still counts as reached
            [eof("b", 4)],
        ]
    )
    reader = _paced(monkeypatch, cluster, pacing=PACING, catching_up=False)
    reader.assign({("a", 0): 0, ("b", 0): 4})
    assert offsets(reader.poll()) == [("a", 0)]
    assert reader.tracker.caught_up()
    got = [offsets(batch) for batch in reader.read_to_end(5.0)]
    assert got == [[("a", 1)], [], [("a", 2)], []]
    # Assigned again where each partition stood: a fresh EOF is reported even with no news.
    assert cluster.assigned(0)[-1] == ("assign", [("a", 1), ("b", 4)])
    assert reader.positions() == {("a", 0): 3, ("b", 0): 4}


def test_read_to_end_times_out_naming_each_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stuck(RuntimeError):
        pass

    reader = _paced(monkeypatch, Cluster([[eof("a", 3)]], high=9), pacing=PACING)
    reader.assign({("a", 0): 3, ("b", 0): 0})
    with pytest.raises(Stuck, match=r"^copying: not done in 0.05s: a at its end \(3\), b at 0 of"):
        for _batch in reader.read_to_end(0.05, doing="copying", timeout_error=Stuck):
            pass


def test_unassigned_partitions_are_dropped_and_error_events_go_to_on_error_after_the_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = [rec("a", 0), err("a", KafkaError._TRANSPORT), rec("b", 0), rec("a", 1)]
    seen: list[int] = []
    reader = _paced(
        monkeypatch,
        Cluster([events]),
        on_error=lambda m: seen.append(reader.tracker.partitions[("a", 0)].position),
    )
    reader.assign({("a", 0): 0, ("b", 0): 0})
    assert reader.unassign([("b", 0), ("c", 0)]) == {("b", 0): 0}
    assert offsets(reader.poll()) == [("a", 0), ("a", 1)]
    assert seen == [2]  # the error came after the step's records were counted
    assert reader.positions() == {("a", 0): 2}
    reader.close()
    assert reader.positions() == {("a", 0): 2}  # where reading stopped
    reader.close(forget=True)
    assert reader.positions() == {}
