"""Records that decode but were not written by a region's writer (a producer with broker access
wrote them straight into an op log). Before the record gate (streams/kafka/gate.py), a record
carrying r1's next dot made every other region drop r1's real, acknowledged write as a
duplicate, silently, and r1 lost it too after a restart; an op from a region id no topology
has was applied everywhere.

Now the reader stops on the second record under a dot, naming both places, and refuses origins
that are no region; the operator skips the forged record and the real write is present.
"""

from __future__ import annotations

import re
import secrets
import time

import redis
from confluent_kafka import Message, Producer

from faults.workload import crdt_info
from streams.config import RegionConfig, Topology
from streams.crdt import ops
from streams.ops.codec import seal
from topology.broker import EmbeddedBroker
from topology.local import LocalTopology
from topology.ports import free_port


def produce_op(bootstrap: str, topic: str, op: ops.Op) -> int:
    """Write `op` as a well-formed record, as a foreign producer could; its offset."""
    sealed = seal(op)
    offsets: list[int] = []

    def delivered(err: object, msg: Message) -> None:  # type: ignore[type-arg]
        assert err is None, err
        offsets.append(msg.offset() or 0)

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(
        topic, key=sealed.key, value=sealed.value, headers=sealed.headers, on_delivery=delivered
    )
    assert producer.flush(10) == 0
    return offsets[0]


def applied_seq(client: redis.Redis, region: int) -> int:
    vector = client.execute_command("CRDT.VECTOR")
    pairs = dict(zip(vector[::2], vector[1::2], strict=True))
    return int(pairs.get(b"r%d" % region, pairs.get(region, 0)))


def materializer_error(client: redis.Redis, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        error = crdt_info(client)["materializer_error"]
        if error or time.monotonic() > deadline:
            return error
        time.sleep(0.05)


def test_a_forged_next_dot_is_reported_as_a_conflict_and_the_real_write_survives() -> None:
    with LocalTopology(regions=2, manual_sync=True) as topo:
        c1, c2 = topo.client(1), topo.client(2)
        for n in range(5):
            c1.xadd(b"victim", {b"n": b"%d" % n})
        topo.sync()
        nxt = applied_seq(c1, 1) + 1
        forged = ops.Op(1, nxt, (), 1, ops.XAdd(b"victim", (1, 1), (b"forged", b"1")))
        forged_at = produce_op(topo.bootstrap[1], "r1.oplog", forged)
        real_id = c1.xadd(b"victim", {b"real": b"1"})  # acknowledged: r1 wrote it at dot `nxt`
        assert topo.mirrors is not None
        topo.mirrors.copy_among()
        error = materializer_error(c2)
        assert f"dot 1:{nxt}" in error, error
        # Offsets differ between clusters (transaction markers); the first place named is the
        # forged record's copy on r2's cluster, which was read first.
        first = re.search(
            r"the different record at topic r1\.oplog partition 0 offset (\d+)", error
        )
        assert first is not None, error
        # The operator names the forged record; r2 then holds the real write, not the forged.
        topo.kill_node(2)
        topo.start_node(2, ["--skip-record", f"r1.oplog:0:{first.group(1)}"])
        topo.sync()
        assert crdt_info(topo.client(2))["materializer_error"] == ""
        entries = topo.client(2).xrange(b"victim")
        assert entries[-1] == (real_id, {b"real": b"1"})
        assert all(b"forged" not in fields for _id, fields in entries)
        # r1 does not read its own log while it runs; restarted, it meets the same conflict.
        topo.kill_node(1)
        topo.start_node(1, ["--skip-record", f"r1.oplog:0:{forged_at}"])
        assert topo.client(1).xrange(b"victim")[-1] == (real_id, {b"real": b"1"})
        assert crdt_info(topo.client(1))["records_skipped"] == "1"


def test_an_op_from_a_region_no_topology_has_is_refused() -> None:
    with LocalTopology(regions=2, manual_sync=True) as topo:
        c1, c2 = topo.client(1), topo.client(2)
        top = ops.Op(9, 1, (), 1, ops.XAdd(b"victim", (2**64 - 1, 2**64 - 1), (b"f", b"v")))
        produce_op(topo.bootstrap[1], "r1.oplog", top)
        c1.xadd(b"other", {b"f": b"v"})  # real records after it (Tansu shows a lone one late)
        assert topo.mirrors is not None
        topo.mirrors.copy_among()
        error = materializer_error(c2)
        assert "r1.oplog partition 0 offset 0:" in error and "region id 9" in error, error
        assert b"r9" not in c2.execute_command("CRDT.VECTOR")
        assert c2.exists(b"victim") == 0


def test_with_signing_keys_an_unsigned_record_is_skipped_and_the_real_write_applied() -> None:
    """Regions with a `signing_key`: their writers sign every record, and a record without the
    signature (a producer with broker access but no key) is skipped and counted, never
    applied, while the real write under the same dot is."""
    brokers = [EmbeddedBroker(f"signed-r{i}") for i in (1, 2)]
    try:
        for broker in brokers:
            broker.start()
        topology = Topology(
            regions=tuple(
                RegionConfig(
                    f"r{i}",
                    i,
                    broker.bootstrap,
                    free_port(),
                    alias=f"c{i}",
                    signing_key=secrets.token_hex(32),
                )
                for i, broker in enumerate(brokers, start=1)
            )
        )
        with LocalTopology(external=topology, manual_sync=True) as topo:
            c1, c2 = topo.client(1), topo.client(2)
            c1.xadd(b"victim", {b"n": b"0"})
            topo.sync()
            nxt = applied_seq(c1, 1) + 1
            forged = ops.Op(1, nxt, (), 1, ops.XAdd(b"victim", (1, 1), (b"forged", b"1")))
            produce_op(topo.bootstrap[1], "r1.oplog", forged)
            real_id = c1.xadd(b"victim", {b"real": b"1"})
            topo.sync()
            assert c2.xrange(b"victim")[-1] == (real_id, {b"real": b"1"})
            info = crdt_info(c2)
            assert info["materializer_error"] == "" and info["records_skipped"] == "1"
            assert "is not signed" in topo.node_log(2)
            # A restarted r1 reads its own log past the forged record too.
            topo.kill_node(1)
            topo.start_node(1)
            assert topo.client(1).xrange(b"victim")[-1] == (real_id, {b"real": b"1"})
    finally:
        for broker in brokers:
            broker.stop()
