"""The backends of `streams up` side by side in one run: Apache Kafka with MirrorMaker 2 (the
durable default) and the light stack, Tansu in memory with the embedded mirror. (Tansu on a
SeaweedFS object store, the durable default before, was measured with this harness at 0b24644
and then removed: docs/benchmarks.md keeps that run.)

    python -m bench.backends [--rounds 2] [--requests 100000] [--out docs/benchmarks.md]

Per round and backend (the order rotates between rounds), a three-region topology as `streams up`
runs it (continuous replication): how long it takes to start; a lone XADD's latency (one Kafka
transaction each) and a bare one-record transaction on r1's broker; `redis-benchmark -c 50` XADD
at pipeline 1 and 16 on r1; the same P16 load on all three regions at once and how long until
every region applied all of it (replicated ops/s); the CPU and memory (RSS) of the whole idle
topology (brokers, object stores, mirrors, nodes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.latency import percentiles
from bench.pipeline import tree_cpu_seconds
from bench.throughput import run_benchmarks, write_section, xadd_benchmark_command
from topology.local import LocalTopology

NAME = "backends"
BACKENDS = {
    "kafka": ("Apache Kafka + MirrorMaker 2, durable", "kafka", "mm2", True),
    "tansu-memory": ("Tansu in memory + embedded mirror, ephemeral", "tansu", "embedded", False),
}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def xadd_latency(client: redis.Redis, n: int) -> dict[str, float]:
    samples = []
    for i in range(n):
        started = time.perf_counter()
        client.xadd(f"lat:{i % 8}", {"f": "v"})
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def kafka_commit(bootstrap: str, n: int) -> dict[str, float]:
    """One-record transactions on the broker itself (begin, produce, commit): the write path's
    floor, without the node. The topic is made first (Apache Kafka here creates none on use)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("bench.commit", 1, 1)]).values():
        try:
            future.result(30)
        except Exception as exc:  # noqa: BLE001 - a second round finds it there
            if "exists" not in str(exc).lower():
                raise
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "bench-commit",
            "retry.backoff.ms": 5,
            "log_level": 0,
        }
    )
    producer.init_transactions(30)
    samples = []
    for i in range(n):
        started = time.perf_counter()
        producer.begin_transaction()
        producer.produce("bench.commit", b"%d" % i)
        producer.commit_transaction(30)
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def tree_rss_mb(root: int) -> float:
    """RSS of `root` and its descendants (MB)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fp:
                fields = fp.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * page
    total, frontier = 0, [root]
    while frontier:
        pid = frontier.pop()
        total += rss.get(pid, 0)
        frontier += children.get(pid, [])
    return total / 1e6


def replicated(topo: LocalTopology, requests: int) -> float:
    """P16 XADD on every region at once; ops/s until every region applied everyone's."""
    started = time.monotonic()
    run_benchmarks([xadd_benchmark_command(topo.ports[i], requests, 16) for i in topo.ports])
    topo.sync(timeout=600)
    return 3 * requests / (time.monotonic() - started)


def one_round(backend: str, requests: int, samples: int, idle_window: float) -> dict[str, object]:
    _label, broker, mirror, durable = BACKENDS[backend]
    data = Path(tempfile.mkdtemp(prefix=f"bench-{backend}-")) if durable else None
    say(f"{backend}: starting three regions")
    started = time.monotonic()
    try:
        with LocalTopology(
            regions=3,
            manual_sync=False,
            id_mode="liberal",
            data_dir=data,
            broker=broker,
            mirror=mirror,
        ) as topo:
            row: dict[str, object] = {"backend": backend, "start_s": time.monotonic() - started}
            client: redis.Redis = topo.client(1)
            row["xadd"] = xadd_latency(client, samples)
            row["commit"] = kafka_commit(topo.bootstrap[1], samples)
            for p in (1, 16):
                row[f"p{p}"] = run_benchmarks([xadd_benchmark_command(topo.ports[1], requests, p)])
                say(f"{backend}: XADD c50 P{p} {row[f'p{p}']:,.0f}/s")
            row["replicated"] = replicated(topo, requests // 2)
            say(f"{backend}: replicated {row['replicated']:,.0f} ops/s")
            time.sleep(5.0)  # the fetch waits go idle
            before, at = tree_cpu_seconds(os.getpid()), time.monotonic()
            time.sleep(idle_window)
            row["idle"] = 100 * (tree_cpu_seconds(os.getpid()) - before) / (time.monotonic() - at)
            row["rss_mb"] = tree_rss_mb(os.getpid())
            row["load"] = os.getloadavg()[0]
            say(f"{backend}: {row}")
            return row
    finally:
        if data is not None:
            shutil.rmtree(data, ignore_errors=True)


def markdown(rows: list[dict[str, object]], requests: int, chosen: list[str]) -> str:
    def med(backend: str, pick: str) -> float:
        values = []
        for row in rows:
            if row["backend"] == backend:
                head, _, sub = pick.partition(".")
                value = row[head]
                values.append(float(value[sub] if sub else value))  # type: ignore[index,arg-type]
        return statistics.median(values)

    loads = ", ".join(f"{float(row['load']):.2f}" for row in rows)  # type: ignore[arg-type]
    rounds = len(rows) // len(chosen)
    lines = [
        "## The durable backends of `streams up` (bench/backends.py: `python -m bench.backends`)",
        "",
        f"Three regions replicating continuously, as `streams up` runs them; {rounds} round(s) "
        "of each backend, the order rotating; medians. Lone XADD: one client, one request at a "
        "time (each its own Kafka transaction); commit: a bare one-record transaction on r1's "
        f"broker. Throughput: `redis-benchmark -c 50 -n {requests:,}` XADD on random keys on "
        f"r1; replicated: P16 on all three regions at once ({requests // 2:,} each), until every "
        "region applied everything. Idle CPU (percent of one core) and RSS: the whole idle "
        "topology (brokers, object stores, mirrors, nodes). 1-minute load average at the end of "
        f"each round: {loads} (2 shared cores).",
        "",
        "| | " + " | ".join(BACKENDS[b][0] for b in chosen) + " |",
        "|---|" + "---|" * len(chosen),
    ]
    for label, pick, fmt in (
        ("lone XADD p50", "xadd.p50", "{:.2f} ms"),
        ("lone XADD p99", "xadd.p99", "{:.2f} ms"),
        ("1-record commit p50", "commit.p50", "{:.2f} ms"),
        ("1-record commit p99", "commit.p99", "{:.2f} ms"),
        ("XADD c50 P1", "p1", "{:,.0f} /s"),
        ("XADD c50 P16", "p16", "{:,.0f} /s"),
        ("3 regions replicated (P16)", "replicated", "{:,.0f} ops/s"),
        ("start (3 regions, to PING)", "start_s", "{:.1f} s"),
        ("idle CPU", "idle", "{:.1f} %"),
        ("RSS, idle", "rss_mb", "{:,.0f} MB"),
    ):
        lines.append(f"| {label} | " + " | ".join(fmt.format(med(b, pick)) for b in chosen) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backends")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--idle-window", type=float, default=10.0)
    parser.add_argument("--only", default=",".join(BACKENDS), help="backends, comma separated")
    parser.add_argument("--out", help="benchmarks page to write the section into (else print)")
    args = parser.parse_args(argv)
    chosen = [b for b in args.only.split(",") if b]
    rows = []
    for round_no in range(args.rounds):
        shift = round_no % len(chosen)
        for backend in chosen[shift:] + chosen[:shift]:
            rows.append(one_round(backend, args.requests, args.samples, args.idle_window))
    section = markdown(rows, args.requests, chosen)
    if args.out:
        write_section(Path(args.out), section, NAME, at_end=True)
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
