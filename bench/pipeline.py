"""Spark fold rate: ops folded per second by `streams spark snapshot` on local[1] and local[2].

    python -m bench.pipeline [--sizes 1000000,5000000] [--out docs/benchmarks.md]

One embedded broker is filled with synthetic op logs: three regions' `.oplog` topics, XADDs over
1,000 keys, interleaved as three regions in sync would write them (each op's causal context holds
the other origins' latest seqs), produced directly in large batches (writing millions of ops
through a node would measure the node, not the fold). Then, for each master, a fresh worker
process builds its SparkSession, runs one warm-up snapshot of WARMUP_OPS ops held by a second
broker (the JVM's JIT and the Python workers' imports happen there: on a first job they cost
more CPU than folding 300,000 ops), and times `streams.pipeline.snapshot.snapshot` over the
whole topic set: read through the
`streams_oplog` source, grouped by key, folded with the node's `streams.crdt` code, written in
the snapshot format. The single-process replay rate (`streams.crdt.fold.Fold` over the same
records, decoded in this process) is measured beside it. Each timed run also reports its phases
(`snapshot(phases=...)`) and the CPU seconds its process tree used (driver, JVM, Python workers,
from /proc), whose ratio to the wall time says how many cores the run kept busy.
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
from streams.kafka.reading import consumer_config
from streams.kafka.sizes import MAX_RECORD_BYTES
from streams.ops.codec import decode, encode
from topology.broker import EmbeddedBroker

ORIGINS = (1, 2, 3)
KEYS = 1000
SECTION = "pipeline"
WARMUP_OPS = 60_000
DRIVER_MEMORY = "4g"
PHASES = ("plan", "read", "cut", "fold", "write")


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
    from streams.crdt.fold import Fold

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


def tree_processes(root: int) -> dict[int, tuple[str, float]]:
    """`root` and its descendants, from /proc: pid -> (command name, utime + stime, and that of
    reaped children, in seconds)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    procs: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fp:
                data = fp.read()
        except OSError:
            continue
        name, fields = data[data.find("(") + 1 : data.rfind(")")], data.rsplit(")", 1)[1].split()
        parent[int(entry)] = int(fields[1])
        procs[int(entry)] = (name, sum(int(f) for f in fields[11:15]) / tick)
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, pp in parent.items():
            if pp == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    return {pid: procs[pid] for pid in tree if pid in procs}


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of `root` and its descendants so far (`tree_processes`)."""
    return sum(cpu for _name, cpu in tree_processes(root).values())


def worker(bootstrap: str, warmup: str, master: str, out: str) -> None:
    """Runs in a fresh process per master: warm up, then time one snapshot; prints JSON."""
    from streams.pipeline.session import spark_session
    from streams.pipeline.snapshot import snapshot

    cores = int(master[len("local[") : -1]) if master.startswith("local[") else 2
    # the local JVM's heap (Spark's default is 1 GB): the cached op logs of 5M ops fit in it
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-memory {DRIVER_MEMORY} pyspark-shell")
    spark = spark_session(master, shuffle_partitions=cores * 4)
    snapshot(spark, warmup, "r1", out, id_mode="liberal", region_id=1)
    phases: dict[str, float] = {}
    cpu_before = tree_cpu_seconds(os.getpid())
    started = time.monotonic()
    digest = snapshot(
        spark, bootstrap, "r1", out, id_mode="liberal", region_id=1, phases=phases
    ).digest
    seconds = time.monotonic() - started
    cpu = tree_cpu_seconds(os.getpid()) - cpu_before
    print(
        json.dumps({"seconds": seconds, "digest": digest, "phases": phases, "cpu_s": cpu}),
        flush=True,
    )
    spark.stop()


def run_worker(bootstrap: str, warmup: str, master: str, out: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.pipeline", "--worker", bootstrap, warmup, master, out],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {master} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def quiet_machine(max_load: float | None, wait_s: float) -> float:
    """Wait (polling every 30 s, at most `wait_s`) until the 1-minute load average is below
    `max_load` (the machine is shared); returns the load average seen last."""
    load = os.getloadavg()[0]
    deadline = time.monotonic() + wait_s
    while max_load is not None and load >= max_load and time.monotonic() < deadline:
        print(f"  load average {load:.2f} >= {max_load}: waiting", flush=True)
        time.sleep(30)
        load = os.getloadavg()[0]
    return load


def measure(n: int, max_load: float | None = None, wait_s: float = 1200.0) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        broker = EmbeddedBroker(f"bench-pipeline-{n}")
        warm = EmbeddedBroker(f"bench-pipeline-warmup-{n}")
        broker.start()
        warm.start()
        try:
            fill(warm.bootstrap, WARMUP_OPS)
            wrote = fill(broker.bootstrap, n)
            replay_load = quiet_machine(max_load, wait_s)
            replay = replay_rate(broker.bootstrap, n)
            print(f"  single-process replay fold: {replay:,.0f} ops/s", flush=True)
            results: dict[str, object] = {
                "ops": n,
                "fill_s": wrote,
                "replay_ops_s": replay,
                "replay load": replay_load,
            }
            digests = set()
            for master in ("local[1]", "local[2]"):
                results[f"{master} load"] = quiet_machine(max_load, wait_s)
                got = run_worker(
                    broker.bootstrap, warm.bootstrap, master, str(Path(tmp) / f"{master}.snap")
                )
                seconds = float(got["seconds"])  # type: ignore[arg-type]
                cpu = float(got["cpu_s"])  # type: ignore[arg-type]
                results[master] = n / seconds
                results[f"{master} cpu"] = cpu / seconds
                results[f"{master} phases"] = got["phases"]
                digests.add(got["digest"])
                phases = ", ".join(
                    f"{k} {v:.1f}"
                    for k, v in got["phases"].items()  # type: ignore[attr-defined]
                )
                print(
                    f"  {master} (load {results[f'{master} load']:.2f}): {seconds:.1f} s, "
                    f"{n / seconds:,.0f} ops/s, "
                    f"{cpu / seconds:.2f} cores busy; phases (s): {phases}",
                    flush=True,
                )
            if len(digests) != 1:
                raise RuntimeError(f"local[1] and local[2] disagree: {digests}")
            return results
        finally:
            broker.stop()
            warm.stop()


def render(rows: list[dict[str, object]]) -> str:
    lines = [
        "| ops | local[1] ops/s | local[2] ops/s | speed-up | single-process replay ops/s "
        "| cores busy local[1] / local[2] | load avg (1 min) before replay / local[1] / local[2] |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        one, two = float(r["local[1]"]), float(r["local[2]"])  # type: ignore[arg-type]
        replay = float(r["replay_ops_s"])  # type: ignore[arg-type]
        busy = f"{r['local[1] cpu']:.2f} / {r['local[2] cpu']:.2f}"
        load = f"{r['replay load']:.2f} / {r['local[1] load']:.2f} / {r['local[2] load']:.2f}"
        lines.append(
            f"| {int(r['ops']):,} | {one:,.0f} | {two:,.0f} | {two / one:.2f}x | {replay:,.0f} "  # type: ignore[call-overload]
            f"| {busy} | {load} |"
        )
    lines += [
        "",
        "Phases (wall seconds):",
        "",
        "| ops | master | plan | read | cut | fold | write |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        for master in ("local[1]", "local[2]"):
            ph: dict[str, float] = r[f"{master} phases"]  # type: ignore[assignment]
            cells = " | ".join(f"{ph.get(k, 0.0):.1f}" for k in PHASES)
            lines.append(f"| {int(r['ops']):,} | {master} | {cells} |")  # type: ignore[call-overload]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--worker"]:
        worker(*args_in[1:5])
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.pipeline", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sizes", default="1000000,5000000", help="op counts, comma-separated")
    parser.add_argument("--out", default=None, help="write the table into this markdown file")
    parser.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="before each timed run, wait until the 1-minute load average is "
        "below this (shared machines)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=1200.0,
        help="seconds to wait at most for --max-load (default 1200)",
    )
    args = parser.parse_args(args_in)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        print(f"{n:,} ops:", flush=True)
        rows.append(measure(n, args.max_load, args.wait))
        table = render(rows)
        print(table, flush=True)
        if args.out:  # after each size: a long run that fails later keeps what it measured
            write_section(Path(args.out), table + "\n", SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
