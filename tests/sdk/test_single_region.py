"""Producer and GroupConsumer against one real region node (embedded broker, RESP over sockets)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from streams.sdk import (
    DEAD_LETTER_FIELDS,
    CountingMetrics,
    DeadLetter,
    GroupConsumer,
    Producer,
    Retry,
    aio,
)
from topology.local import LocalTopology


def test_send_and_send_many_return_the_ids_the_stream_holds(
    region: LocalTopology, url: str, stream: str
) -> None:
    with Producer([url], stream, idempotency=True) as producer:
        first = producer.send({"n": 0})
        rest = producer.send_many({"n": i} for i in range(1, 251))
    rows = region.client(1).xrange(stream)
    assert [r[0].decode() for r in rows] == [first, *rest]
    assert [int(r[1][b"n"]) for r in rows] == list(range(251))
    assert all(b"_idk" not in r[1] for r in rows)  # the keys went as XADD IDMP
    assert region.client(1).xinfo_stream(stream)["iids-added"] == 251


def test_producer_maxlen_trims_the_stream(region: LocalTopology, url: str, stream: str) -> None:
    with Producer([url], stream, maxlen=10, approximate=False) as producer:
        producer.send_many([{"n": i} for i in range(30)])
    assert region.client(1).xlen(stream) == 10


def test_every_entry_is_handled_once_and_acked(
    region: LocalTopology, url: str, stream: str, drain: Callable[..., None]
) -> None:
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(100)])
    handled: list[str] = []
    metrics = CountingMetrics()
    with GroupConsumer(
        url,
        stream,
        "g",
        "c1",
        lambda i, f: handled.append(i),
        count=30,
        block_ms=100,
        metrics=metrics,
        metrics_interval_s=0.0,
    ) as consumer:
        drain(consumer)
    assert handled == ids
    counts = metrics.snapshot()
    assert counts.processed == 100 and counts.failed == 0
    assert counts.lag == 0 and counts.pending == 0
    assert region.client(1).xpending(stream, "g")["pending"] == 0


def test_a_failing_entry_is_retried_then_dead_lettered_with_its_story(
    region: LocalTopology, url: str, stream: str, drain: Callable[..., None]
) -> None:
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(10)])
    attempts: dict[str, int] = {}

    def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
        attempts[entry_id] = attempts.get(entry_id, 0) + 1
        if fields[b"n"] == b"3":
            raise ValueError("poison")
        if fields[b"n"] == b"5" and attempts[entry_id] == 1:
            raise Retry(after_ms=50)
        if fields[b"n"] == b"7":
            raise DeadLetter("not for us")

    dlq = stream + ":dead"
    metrics = CountingMetrics()
    with GroupConsumer(
        url,
        stream,
        "g",
        "c1",
        handler,
        block_ms=100,
        max_deliveries=3,
        retry_ms=50,
        dead_letter=dlq,
        metrics=metrics,
    ) as consumer:
        drain(consumer)
    assert attempts[ids[3]] == 3 and attempts[ids[5]] == 2 and attempts[ids[7]] == 1
    assert all(attempts[i] == 1 for n, i in enumerate(ids) if n not in (3, 5))
    dead = region.client(1).xrange(dlq)
    by_id = {f[b"_dl_id"].decode(): f for _, f in dead}
    assert set(by_id) == {ids[3], ids[7]}
    poison = by_id[ids[3]]
    assert set(DEAD_LETTER_FIELDS) <= {k.decode() for k in poison}
    assert poison[b"n"] == b"3" and poison[b"_dl_attempts"] == b"3"
    assert poison[b"_dl_error"] == b"ValueError: poison" and poison[b"_dl_region"] == b"r1"
    assert poison[b"_dl_group"] == b"g" and poison[b"_dl_stream"] == stream.encode()
    assert by_id[ids[7]][b"_dl_error"] == b"DeadLetter: not for us"
    assert region.client(1).xpending(stream, "g")["pending"] == 0
    counts = metrics.snapshot()
    assert counts.dead_lettered == 2 and counts.processed == 8


def test_a_restarted_consumer_handles_its_own_pending_entries_first(
    region: LocalTopology, url: str, stream: str, drain: Callable[..., None]
) -> None:
    client = region.client(1)
    with Producer(url, stream) as producer:
        old = producer.send_many([{"n": i} for i in range(3)])
    client.xgroup_create(stream, "g", "0")
    client.xreadgroup("g", "c1", {stream: ">"}, count=3)  # "c1" read them, then crashed
    with Producer(url, stream) as producer:
        new = producer.send_many([{"n": i} for i in range(3, 6)])
    handled: list[str] = []
    with GroupConsumer(
        url, stream, "g", "c1", lambda i, f: handled.append(i), block_ms=100
    ) as consumer:
        drain(consumer)
    assert handled == old + new


def test_entries_of_a_dead_consumer_are_reclaimed_by_a_bounded_sweep(
    region: LocalTopology, url: str, stream: str, drain: Callable[..., None]
) -> None:
    client = region.client(1)
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(25)])
    client.xgroup_create(stream, "g", "0")
    client.xreadgroup("g", "dead", {stream: ">"}, count=25)
    handled: list[str] = []
    with GroupConsumer(
        url,
        stream,
        "g",
        "alive",
        lambda i, f: handled.append(i),
        count=10,
        block_ms=100,
        claim_idle_ms=300,
    ) as consumer:
        drain(consumer, idle_steps=8)
    assert sorted(handled) == sorted(ids) and len(handled) == 25
    assert client.xpending(stream, "g")["pending"] == 0


def test_a_long_handler_renews_its_claim_while_running(
    region: LocalTopology, url: str, stream: str
) -> None:
    with Producer(url, stream) as producer:
        producer.send({"n": 1})
    stolen: list[list[object]] = []
    sweeper = region.client(1)

    def slow(entry_id: str, fields: dict[bytes, bytes]) -> None:
        for _ in range(6):  # 1.2 s in all, while another consumer tries to reclaim
            time.sleep(0.2)
            reply = sweeper.xautoclaim(stream, "g", "thief", 300, "0-0", justid=True)
            stolen.append(reply)

    with GroupConsumer(url, stream, "g", "a", slow, block_ms=100, claim_idle_ms=300) as consumer:
        consumer.run_once()
    assert len(stolen) == 6 and all(reply == [] for reply in stolen)


def test_stop_from_another_thread_finishes_the_entry_and_hands_back_the_rest(
    region: LocalTopology, url: str, stream: str
) -> None:
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(10)])
    handled: list[str] = []
    started = threading.Event()

    def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
        started.set()
        time.sleep(0.3)
        handled.append(entry_id)

    consumer = GroupConsumer(
        url, stream, "g", "a", handler, count=10, block_ms=100, claim_idle_ms=60000
    )
    runner = threading.Thread(target=consumer.run)
    runner.start()
    assert started.wait(20)
    consumer.stop()
    runner.join(20)
    assert not runner.is_alive()
    consumer.close()
    assert handled == ids[: len(handled)] and 1 <= len(handled) < 10
    pending = region.client(1).xpending_range(stream, "g", "-", "+", 20)
    assert [p["message_id"].decode() for p in pending] == ids[len(handled) :]
    # Handed back with XNACK: unowned (idle -1), so any consumer's CLAIM read takes them first.
    assert all(p["consumer"] == b"" and p["time_since_delivered"] == -1 for p in pending)


def test_stop_interrupts_a_blocking_read(url: str, stream: str) -> None:
    consumer = GroupConsumer(url, stream, "g", "a", lambda i, f: None, block_ms=30000)
    runner = threading.Thread(target=consumer.run)
    runner.start()
    time.sleep(0.5)
    consumer.stop()
    runner.join(5)
    assert not runner.is_alive()
    consumer.close()


def test_the_asyncio_face_runs_coroutine_handlers(
    region: LocalTopology, url: str, stream: str
) -> None:
    async def main() -> list[str]:
        handled: list[str] = []

        async def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
            await asyncio.sleep(0)
            handled.append(entry_id)
            if len(handled) == 5:
                consumer.stop()

        async with aio.Producer(url, stream) as producer:
            ids = await producer.send_many([{"n": i} for i in range(5)])
        consumer = aio.GroupConsumer(url, stream, "g", "c", handler, block_ms=100)
        async with consumer:
            await asyncio.wait_for(consumer.run(), 20)
        assert handled == ids
        return handled

    assert len(asyncio.run(main())) == 5
