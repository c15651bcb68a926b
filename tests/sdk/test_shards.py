"""The SDK against sharded regions: two regions of two node processes each over four shards, so
a region's nodes speak the Redis Cluster protocol and the node the SDK is given answers MOVED for
the streams its peer serves. The SDK gets only each region's first node and must find the rest.

Real parts only: embedded brokers, mirrors, node subprocesses (one SIGKILLed in the last test).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from streams.sdk import (
    CheckpointConsumer,
    CheckpointTx,
    CountingMetrics,
    DeadLetter,
    GroupConsumer,
    Producer,
    SQLiteStore,
    groupcli,
)
from streams.slots import shard_of
from topology.local import LocalTopology

SHARDS, NODES = 4, 2
_names = iter(range(1_000_000))


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    """Replication stays off (manual sync): these tests look at one region at a time."""
    with LocalTopology(regions=2, shards=SHARDS, nodes=NODES) as topology:
        yield topology


def seeds(topo: LocalTopology) -> list[str]:
    """What a user passes: each region's first node, nothing else."""
    return [f"redis://127.0.0.1:{topo.ports[i]}" for i in (1, 2)]


def owner(topo: LocalTopology, key: str) -> int:
    """The node (index in its region) serving `key`; the regions share one layout."""
    assert topo.topology is not None
    return topo.topology.region("r1").owner(shard_of(key.encode(), SHARDS)).index


def name_on(topo: LocalTopology, node: int, prefix: str) -> str:
    """A fresh stream name that the region's node `node` serves."""
    while True:
        name = f"{prefix}-{next(_names)}"
        if owner(topo, name) == node:
            return name


def node(topo: LocalTopology, region: int, index: int) -> redis.Redis:
    return redis.Redis(port=topo.node_ports[region][index], socket_timeout=10)


def test_the_first_node_redirects_streams_of_the_second(topo: LocalTopology) -> None:
    stream = name_on(topo, 1, "moved")
    with pytest.raises(redis.exceptions.MovedError):
        node(topo, 1, 0).xadd(stream, {"f": "v"})
    assert node(topo, 1, 0).execute_command("INFO", "cluster")["cluster_enabled"] == 1


def test_producer_and_group_consumer_given_first_nodes_use_the_second(
    topo: LocalTopology, drain: Callable[..., None]
) -> None:
    stream = name_on(topo, 1, "orders")
    with Producer(seeds(topo), stream, idempotency=True) as producer:
        first = producer.send({"n": 0})
        ids = [first, *producer.send_many([{"n": i} for i in range(1, 120)])]
        assert producer.retries == 0
    # Written on the stream's node, through the first node's redirect.
    assert [r[0].decode() for r in node(topo, 1, 1).xrange(stream)] == ids
    handled: list[str] = []
    metrics = CountingMetrics()
    with GroupConsumer(
        seeds(topo),
        stream,
        "g",
        "c1",
        lambda i, f: handled.append(i),
        count=25,
        block_ms=100,
        metrics=metrics,
        metrics_interval_s=0.0,
    ) as consumer:
        drain(consumer)
        assert consumer.endpoint == seeds(topo)[0]  # no failover: the region served it all
    assert handled == ids
    counts = metrics.snapshot()
    assert counts.processed == 120 and counts.failovers == 0 and counts.lag == 0
    assert node(topo, 1, 1).xpending(stream, "g")["pending"] == 0


@pytest.mark.parametrize("same_slot", [True, False], ids=["hash-tagged", "other-node"])
def test_dead_letters_reach_their_stream_wherever_it_lives(
    topo: LocalTopology, same_slot: bool, drain: Callable[..., None]
) -> None:
    """`{stream}:dead` shares the stream's slot (one MULTI/EXEC with the XACK); a dead-letter
    stream on the other node takes XADD then XACK, each on its own node."""
    stream = name_on(topo, 1, "dl")
    dead = f"{{{stream}}}:dead" if same_slot else name_on(topo, 0, "dead")
    assert (owner(topo, dead) == 1) is same_slot
    with Producer(seeds(topo), stream) as producer:
        ids = producer.send_many([{"n": i} for i in range(6)])

    def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
        if fields[b"n"] in (b"2", b"4"):
            raise DeadLetter("not for us")

    with GroupConsumer(
        seeds(topo), stream, "g", "c", handler, block_ms=100, dead_letter=dead
    ) as consumer:
        drain(consumer)
    letters = node(topo, 1, owner(topo, dead)).xrange(dead)
    assert [f[b"_dl_id"].decode() for _, f in letters] == [ids[2], ids[4]]
    assert {f[b"_dl_region"] for _, f in letters} == {b"r1"}
    assert node(topo, 1, 1).xpending(stream, "g")["pending"] == 0


def test_checkpoint_consumer_and_group_verb_follow_the_redirect(
    topo: LocalTopology, tmp_path: Path
) -> None:
    stream = name_on(topo, 1, "ckpt")
    with Producer(seeds(topo)[0], stream) as producer:
        ids = producer.send_many([{"v": i} for i in range(10)])
    seen: list[str] = []

    def handler(entry_id: str, fields: dict[bytes, bytes], tx: CheckpointTx) -> None:
        seen.append(entry_id)

    store = SQLiteStore(tmp_path / "c.sqlite3")
    with CheckpointConsumer(seeds(topo)[0], stream, "c", handler, store, batch_size=4) as consumer:
        while consumer.run_once():
            pass
    assert seen == ids and store.checkpoint("c") == ids[-1]
    store.close()

    node(topo, 1, 1).xgroup_create(stream, "g", "0")
    node(topo, 1, 1).xreadgroup("g", "alice", {stream: ">"}, count=3)
    parser = argparse.ArgumentParser()
    groupcli.add_parser(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = groupcli.run(
            parser.parse_args(
                [
                    "group",
                    "--endpoint",
                    seeds(topo)[0],
                    stream,
                    "g",
                    "--dead-letter",
                    name_on(topo, 0, "d"),
                ]
            )
        )
    assert code == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert "region r1" in lines[0]
    assert any(line.split() == ["lag:", "7"] for line in lines), out.getvalue()
    assert any(line.split()[:2] == ["alice", "3"] for line in lines), out.getvalue()


def test_killing_the_streams_node_moves_producer_and_consumer_to_the_other_region() -> None:
    """A producer and a consumer given the first node of r1 then r2 work on a stream that the
    second node serves; that node of r1 is SIGKILLed midway. The producer's next write fails
    there and goes to r2 (through r2's redirect), the consumer moves to r2, and every entry a
    write returned is handled at least once."""
    total, batch = 300, 15
    with LocalTopology(regions=2, shards=SHARDS, nodes=NODES, manual_sync=False) as topo:
        stream = name_on(topo, 1, "rides")
        lock = threading.Lock()
        handled: Counter[str] = Counter()
        sent: list[str] = []
        killed = threading.Event()
        half = threading.Event()

        def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
            with lock:
                handled[entry_id] += 1
                if len(handled) >= total // 3:
                    half.set()

        def produce() -> None:
            with Producer(seeds(topo), stream, idempotency=True, down_s=5) as producer:
                for start in range(0, total, batch):
                    if start == total // 2:
                        killed.wait(120)  # the second half is written after the kill
                    ids = producer.send_many([{"n": n} for n in range(start, start + batch)])
                    with lock:
                        sent.extend(ids)
                produced["retries"] = producer.retries

        produced: dict[str, int] = {}
        metrics = CountingMetrics()
        consumer = GroupConsumer(
            seeds(topo),
            stream,
            "g",
            "c",
            handler,
            count=20,
            block_ms=200,
            claim_idle_ms=2000,
            metrics=metrics,
        )
        runner = threading.Thread(target=consumer.run)
        writer = threading.Thread(target=produce)
        runner.start()
        writer.start()
        try:
            assert half.wait(120), "the consumer handled nothing before the kill"
            topo.kill_node(1, node=1)
            killed.set()
            writer.join(180)
            assert not writer.is_alive()
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                with lock:
                    if set(sent) <= set(handled):
                        break
                time.sleep(0.2)
        finally:
            killed.set()
            consumer.stop()
            runner.join(60)
            consumer.close()
        assert len(sent) == total
        assert set(sent) <= set(handled), f"{len(set(sent) - set(handled))} entries never handled"
        assert produced["retries"] >= 1  # a write did fail on the dead node
        counts = metrics.snapshot()
        assert counts.failovers >= 1 and consumer.endpoint == seeds(topo)[1]
        # r2 holds every entry on its own second node: the node the redirect named. Entries
        # written to r1 before the kill may still be on their way (the mirror copies r1's log
        # after the node's death; the consumer, handling them in r1, did not wait for that).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            held = {r[0].decode() for r in node(topo, 2, 1).xrange(stream)}
            if set(sent) <= held:
                break
            time.sleep(0.2)
        assert set(sent) <= held, f"{len(set(sent) - held)} entries never reached r2"
