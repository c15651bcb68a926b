"""XADD round-trip and replication latency on the embedded topology, next to redis-server.

    python bench/latency.py [--n 2000] [--out docs/benchmarks.md]

Measures, in one run on this machine:
- XADD round trip from redis-py to a region node (the write is acknowledged only after Kafka
  committed its op) and to a local redis-server 7 (no persistence), same client, same payload;
- XLEN/XRANGE read round trip on both;
- replication latency: XADD in r1 until a blocked XREAD in r2 returns the entry (mirrors running
  continuously), on a 2-region topology.
Nothing here is asserted; the numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from topology.local import LocalTopology  # noqa: E402
from topology.ports import free_port, wait_for_port  # noqa: E402


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {
        "p50": pick(0.50),
        "p90": pick(0.90),
        "p99": pick(0.99),
        "mean": statistics.fmean(ordered) * 1000,
    }


def time_calls(fn: object, n: int) -> list[float]:
    call = fn  # type: ignore[assignment]
    out = []
    for i in range(n):
        t = time.perf_counter()
        call(i)  # type: ignore[operator]
        out.append(time.perf_counter() - t)
    return out


def bench_client(client: redis.Redis, n: int) -> dict[str, dict[str, float]]:
    client.delete("bench")
    for i in range(50):  # warm up
        client.xadd("bench", {"i": i})
    xadd = time_calls(lambda i: client.xadd("bench", {"field": "value", "i": i}), n)
    xrange = time_calls(lambda i: client.xrange("bench", count=10), n)
    return {"XADD": percentiles(xadd), "XRANGE COUNT 10": percentiles(xrange)}


def bench_replication(topo: LocalTopology, n: int) -> dict[str, float]:
    writer = redis.Redis(port=topo.ports[1])
    reader = redis.Redis(port=topo.ports[2])
    samples: list[float] = []
    last = b"$"
    for i in range(n):
        got: list[float] = []

        def wait(after: bytes = last, got: list[float] = got) -> None:
            reader.xread({"repl": after}, block=10000)
            got.append(time.perf_counter())

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.002)  # let the reader block
        start = time.perf_counter()
        last = writer.xadd("repl", {"i": i})
        t.join()
        samples.append(got[0] - start)
    return percentiles(samples)


def start_redis() -> tuple[subprocess.Popen[bytes], int, str]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (scripts/setup.sh installs it)")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="bench-redis-")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    wait_for_port(port)
    version = redis.Redis(port=port).info("server")["redis_version"]
    return proc, port, str(version)


def table(rows: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    lines = [
        "| command | server | p50 ms | p90 ms | p99 ms | mean ms |",
        "|---|---|---|---|---|---|",
    ]
    for command in next(iter(rows.values())):
        for server, results in rows.items():
            r = results[command]
            lines.append(
                f"| {command} | {server} | {r['p50']:.3f} | {r['p90']:.3f} | "
                f"{r['p99']:.3f} | {r['mean']:.3f} |"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="samples per measurement")
    parser.add_argument("--repl-n", type=int, default=300, help="replication samples")
    parser.add_argument("--out", type=Path, help="write a markdown report here")
    args = parser.parse_args()

    proc, port, version = start_redis()
    try:
        print(f"redis-server {version}: {args.n} samples ...", flush=True)
        redis_rows = bench_client(redis.Redis(port=port), args.n)
    finally:
        proc.kill()
        proc.wait()
    print("embedded topology (2 regions, continuous replication) ...", flush=True)
    with LocalTopology(regions=2, manual_sync=False) as topo:
        node_rows = bench_client(topo.client(1), args.n)
        print(f"replication: {args.repl_n} samples ...", flush=True)
        repl = bench_replication(topo, args.repl_n)
    rows = {"streams region node": node_rows, f"redis-server {version}": redis_rows}
    lines = [
        "## Latency (bench/latency.py)",
        "",
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {platform.python_version()}, "
        f"{args.n} sequential requests from one redis-py client over loopback. A region node "
        "acknowledges XADD only after its op committed in a Kafka transaction on the embedded "
        "Tansu broker; redis-server runs without persistence.",
        "",
        *table(rows),
        "",
        f"Replication latency, XADD in r1 until a blocked XREAD in r2 returns it "
        f"({args.repl_n} samples, mirrors copying continuously): p50 {repl['p50']:.1f} ms, "
        f"p90 {repl['p90']:.1f} ms, p99 {repl['p99']:.1f} ms, mean {repl['mean']:.1f} ms.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text("# Benchmarks\n\n" + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
