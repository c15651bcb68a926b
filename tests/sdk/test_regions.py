"""The SDK across regions: redirection after a node dies, and the issue's at-least-once proof.

Real parts only: embedded brokers, mirrors, region node subprocesses killed with SIGKILL.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from streams.sdk import CountingMetrics, GroupConsumer, Metrics, Producer
from topology.local import LocalTopology


def _key(entry_id: str) -> tuple[int, int]:
    ms, seq = entry_id.split("-")
    return int(ms), int(seq)


def _url(topo: LocalTopology, i: int) -> str:
    return f"redis://127.0.0.1:{topo.ports[i]}"


class _Recorder(Metrics):
    def __init__(self) -> None:
        self.redelivered_ids: list[str] = []
        self.skipped: list[str] = []
        self.failovers: list[tuple[str, str]] = []

    def redelivered(self, entry_id: str, attempt: int) -> None:
        self.redelivered_ids.append(entry_id)

    def duplicate_skipped(self, entry_id: str) -> None:
        self.skipped.append(entry_id)

    def failover(self, from_url: str, to_url: str) -> None:
        self.failovers.append((from_url, to_url))


def test_redirected_consumer_skips_nothing_and_does_not_reread_replicated_acks() -> None:
    with LocalTopology(regions=2, manual_sync=True) as topo:
        with Producer(_url(topo, 1), "orders") as producer:
            ids = producer.send_many([{"n": i} for i in range(20)])
        topo.client(1).xgroup_create("orders", "g", "0")
        topo.sync()
        handled: list[str] = []

        def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
            n = int(fields[b"n"])
            if n == 10:
                # The first batch's one XACK (0..9, consecutive) went out with the read of this
                # batch: its effect replicates.
                topo.sync()
            if n == 15:
                topo.kill_node(1)  # this batch's XACK (10..19) never reaches r1
            handled.append(entry_id)

        metrics = _Recorder()
        consumer = GroupConsumer(
            [_url(topo, 1), _url(topo, 2)],
            "orders",
            "g",
            "alice",
            handler,
            count=10,
            block_ms=200,
            metrics=metrics,
        )
        try:
            deadline = time.monotonic() + 60
            while len(set(handled)) < 20 and time.monotonic() < deadline:
                consumer.run_once()
            for _ in range(3):
                consumer.run_once()
        finally:
            consumer.close()
        assert metrics.failovers == [(_url(topo, 1), _url(topo, 2))]
        assert set(handled) == set(ids)  # nothing skipped
        # r2 re-delivered exactly what had not been acked consecutively there: 10..19 ...
        assert sorted(metrics.redelivered_ids, key=_key) == ids[10:]
        # ... all handled here already (their XACK failed with the node): acked, not handled.
        assert sorted(metrics.skipped, key=_key) == ids[10:]
        assert Counter(handled) == Counter(ids)
        assert topo.client(2).xpending("orders", "g")["pending"] == 0


def test_group_of_three_with_failures_a_stop_and_a_killed_node_handles_everything() -> None:
    """Producers in r1 and r2, three consumers of one group in r3; the handler fails 10 % of the
    time, 1 % of the entries are poison; one consumer is stopped mid-batch, then r3's node is
    killed and the consumers move on to r1. Every entry is handled at least once, poison ones
    end in the dead-letter stream, and the duplicates are counted."""
    rng = random.Random(9)
    per_producer = 150
    with LocalTopology(regions=3, manual_sync=False) as topo:
        r1, r2, r3 = (_url(topo, i) for i in (1, 2, 3))
        topo.client(3).xgroup_create("rides", "g", "0", mkstream=True)
        lock = threading.Lock()
        handled: Counter[str] = Counter()
        poison: set[str] = set()
        sent: dict[str, list[str]] = {}
        in_batch = threading.Event()

        def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
            if fields.get(b"poison"):
                raise ValueError("poison entry")
            with lock:
                if rng.random() < 0.10:
                    raise RuntimeError("transient handler failure")
                handled[entry_id] += 1
            in_batch.set()
            time.sleep(0.002)

        def produce(name: str, endpoints: list[str]) -> None:
            out: list[str] = []
            with Producer(endpoints, "rides", idempotency=True) as producer:
                for start in range(0, per_producer, 15):
                    batch = [
                        {"p": name, "n": i, **({"poison": 1} if i % 100 == 7 else {})}
                        for i in range(start, min(start + 15, per_producer))
                    ]
                    out += producer.send_many(batch)
                    time.sleep(0.05)
            sent[name] = out

        producers = [
            threading.Thread(target=produce, args=("a", [r1, r2, r3])),
            threading.Thread(target=produce, args=("b", [r2, r1, r3])),
        ]
        metrics = [CountingMetrics() for _ in range(3)]
        consumers = [
            GroupConsumer(
                [r3, r1, r2],
                "rides",
                "g",
                f"c{k}",
                handler,
                count=10,
                block_ms=200,
                claim_idle_ms=1000,
                max_deliveries=8,
                retry_ms=50,
                dead_letter="rides:dead",
                metrics=metrics[k],
            )
            for k in range(3)
        ]
        runners = [threading.Thread(target=c.run) for c in consumers]
        try:
            for t in producers + runners:
                t.start()
            assert in_batch.wait(30)
            consumers[2].stop()  # mid-batch: the rest of its batch is handed back
            runners[2].join(30)
            assert not runners[2].is_alive()
            deadline = time.monotonic() + 60
            while sum(handled.values()) < per_producer and time.monotonic() < deadline:
                time.sleep(0.05)
            topo.kill_node(3)
            for t in producers:
                t.join(60)
            all_ids = sent["a"] + sent["b"]
            assert len(all_ids) == 2 * per_producer
            fields = {i: f for i, f in topo.client(1).xrange("rides")}
            poison = {i for i in all_ids if fields[i.encode()].get(b"poison")}
            good = set(all_ids) - poison
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                dead = {f[b"_dl_id"].decode() for _, f in topo.client(1).xrange("rides:dead")}
                with lock:
                    if good <= set(handled) and poison <= dead:
                        break
                time.sleep(0.2)
        finally:
            for c in consumers:
                c.stop()
            for t in runners:
                t.join(30)
            for c in consumers:
                c.close()
        assert good - set(handled) == set(), "entries never handled"
        assert poison and poison <= dead, "poison entries missing from the dead-letter stream"
        assert not poison & set(handled)
        duplicates = sum(n - 1 for n in handled.values())
        counts = [m.snapshot() for m in metrics]
        assert sum(c.failovers for c in counts[:2]) >= 2  # both running consumers moved on
        print(
            f"\n{len(good)} entries handled, {duplicates} duplicate handlings, "
            f"{len(poison)} poison entries dead-lettered; per consumer: {counts}"
        )


@pytest.mark.parametrize("shape", [[], ["--shards", "4", "--nodes", "2"]], ids=["1x1", "4x2"])
def test_demo_example_hands_every_entry_of_two_producer_regions_to_a_group_in_the_third(
    shape: list[str],
) -> None:
    """Also on regions of two node processes over four shards, given one node per region."""
    script = Path(__file__).resolve().parents[2] / "examples/sdk/demo.py"
    run = subprocess.run(
        [sys.executable, str(script), "--entries", "300", *shape],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "300 entries from producers in r1 and r2" in run.stdout
    assert "0 missing" in run.stdout
