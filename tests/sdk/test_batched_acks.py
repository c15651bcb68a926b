"""Batched, pipelined acks and bounded concurrency of GroupConsumer, on one real region node.

The node counts the commands it ran (INFO commandstats), so the number of XACKs a consumer sent
is observed where it lands, not inferred from the SDK. That consecutive acks of a batch still
replicate to another region is proven in test_regions.py (a batch's XACK replicated before the
node is killed, and not re-delivered by the other region).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from streams.sdk import GroupConsumer, Producer, SdkError, aio
from topology.local import LocalTopology

ROOT = Path(__file__).resolve().parents[2]


def _xacks(client: redis.Redis) -> int:
    """How many XACK commands the node has run."""
    stats = client.info("commandstats")
    row = stats.get("cmdstat_xack")
    return int(row["calls"]) if row else 0


def _pending(client: redis.Redis, stream: str) -> list[str]:
    return [p["message_id"].decode() for p in client.xpending_range(stream, "g", "-", "+", 1000)]


def test_a_batch_is_acked_by_one_xack_sent_with_the_next_read(
    region: LocalTopology, url: str, stream: str
) -> None:
    client = region.client(1)
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(75)])
    before = _xacks(client)
    with GroupConsumer(url, stream, "g", "c", lambda i, f: None, count=25, block_ms=100) as c:
        assert c.run_once() == 25
        # Handled, not acked yet: the ack waits for the next read, none was sent.
        assert _pending(client, stream) == ids[:25] and _xacks(client) == before
        assert c.run_once() == 25
        assert _pending(client, stream) == ids[25:50] and _xacks(client) == before + 1
        assert c.run_once() == 25
        assert _pending(client, stream) == ids[50:] and _xacks(client) == before + 2
    # close() sends the last batch's ack.
    assert _pending(client, stream) == [] and _xacks(client) == before + 3


def test_a_failed_entry_is_left_out_of_its_batch_xack(
    region: LocalTopology, url: str, stream: str
) -> None:
    client = region.client(1)
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(20)])

    def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
        if int(fields[b"n"]) in (3, 17):
            raise RuntimeError("not now")

    before = _xacks(client)
    with GroupConsumer(
        url, stream, "g", "c", handler, count=20, block_ms=100, retry_ms=60_000
    ) as consumer:
        assert consumer.run_once() == 20
    assert _pending(client, stream) == [ids[3], ids[17]]
    assert _xacks(client) == before + 1


def test_every_handler_returned_before_its_entry_was_acked(
    region: LocalTopology, url: str, stream: str, drain: Callable[..., None]
) -> None:
    """Each handler looks at the node's PEL: its own entry must still be pending there, with
    every later entry (handled one after the other, nothing later can have been acked)."""
    client = region.client(1)
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(30)])
    seen: dict[str, list[str]] = {}

    def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
        seen[entry_id] = _pending(client, stream)

    with GroupConsumer(url, stream, "g", "c", handler, count=10, block_ms=100) as consumer:
        drain(consumer)
    assert list(seen) == ids
    for n, entry_id in enumerate(ids):
        assert set(ids[n : (n // 10 + 1) * 10]) <= set(seen[entry_id]), entry_id
    assert _pending(client, stream) == []


@pytest.mark.parametrize("kind", ["thread", "coroutine"])
def test_concurrent_handlers_stay_within_the_bound_and_failures_stay_pending(
    region: LocalTopology, url: str, stream: str, kind: str
) -> None:
    client = region.client(1)
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(24)])
    lock = threading.Lock()
    running = 0
    most = 0
    handled: list[str] = []

    def enter() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)

    def leave(entry_id: str, fields: dict[bytes, bytes]) -> None:
        nonlocal running
        with lock:
            running -= 1
            if fields[b"n"] == b"5":
                raise ValueError("poison")
            handled.append(entry_id)

    def blocking(entry_id: str, fields: dict[bytes, bytes]) -> None:
        enter()
        time.sleep(0.1)
        leave(entry_id, fields)

    async def coroutine(entry_id: str, fields: dict[bytes, bytes]) -> None:
        enter()
        await asyncio.sleep(0.1)
        leave(entry_id, fields)

    handler = blocking if kind == "thread" else coroutine
    before = _xacks(client)
    with GroupConsumer(
        url, stream, "g", "c", handler, count=24, block_ms=100, concurrency=4, retry_ms=60_000
    ) as consumer:
        assert consumer.run_once() == 24
    assert most == 4  # 24 handlers of 100 ms, 4 at a time
    assert sorted(handled) == sorted(set(ids) - {ids[5]})
    assert _pending(client, stream) == [ids[5]] and _xacks(client) == before + 1


def test_stop_during_concurrent_handling_acks_the_started_and_hands_back_the_rest(
    region: LocalTopology, url: str, stream: str
) -> None:
    client = region.client(1)
    with Producer(url, stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(12)])
    started = threading.Event()
    handled: list[str] = []

    def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
        started.set()
        time.sleep(0.3)
        handled.append(entry_id)

    consumer = GroupConsumer(
        url, stream, "g", "c", handler, count=12, block_ms=100, concurrency=3, claim_idle_ms=60000
    )
    runner = threading.Thread(target=consumer.run)
    runner.start()
    assert started.wait(20)
    consumer.stop()
    runner.join(20)
    assert not runner.is_alive()
    consumer.close()
    assert 1 <= len(handled) < 12
    pending = client.xpending_range(stream, "g", "-", "+", 20)
    assert sorted(p["message_id"].decode() for p in pending) == sorted(set(ids) - set(handled))
    assert all(p["consumer"] == b"" and p["time_since_delivered"] == -1 for p in pending)  # XNACK


def test_the_asyncio_face_acks_what_was_handled_when_stopped_by_a_handler(
    region: LocalTopology, url: str, stream: str
) -> None:
    client = region.client(1)

    async def main() -> list[str]:
        async with aio.Producer(url, stream) as producer:
            ids = await producer.send_many([{"n": i} for i in range(8)])

        async def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
            if entry_id == ids[3]:
                consumer.stop()  # this entry is finished and acked, 4..7 handed back

        consumer = aio.GroupConsumer(url, stream, "g", "c", handler, count=8, block_ms=100)
        await asyncio.wait_for(consumer.run(), 20)
        assert _pending(client, stream) == ids[4:]  # acked before run() returned
        await consumer.close()
        return ids

    asyncio.run(main())


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_concurrency_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(SdkError, match="concurrency must be an integer >= 1"):
        GroupConsumer("127.0.0.1:1", "s", "g", "c", lambda i, f: None, concurrency=bad)


def test_throughput_example_runs_every_reader_to_the_end(url: str) -> None:
    """examples/sdk/throughput.py (docs/benchmarks.md's figures) on a few entries: every reader
    consumes the whole stream and leaves nothing pending (the example exits non-zero else)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples/sdk/throughput.py"), "--endpoint", url]
        + ["--entries", "500", "--concurrency", "4", "--rounds", "2", "--no-redis"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    readers = ["plain loop", "GroupConsumer x1", "GroupConsumer x3", "concurrency 4"]
    rows = [line for line in run.stdout.splitlines() if line.startswith("region node")]
    assert len(rows) == 3 * len(readers)  # two rounds and the medians
    assert all(any(r in row for row in rows) for r in readers), run.stdout
