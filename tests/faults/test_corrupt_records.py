"""Corrupt and foreign records in op logs, injected under load: the node that reads one stops its
materializer naming topic, partition and offset (CRDT.INFO materializer_error), keeps serving
reads, refuses writes, and refuses to start over it after a restart; nothing after it is applied
and nothing is skipped silently. `streams replay --on-corrupt skip` (the operator's offline tool)
skips exactly those records and folds to what a healthy region holds.

An operator who decided that such a record carries no op restarts the node with
`--skip-record TOPIC:PARTITION:OFFSET`: exactly that record is skipped, logged and counted.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from confluent_kafka import Message, Producer

from faults.workload import (
    check_no_loss,
    crdt_info,
    plain_client,
    prepare,
    run_load,
    settle,
    summary,
)
from streams.replay.run import Request, replay
from topology.local import LocalTopology, TopologyError

RATE = 50.0


def inject(bootstrap: str, topic: str, value: bytes | None) -> int:
    """Produce one record that is not an op (a foreign producer) and return its offset."""
    offsets: list[int] = []

    def delivered(err: object, msg: Message) -> None:  # type: ignore[type-arg]
        assert err is None, err
        offsets.append(msg.offset() or 0)

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"foreign", value=value, on_delivery=delivered)
    assert producer.flush(10) == 0
    return offsets[0]


def stopped_at(client: redis.Redis, timeout: float = 15) -> tuple[str, float]:
    started = time.monotonic()
    while True:
        error = crdt_info(client)["materializer_error"]
        if error or time.monotonic() - started > timeout:
            return error, time.monotonic() - started
        time.sleep(0.02)


def test_corrupt_and_foreign_records_stop_the_reader_at_their_position_under_load(
    tmp_path: Path,
) -> None:
    with LocalTopology(regions=3, manual_sync=False) as topo:
        prepare(topo)
        injected: dict[int, list[tuple[str, int]]] = {}
        detected: dict[int, tuple[str, float]] = {}

        def corrupt() -> None:
            time.sleep(1.5)
            # r2's cluster: garbage in r1's mirrored log; r3's: JSON, then a tombstone (null).
            injected[2] = [("r1.oplog", inject(topo.bootstrap[2], "r1.oplog", b"\xc3\x01\x00junk"))]
            injected[3] = [
                ("r2.oplog", inject(topo.bootstrap[3], "r2.oplog", b'{"event": "signup"}')),
                ("r2.oplog", inject(topo.bootstrap[3], "r2.oplog", None)),
            ]
            for i in (2, 3):
                detected[i] = stopped_at(plain_client(topo.ports[i]))

        ledgers = run_load(topo, [1, 2, 3], seconds=5.0, rate=RATE, during=corrupt)
        print(f"\ncorrupt records: 3 regions x {RATE:g} req/s for 5 s, records injected at 1.5 s")
        print(summary(ledgers))
        for i in (2, 3):
            topic, offset = injected[i][0]
            error, took = detected[i]
            print(f"  r{i} stopped after {took:.2f}s: {error[:150]}")
            assert f"topic {topic} partition 0 offset {offset}" in error
            client = plain_client(topo.ports[i])
            client.xlen(b"own:1")  # reads go on
            with pytest.raises(redis.ResponseError, match="cannot decode"):
                client.xadd(b"after", {b"p": b"x"})
        # The healthy region has everything every client saw acknowledged.
        settle(topo, regions=[1])
        assert topo.mirrors is not None
        topo.mirrors.copy_among()
        counts = check_no_loss(topo, ledgers, regions=[1])
        print(f"  r1 (healthy) holds every acknowledged write: {counts}")
        healthy = topo.client(1).execute_command("CRDT.DIGEST").decode()
        # The offline tool skips exactly the injected records, logs them, and folds to r1's state.
        for i in (2, 3):
            audit = tmp_path / f"skipped-r{i}.jsonl"
            result = replay(
                Request(
                    bootstrap=topo.bootstrap[i], region=f"r{i}", on_corrupt="skip", audit=str(audit)
                )
            )
            skipped = [(s["topic"], s["offset"]) for s in result.skipped]
            assert skipped == injected[i], (skipped, injected[i])
            assert len(audit.read_text().splitlines()) == len(injected[i])
            assert result.region.state.digest() == healthy, f"replay of r{i} skipping {skipped}"
            print(f"  streams replay --on-corrupt skip on r{i}'s cluster skipped {skipped} only")
        # A restart does not read over it either: the node refuses to start and says where.
        topo.kill_node(2)
        with pytest.raises(TopologyError) as refused:
            topo.start_node(2)
        topic, offset = injected[2][0]
        assert f"topic {topic} partition 0 offset {offset}" in str(refused.value)
        print(f"  r2 restarted over it: refused to start, naming {topic} offset {offset}")


def test_an_operator_option_makes_the_node_skip_exactly_the_named_record() -> None:
    with LocalTopology(regions=2, manual_sync=True) as topo:
        c1 = topo.client(1)
        for n in range(20):
            c1.xadd(b"s", {b"n": b"%d" % n})
        topo.sync()
        offset = inject(topo.bootstrap[2], "r1.oplog", b"not an op")
        for n in range(20, 40):
            c1.xadd(b"s", {b"n": b"%d" % n})
        assert topo.mirrors is not None
        topo.mirrors.copy_among()
        error, _took = stopped_at(topo.client(2))
        assert f"offset {offset}" in error
        topo.kill_node(2)
        topo.start_node(2, ["--skip-record", f"r1.oplog:0:{offset}"])
        topo.sync()
        assert crdt_info(topo.client(2))["materializer_error"] == ""
        assert topo.client(2).xlen(b"s") == 40  # nothing but the named record was skipped
        assert crdt_info(topo.client(2))["records_skipped"] == "1"
        assert (
            f"skipping the record at topic r1.oplog partition 0 offset {offset}" in topo.node_log(2)
        )
