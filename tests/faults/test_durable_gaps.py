"""What a broker SIGKILLed with work in flight, or an object store outage, leaves in a durable
log (issues 21 and 22), made exactly, and what the node and the mirror make of it.

A watermark past the last record:

Tansu's S3 storage writes a produce in steps (the partition's watermark object, then the batch
object); a broker or object store that fails in between leaves the watermark one past the last
batch. librdkafka reports a partition's EOF only at the watermark and a fetch at the missing
offset answers nothing, so a reader waiting for the end waits until a later batch is written
behind the gap. Seen: a node that never finished re-reading its log after an object store
outage (writes refused for good), a mirror that never copied into a cluster again, a restarted
node that never became ready.

The fault is made exactly as the store leaves it: the partition's `watermark.json` raised by one
through the store's filer (no batch behind it), then the broker restarted so that it reads it
(a running broker keeps the watermark it wrote). Each test fails on the code before
`streams.node.kafka.settle` and the mirror's stalled-tail rule: the node or the mirror waits for
ever.

A transaction left prepared: a broker killed while an EndTxn had marked the writer's transaction
PrepareCommit in `meta.json` but had not written its markers. The new writer's
`init_transactions` leaves it so (Tansu rolls back only a transaction in Begin), its records stay
behind the last stable offset, and the next commit on the partition completes it. Made here by a
producer with the region writer's transactional id that produces the killed node's next op and
never commits, its state then set to PrepareCommit in `meta.json` while the broker is down. On the
code before `streams.node.kafka.settle` the restarted node reused that op's seq: a forked log, the
other region stopped on the conflict.

A producer's sequence recorded without its record: a produce cut short after `meta.json` took
the sequence and before the batch was written. The producer's next batch under that sequence is
answered DUPLICATE_SEQUENCE_NUMBER, which librdkafka reports as delivered ("previous send
succeeded but was not acknowledged"), without an offset. Made here by raising the sequence in
`meta.json` while the broker is down. On the code before: the node acknowledged a write that no
log holds (the other region never got it), and a mirror's copy went missing (the target region
waited for that op for ever).
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis
from confluent_kafka import Producer

from faults.workload import check_dots, converge, first_write, log_records, plain_client
from streams.crdt import ops
from streams.node.kafka.writer import transactional_id
from streams.ops.codec import decode, seal
from topology.local import LocalTopology
from topology.objectstore import bucket_name


def tansu_object(topo: LocalTopology, region: int, path: str) -> str:
    """The filer URL of one of Tansu's objects in `region`'s bucket (path below the cluster)."""
    name = topo.names[region]
    return (
        f"http://127.0.0.1:{topo.stores[region].ports['filer']}/buckets/{bucket_name(name)}"
        f"/clusters/streams-{name}/{path}"
    )


def read_json(url: str) -> Any:
    return json.loads(urllib.request.urlopen(url, timeout=10).read())


def write_json(url: str, value: Any) -> None:
    request = urllib.request.Request(url, data=json.dumps(value).encode(), method="PUT")
    urllib.request.urlopen(request, timeout=10).read()


def raise_watermark(topo: LocalTopology, region: int, topic: str) -> int:
    """Raise `topic` partition 0's watermark on `region`'s store by one (no batch written behind
    it) and restart the region's broker so that it reads it; the new watermark."""
    url = tansu_object(topo, region, f"topics/{topic}/partitions/0000000000/watermark.json")
    watermark = read_json(url)
    watermark["high"] = (watermark["high"] or 0) + 1
    write_json(url, watermark)
    topo.brokers[region].stop()  # SIGKILL
    topo.brokers[region].start()
    return int(watermark["high"])


def write_both(topo: LocalTopology, tag: bytes, n: int = 5) -> None:
    for region in (1, 2):
        client = plain_client(topo.ports[region])
        for k in range(n):
            client.xadd(b"s", {b"p": b"%s-%d-%d" % (tag, region, k)})
        client.close()


def test_gaps_at_the_end_of_durable_logs_stop_neither_node_nor_mirror(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A short write timeout: the write that meets the killed broker fails within 2 s.
    with LocalTopology(
        regions=2,
        manual_sync=False,
        data_dir=tmp_path / "data",
        workdir=str(tmp_path / "logs"),
        node_args=["--write-timeout", "2"],
    ) as topo:
        nodes = {"r1": topo.client(1), "r2": topo.client(2)}
        write_both(topo, b"a")
        converge(nodes, timeout=30)

        # 1. A node restarted on an own log whose end cannot be read: its writer writes a
        # barrier behind the gap at start, and the node boots.
        topo.kill_node(1)
        high = raise_watermark(topo, 1, "r1.oplog")
        started = time.monotonic()
        topo.start_node(1)
        took = first_write(topo.ports[1], 30)
        assert took is not None, "r1 does not take writes after its restart"
        print(f"\nr1.oplog watermark raised to {high} past its last record, node restarted:")
        print(f"  writes taken {time.monotonic() - started:.1f}s after the start")
        node_log = tmp_path / "logs" / "node-r1.log"
        assert node_log.read_text().count("barrier written") == 1

        nodes = {"r1": topo.client(1), "r2": topo.client(2)}  # r1's node is a new process

        # 2. The broker restarts under a running node and the own log's end cannot be read:
        # the failed write's recovery writes the barrier, then the log is re-read.
        write_both(topo, b"b")
        client = plain_client(topo.ports[1], timeout=30)
        topo.brokers[1].stop()
        try:
            client.xadd(b"s", {b"p": b"lost"})
        except Exception as exc:  # the write meets the dead broker: refused or unknown
            print(f"  write while r1's broker is down: {str(exc)[:80]}")
        high = raise_watermark(topo, 1, "r1.oplog")
        started = time.monotonic()
        took = first_write(topo.ports[1], 40)
        assert took is not None, "r1 refuses writes for good after its log was re-read"
        print(f"r1.oplog watermark raised to {high} under the running node (broker restarted):")
        print(f"  writes taken again {time.monotonic() - started:.1f}s after the broker's start")
        assert node_log.read_text().count("barrier written") == 2

        # 3. A mirror resuming on a target whose watermark is past its last copy: it resumes
        # after that copy once the tail read stalls, and copies into r1 again.
        write_both(topo, b"c")
        converge(nodes, timeout=30)
        assert topo.mirrors is not None
        mirror = topo.mirrors.mirror("r2", "r1")
        mirror.stop()  # resumes from the target when started again, as a restarted mirror does
        high = raise_watermark(topo, 1, "r2.oplog")
        started = time.monotonic()
        mirror.start()
        write_both(topo, b"d")
        took = converge(nodes, timeout=40)
        assert "answers no record and no end after offset" in caplog.text
        print(f"r2.oplog on r1's cluster: watermark raised to {high} past its last copy:")
        print(f"  converged {time.monotonic() - started:.1f}s after the broker's restart")
        dots = check_dots(topo, copies=True)
        print(f"  op logs without a fork or a gap on both clusters: {dots}")
        for client_ in nodes.values():
            client_.close()
        client.close()
        assert took < 40


def test_a_transaction_a_crash_left_prepared_does_not_fork_the_restarted_regions_log(
    tmp_path: Path,
) -> None:
    with LocalTopology(
        regions=2, manual_sync=False, data_dir=tmp_path / "data", workdir=str(tmp_path / "logs")
    ) as topo:
        write_both(topo, b"a")
        converge({"r1": topo.client(1), "r2": topo.client(2)}, timeout=30)
        topo.kill_node(1)
        # The killed node's next op, in a transaction of its writer's id that never commits.
        _origin, _seq, value = log_records(topo.bootstrap[1], "r1.oplog")[-1]
        last = decode(value)
        assert isinstance(last, ops.Op) and isinstance(last.body, ops.XAdd)
        ms, seq = last.body.id
        body = dataclasses.replace(last.body, id=(ms + 1, seq), fields=(b"p", b"in-flight"))
        op = dataclasses.replace(last, seq=last.seq + 1, ts_ms=last.ts_ms + 1, body=body)
        sealed = seal(op)
        zombie = Producer(
            {"bootstrap.servers": topo.bootstrap[1], "transactional.id": transactional_id("r1")}
        )
        zombie.init_transactions(10)
        zombie.begin_transaction()
        zombie.produce(
            "r1.oplog", partition=0, key=sealed.key, value=sealed.value, headers=sealed.headers
        )
        assert zombie.flush(10) == 0
        # The broker dies during the EndTxn: the transaction is prepared, no marker written.
        topo.brokers[1].stop()  # SIGKILL
        zombie.purge()
        del zombie
        meta_url = tansu_object(topo, 1, "meta.json")
        meta = read_json(meta_url)
        epochs = meta["transactions"][transactional_id("r1")]["epochs"]
        epoch = max(epochs, key=int)
        assert epochs[epoch]["state"] == "Begin" and epochs[epoch]["produces"], epochs[epoch]
        epochs[epoch]["state"] = "PrepareCommit"
        write_json(meta_url, meta)
        topo.brokers[1].start()
        started = time.monotonic()
        topo.start_node(1)
        assert first_write(topo.ports[1], 30) is not None, "r1 takes no write after its restart"
        print(f"\nr1 restarted on a prepared transaction holding op {op.origin}:{op.seq}:")
        print(f"  writes taken {time.monotonic() - started:.1f}s after the start")
        write_both(topo, b"b")
        took = converge({"r1": topo.client(1), "r2": topo.client(2)}, timeout=30)
        dots = check_dots(topo, copies=True)
        print(f"  converged in {took:.2f}s; no op log forked: {dots}")
        in_flight = topo.client(2).xrange(b"s", f"{ms + 1}-{seq}", f"{ms + 1}-{seq}")
        assert in_flight == [(f"{ms + 1}-{seq}".encode(), {b"p": b"in-flight"})], in_flight


def raise_sequence(topo: LocalTopology, region: int, topic: str, producer: str | None) -> None:
    """With `region`'s broker down, raise by one the sequence `meta.json` keeps for a producer on
    `topic` partition 0 (the writer's when `producer` is None, else the newest producer that
    wrote `topic`), then start the broker again."""
    topo.brokers[region].stop()  # SIGKILL
    url = tansu_object(topo, region, "meta.json")
    meta = read_json(url)
    if producer is None:
        producer = str(meta["transactions"][transactional_id(topo.names[region])]["producer"])
    sequences = meta["producers"][producer]["sequences"]
    epoch = max(sequences, key=int)
    sequences[epoch][topic]["0"] += 1
    write_json(url, meta)
    topo.brokers[region].start()


def test_a_sequence_recorded_without_its_record_loses_no_write_and_no_copy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalTopology(
        regions=2, manual_sync=False, data_dir=tmp_path / "data", workdir=str(tmp_path / "logs")
    ) as topo:
        write_both(topo, b"a")
        nodes = {"r1": topo.client(1), "r2": topo.client(2)}
        converge(nodes, timeout=30)

        # The writer's next produce is taken for a duplicate: the write fails, nothing is lost.
        raise_sequence(topo, 1, "r1.oplog", None)
        client = plain_client(topo.ports[1], timeout=30)
        with pytest.raises(redis.ResponseError, match="without confirming its records"):
            client.xadd(b"s", {b"p": b"unconfirmed"})
        started = time.monotonic()
        assert first_write(topo.ports[1], 30) is not None, "r1 takes no write again"
        print(
            f"\nr1's write answered as a duplicate: refused, writes taken again "
            f"{time.monotonic() - started:.1f}s later"
        )

        # The mirror's next copy into r1 is taken for a duplicate: it copies again from there.
        meta = read_json(tansu_object(topo, 1, "meta.json"))
        mirror_producer = max(
            (
                p
                for p, d in meta["producers"].items()
                if any("r2.oplog" in s for s in d["sequences"].values())
            ),
            key=int,
        )
        raise_sequence(topo, 1, "r2.oplog", mirror_producer)
        write_both(topo, b"b")
        nodes = {"r1": topo.client(1), "r2": topo.client(2)}
        took = converge(nodes, timeout=30)
        assert "a copy was acknowledged without an offset" in caplog.text
        print(f"the mirror's copy answered as a duplicate: converged in {took:.2f}s")
        dots = check_dots(topo, copies=True)
        print(f"  op logs without a fork or a gap: {dots}")
        client.close()
