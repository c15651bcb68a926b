"""Spark fold rate: ops folded per second by `streams spark snapshot` on local[1] and local[2].

    python -m bench.pipeline [--sizes 1000000,5000000] [--out docs/benchmarks.md]

One embedded broker is filled with synthetic op logs: three regions' `.oplog` topics, XADDs over
1,000 keys, interleaved as three regions in sync would write them (each op's causal context holds
the other origins' latest seqs), produced directly in large batches (writing millions of ops
through a node would measure the node, not the fold). Then, for each master, a fresh worker
process builds its SparkSession, runs one small warm-up snapshot (JVM and Python workers start),
and times `streams.pipeline.snapshot.snapshot` over the whole topic set: read through the
`streams_oplog` source, grouped by key, folded with the node's `streams.crdt` code, written in
the snapshot format. The single-process replay rate (`streams.replay.fold.Fold` over the same
records, decoded in this process) is measured beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.throughput import write_section
from streams.crdt import ops
from streams.ids import IdMode
from streams.ops.codec import decode, encode
from topology.broker import EmbeddedBroker
from topology.kafka import MAX_RECORD_BYTES, consumer_config

ORIGINS = (1, 2, 3)
KEYS = 1000
SECTION = "pipeline"


def synthetic_ops(n: int) -> list[tuple[str, bytes]]:
    """(topic, record) for n XADD ops from three origins, interleaved round-robin."""
    out: list[tuple[str, bytes]] = []
    seqs = dict.fromkeys(ORIGINS, 0)
    for i in range(n):
        origin = ORIGINS[i % len(ORIGINS)]
        seqs[origin] += 1
        ctx = tuple((o, s) for o, s in sorted(seqs.items()) if o != origin and s > 0)
        key = b"key:%d" % (i % KEYS)
        body = ops.XAdd(key, (1_000_000 + i, origin), (b"field", b"value-%d" % i))
        record = encode(ops.Op(origin, seqs[origin], ctx, 1_000_000 + i, body))
        out.append((f"r{origin}.oplog", record))
    return out


def fill(bootstrap: str, n: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(f"r{o}.oplog", 1, 1) for o in ORIGINS]
    for future in admin.create_topics(topics).values():
        future.result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "message.max.bytes": MAX_RECORD_BYTES,
            "compression.type": "none",
        }
    )
    started = time.monotonic()
    step = 200_000
    for start in range(0, n, step):
        for topic, record in synthetic_ops_slice(start, min(n, start + step)):
            while True:
                try:
                    producer.produce(topic, record)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(300)
        print(f"  filled {min(n, start + step):,} of {n:,} ops", flush=True)
    return time.monotonic() - started


_ALL: list[tuple[str, bytes]] = []


def synthetic_ops_slice(start: int, end: int) -> list[tuple[str, bytes]]:
    """The slice [start, end) of the synthetic sequence (generated once, then sliced)."""
    global _ALL
    if len(_ALL) < end:
        _ALL = synthetic_ops(end)
    return _ALL[start:end]


def replay_rate(bootstrap: str, n: int) -> float:
    """Single-process fold: read every record, decode, Fold; ops per second."""
    from streams.replay.fold import Fold

    consumer = Consumer(consumer_config(bootstrap, "bench-replay", 100))
    consumer.assign([TopicPartition(f"r{o}.oplog", 0, 0) for o in ORIGINS])
    fold = Fold.fresh(1, IdMode.LIBERAL)
    started = time.monotonic()
    seen = 0
    eofs: set[str] = set()
    while len(eofs) < len(ORIGINS):
        for msg in consumer.consume(10_000, 1.0):
            err = msg.error()
            if err is not None:
                eofs.add(msg.topic() or "")
                continue
            fold.feed((msg.topic() or "", 0), msg.offset() or 0, decode(msg.value()))
            seen += 1
    fold.finish()
    elapsed = time.monotonic() - started
    consumer.close()
    assert seen == n, (seen, n)
    return n / elapsed


def worker(bootstrap: str, master: str, out: str) -> None:
    """Runs in a fresh process per master: warm up, then time one snapshot; prints JSON."""
    from streams.pipeline.session import spark_session
    from streams.pipeline.snapshot import snapshot

    cores = int(master[len("local[") : -1]) if master.startswith("local[") else 2
    spark = spark_session(master, shuffle_partitions=cores * 4)
    # Warm-up: the JVM's first job and the Python workers start outside the timed run.
    spark.range(10_000).repartition(cores).rdd.map(lambda row: row[0] * 2).sum()
    started = time.monotonic()
    digest = snapshot(spark, bootstrap, "r1", out, id_mode="liberal", region_id=1)
    print(json.dumps({"seconds": time.monotonic() - started, "digest": digest}), flush=True)
    spark.stop()


def run_worker(bootstrap: str, master: str, out: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.pipeline", "--worker", bootstrap, master, out],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {master} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def measure(n: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedBroker(f"bench-pipeline-{n}")
        broker.start()
        try:
            wrote = fill(broker.bootstrap, n)
            replay = replay_rate(broker.bootstrap, n)
            print(f"  single-process replay fold: {replay:,.0f} ops/s", flush=True)
            results: dict[str, object] = {"ops": n, "fill_s": wrote, "replay_ops_s": replay}
            digests = set()
            for master in ("local[1]", "local[2]"):
                got = run_worker(broker.bootstrap, master, str(Path(tmp) / f"{master}.snap"))
                seconds = float(got["seconds"])  # type: ignore[arg-type]
                results[master] = n / seconds
                digests.add(got["digest"])
                print(f"  {master}: {seconds:.1f} s, {n / seconds:,.0f} ops/s", flush=True)
            if len(digests) != 1:
                raise RuntimeError(f"local[1] and local[2] disagree: {digests}")
            return results
        finally:
            broker.stop()


def render(rows: list[dict[str, object]]) -> str:
    lines = [
        "| ops | local[1] ops/s | local[2] ops/s | speed-up | single-process replay ops/s |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        one, two = float(r["local[1]"]), float(r["local[2]"])  # type: ignore[arg-type]
        replay = float(r["replay_ops_s"])  # type: ignore[arg-type]
        lines.append(
            f"| {int(r['ops']):,} | {one:,.0f} | {two:,.0f} | {two / one:.2f}x | {replay:,.0f} |"  # type: ignore[call-overload]
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--worker"]:
        worker(*args_in[1:4])
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.pipeline", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sizes", default="1000000,5000000", help="op counts, comma-separated")
    parser.add_argument("--out", default=None, help="write the table into this markdown file")
    args = parser.parse_args(args_in)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        print(f"{n:,} ops:", flush=True)
        rows.append(measure(n))
    table = render(rows)
    print(table)
    if args.out:
        write_section(Path(args.out), table + "\n", SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
