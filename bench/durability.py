"""Durable brokers (on a SeaweedFS object store) next to ephemeral ones (in memory), in one run.

    python -m bench.durability [--rounds 2] [--requests 100000] [--restart 200000]
                               [--out docs/benchmarks.md]

Per round, one embedded region of each kind (the order alternates between rounds, so neither
always runs on a machine the other just warmed): the latency of a lone XADD (one Kafka
transaction each) and of a bare one-record Kafka transaction on the region's broker;
`redis-benchmark -c 50` XADD throughput at pipeline 1 and 16; the CPU the idle topology uses
(brokers, object store, node, mirrors' threads). Then, on durable brokers only, a region holding
`--restart` entries restarts from its snapshot plus a tail: its node alone (SIGKILL), and the
whole topology stopped and started again on the same data directory (`streams up` twice).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from confluent_kafka import Producer

from bench.latency import percentiles
from bench.restart import fill, info
from bench.shards import idle_cpu
from bench.throughput import run_benchmarks, write_section, xadd_benchmark_command
from topology.local import LocalTopology

NAME = "durability"
MODES = ("ephemeral", "durable")


@contextmanager
def region(mode: str, data_dir: Path | None = None) -> Iterator[LocalTopology]:
    """One region, brokers of `mode`; durable ones on `data_dir` (a fresh one when None)."""
    fresh = data_dir is None and mode == "durable"
    where = Path(tempfile.mkdtemp(prefix="bench-durable-")) if fresh else data_dir
    try:
        with LocalTopology(
            regions=1,
            manual_sync=False,
            id_mode="liberal",
            data_dir=where if mode == "durable" else None,
            node_args=["--snapshot-every-ops", "0", "--snapshot-every-s", "0"],
        ) as topo:
            yield topo
    finally:
        if fresh and where is not None:
            shutil.rmtree(where, ignore_errors=True)


def xadd_latency(client: redis.Redis, n: int) -> dict[str, float]:
    samples = []
    for i in range(n):
        started = time.perf_counter()
        client.xadd(f"lat:{i % 8}", {"f": "v"})
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def kafka_commit(bootstrap: str, n: int) -> dict[str, float]:
    """One-record transactions on the broker itself: begin, produce, commit (the write path's
    floor, without the node)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "bench-durability", "log_level": 0}
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


def one_round(mode: str, requests: int, samples: int, idle_window: float) -> dict[str, object]:
    say(f"{mode}: starting one region")
    started = time.monotonic()
    with region(mode) as topo:
        up = time.monotonic() - started
        client = topo.client(1)
        row: dict[str, object] = {"mode": mode, "start_s": up}
        row["xadd"] = xadd_latency(client, samples)
        row["commit"] = kafka_commit(topo.bootstrap[1], samples)
        for p in (1, 16):
            row[f"p{p}"] = run_benchmarks([xadd_benchmark_command(topo.ports[1], requests, p)])
            say(f"{mode}: XADD c50 P{p} {row[f'p{p}']:,.0f}/s")
        row["idle"] = idle_cpu(idle_window)
        row["load"] = os.getloadavg()[0]
        say(f"{mode}: {row}")
        return row


def restart_figures(entries: int, tail: int) -> dict[str, float]:
    data = Path(tempfile.mkdtemp(prefix="bench-durable-restart-"))
    try:
        with region("durable", data) as topo:
            client = topo.client(1)
            started = time.monotonic()
            fill(client, entries)
            wrote = time.monotonic() - started
            client.execute_command("CRDT.SNAPSHOT")  # type: ignore[no-untyped-call]
            fill(client, tail)
            client.execute_command("CRDT.FLUSH")  # type: ignore[no-untyped-call]
            digest = client.execute_command("CRDT.DIGEST")  # type: ignore[no-untyped-call]
            say(f"durable: {entries:,} + {tail:,} entries written in {wrote:.1f} s")
            topo.kill_node(1)
            started = time.monotonic()
            topo.start_node(1)
            node_s = time.monotonic() - started
            node_records = int(info(topo.client(1))[b"boot_records_read"])
            assert topo.client(1).execute_command("CRDT.DIGEST") == digest  # type: ignore[no-untyped-call]
        started = time.monotonic()
        with region("durable", data) as topo:
            topo_s = time.monotonic() - started
            client = topo.client(1)
            topo_records = int(info(client)[b"boot_records_read"])
            assert client.execute_command("CRDT.DIGEST") == digest  # type: ignore[no-untyped-call]
            assert sum(int(client.xlen(f"k{i}")) for i in range(8)) == entries + tail  # type: ignore[arg-type,misc]
        size = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
        return {
            "entries": entries,
            "tail": tail,
            "write_s": wrote,
            "node_s": node_s,
            "node_records": node_records,
            "topo_s": topo_s,
            "topo_records": topo_records,
            "data_mb": size / 1e6,
        }
    finally:
        shutil.rmtree(data, ignore_errors=True)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def markdown(rows: list[dict[str, object]], restart: dict[str, float], requests: int) -> str:
    def med(mode: str, pick: str) -> float:
        values: list[float] = []
        for row in rows:
            if row["mode"] != mode:
                continue
            value = row[pick.split(".")[0]]
            values.append(float(value[pick.split(".")[1]] if "." in pick else value))  # type: ignore[index,arg-type]
        return statistics.median(values)

    loads = ", ".join(f"{float(row['load']):.2f}" for row in rows)  # type: ignore[arg-type]
    lines = [
        "## Durable against ephemeral brokers (bench/durability.py: `python -m bench.durability`)",
        "",
        f"One embedded region, one shard, liberal IDs; {len(rows) // 2} round(s) of each, "
        "alternating which goes first; medians of the rounds. Durable: Tansu on `s3://` through "
        "the region's own `weed mini` (SeaweedFS) under a data directory; ephemeral: Tansu "
        "`memory://`. Lone XADD: one client, one request at a time (each its own Kafka "
        "transaction); Kafka commit: a bare one-record transaction (begin, produce, commit) on "
        f"the broker. Throughput: `redis-benchmark -c 50 -n {requests:,}` XADD on random keys. "
        "Idle: percent of one core used by the whole idle topology (broker, object store, node, "
        f"mirror threads) over 10 s. 1-minute load average at the end of each round: {loads} "
        "(the machine is shared: 2 cores).",
        "",
        "| | ephemeral (memory) | durable (S3 on SeaweedFS) |",
        "|---|---|---|",
    ]
    for label, pick, fmt in (
        ("lone XADD p50", "xadd.p50", "{:.2f} ms"),
        ("lone XADD p99", "xadd.p99", "{:.2f} ms"),
        ("Kafka 1-record commit p50", "commit.p50", "{:.2f} ms"),
        ("Kafka 1-record commit p99", "commit.p99", "{:.2f} ms"),
        ("XADD c50 P1", "p1", "{:,.0f} /s"),
        ("XADD c50 P16", "p16", "{:,.0f} /s"),
        ("idle CPU", "idle", "{:.1f} %"),
        ("region start (to PING)", "start_s", "{:.1f} s"),
    ):
        cells = [fmt.format(med(mode, pick)) for mode in MODES]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    r = restart
    commit_e, commit_d = (med(mode, "commit.p50") for mode in MODES)
    p1 = med("durable", "p1") / med("ephemeral", "p1")
    p16 = med("durable", "p16") / med("ephemeral", "p16")
    lines += [
        "",
        f"Restart on durable brokers: {int(r['entries']):,} XADDs over 8 keys (written in "
        f"{r['write_s']:.1f} s in pipelines of 1,000), CRDT.SNAPSHOT, a tail of "
        f"{int(r['tail']):,} more; the data directory then holds {r['data_mb']:.0f} MB. The "
        f"node SIGKILLed and started again serves (PING) after {r['node_s']:.2f} s, having read "
        f"{int(r['node_records']):,} log records after the snapshot (`boot_records_read`). The "
        "whole topology "
        f"stopped and started again on the data directory (object store, broker, node, as "
        f"`streams up` run twice) serves after {r['topo_s']:.2f} s, having read "
        f"{int(r['topo_records']):,} records; same CRDT.DIGEST and XLENs both times.",
        "",
        f"Durable brokers commit a transaction in {commit_d:.1f} ms instead of {commit_e:.1f} ms "
        f"(p50); group commit puts many requests in one transaction, so throughput falls less "
        f"than the latency rises: to {p1:.0%} of ephemeral at P1, {p16:.0%} at P16 (bigger "
        "batches per transaction).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.durability")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--restart", type=int, default=200_000, help="entries before restart")
    parser.add_argument("--tail", type=int, default=2_000)
    parser.add_argument("--idle-window", type=float, default=10.0)
    parser.add_argument("--out", help="benchmarks page to write the section into (else print)")
    args = parser.parse_args(argv)
    rows = []
    for round_no in range(args.rounds):
        order = MODES if round_no % 2 == 0 else MODES[::-1]
        for mode in order:
            rows.append(one_round(mode, args.requests, args.samples, args.idle_window))
    restart = restart_figures(args.restart, args.tail)
    section = markdown(rows, restart, args.requests)
    if args.out:
        write_section(Path(args.out), section, NAME, at_end=True)
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
