"""`python -m bench.compression`: bytes per op on an op log, and the node's CPU per op, with the
op-log producers' compression.type none, lz4 and zstd.

    python -m bench.compression [--ops 40000] [--pipeline 16] [--keys 1000]

For each setting: one region on an Apache Kafka broker (`LocalTopology(broker="kafka",
compression=...)`), `--ops` XADDs of an order-like entry (five fields: ids, a customer, an
amount, a status, a timestamp) on `--keys` random keys at pipeline `--pipeline` over one
connection, then the size on disk of the region's `.oplog` log segments divided by the ops, and
the node process's CPU time (user + system, /proc) over the same ops. Bytes on disk are what a
mirror ships to every other region (MirrorMaker 2 and the embedded mirror write the copies with
the same compression). Printed, never asserted; results in docs/benchmarks.md, "Compression".
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

from topology.apache_kafka import KafkaBroker
from topology.local import LocalTopology

SETTINGS = ("none", "lz4", "zstd")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _segment_bytes(broker: KafkaBroker, topic: str) -> int:
    assert broker.data_dir is not None
    return sum(
        path.stat().st_size
        for part in (broker.data_dir / "kraft").glob(f"{topic}-*")
        for path in part.glob("*.log")
    )


def run(compression: str, ops: int, pipeline: int, keys: int) -> dict[str, float]:
    rng = random.Random(7)
    with LocalTopology(regions=1, broker="kafka", compression=compression) as topo:
        broker = topo.brokers[1]
        assert isinstance(broker, KafkaBroker)
        client = topo.client(1)
        pid = topo._procs[(1, 0)].pid
        cpu0, began = _cpu_seconds(pid), time.monotonic()
        for base in range(0, ops, pipeline):
            pipe = client.pipeline(transaction=False)
            for i in range(base, min(ops, base + pipeline)):
                pipe.xadd(
                    f"orders:{rng.randrange(keys)}",
                    {
                        "order": f"ord-{i:08d}",
                        "customer": f"cust-{rng.randrange(50_000):05d}",
                        "amount": f"{rng.randrange(100, 100_000) / 100:.2f}",
                        "status": rng.choice(("new", "paid", "shipped", "cancelled")),
                        "at": str(1_764_000_000_000 + i * 37),
                    },
                )
            pipe.execute()
        elapsed = time.monotonic() - began
        cpu = _cpu_seconds(pid) - cpu0
        client.execute_command("CRDT.FLUSH")  # type: ignore[no-untyped-call]
        time.sleep(1.0)
        size = _segment_bytes(broker, "r1.oplog")
    return {
        "bytes_per_op": size / ops,
        "node_cpu_us_per_op": cpu / ops * 1e6,
        "ops_per_s": ops / elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compression", description=__doc__)
    parser.add_argument("--ops", type=int, default=40_000)
    parser.add_argument("--pipeline", type=int, default=16)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--settings", default=",".join(SETTINGS))
    args = parser.parse_args(argv)
    print(f"{args.ops} XADDs, pipeline {args.pipeline}, {args.keys} keys, one region on Kafka")
    print(f"{'compression':<12} {'bytes/op':>9} {'node CPU us/op':>15} {'XADD/s':>8}")
    for setting in args.settings.split(","):
        result = run(setting, args.ops, args.pipeline, args.keys)
        print(
            f"{setting:<12} {result['bytes_per_op']:>9.1f} {result['node_cpu_us_per_op']:>15.1f}"
            f" {result['ops_per_s']:>8.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
