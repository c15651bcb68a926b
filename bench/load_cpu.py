"""Who spends the CPU under load: each process of a topology, and its busiest threads.

    python -m bench.load_cpu [--regions 3] [--broker kafka|tansu] [--pipeline 1]
                             [--requests 30000] [--warmup 30000] [--threads 0.8]

A fresh `LocalTopology` (liberal IDs, the mirrors copying continuously; `--broker kafka` runs
the durable shape `streams up` runs: Apache Kafka brokers and MirrorMaker 2), `--warmup` XADDs
at P16 on r1 replicated everywhere first (a fresh JVM spends its first minute compiling), then
`redis-benchmark -c 50 -P <pipeline> -n <requests> -r 100000` XADD on random keys on r1. Printed:
the rate, the replicated rate (requests over the time until every region applied every op), and
per process the percent of one core it used during the run (utime + stime from /proc), with its
threads of at least `--threads` percent (a JVM names its threads: "data-plane-kafka-request-
handler", "KafkaBasedLog Work", ...; digits folded to #). Why: on 2 cores the durable shape is
CPU-bound, and what to cut is whichever process pays most per op (docs/benchmarks.md, "Where
three regions spend the CPU at c50 P1"). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import time

from bench.pipeline import tree_processes
from topology.local import LocalTopology


def _label(pid: int, name: str) -> str | None:
    """What a process of the topology is, by its command line; None for anything else."""
    if pid == os.getpid():
        return "this process"  # the embedded mirror's threads (the light stack)
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fp:
            cmd = fp.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if "kafka.Kafka" in cmd or "tansu" in name:
        region = re.search(r"streams-kafka-(r\d+)|/(r\d+)/", cmd)
        return f"broker {next(g for g in region.groups() if g) if region else pid}"
    if "MirrorMaker" in cmd:
        return f"mirrormaker {pid}"
    if "streams.node" in cmd:
        region = re.search(r"--region[= ](\S+)", cmd)
        return f"node {region.group(1) if region else pid}"
    return None


def _thread_seconds(pid: int) -> dict[str, float]:
    """CPU seconds of `pid`'s threads by name, digits folded (a pool's threads summed)."""
    tick = os.sysconf("SC_CLK_TCK")
    threads: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as fp:
            name = re.sub(r"\d+", "#", fp.read().strip())
        with open(f"/proc/{pid}/task/{tid}/stat") as fp:
            fields = fp.read().rsplit(")", 1)[1].split()
        threads[name] = threads.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return threads


def snapshot() -> dict[int, tuple[str, float, dict[str, float]]]:
    """Per process of this topology (this process and its descendants): its label, its CPU
    seconds, and its threads' CPU seconds by name."""
    seen: dict[int, tuple[str, float, dict[str, float]]] = {}
    for pid, (name, cpu) in tree_processes(os.getpid()).items():
        label = _label(pid, name)
        if label is None:
            continue
        try:
            seen[pid] = (label, cpu, _thread_seconds(pid))
        except OSError:
            continue  # gone meanwhile
    return seen


def _replicated(topo: LocalTopology) -> None:
    target = topo.client(1).execute_command("CRDT.VECTOR")
    while any(topo.client(i).execute_command("CRDT.VECTOR") != target for i in topo.ports):
        time.sleep(0.05)


def _xadd(port: int, pipeline: int, requests: int, prefix: str) -> str:
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-c", "50", "-P", str(pipeline), "-n"]
        + [str(requests), "-r", "100000", "-q", "XADD", f"{prefix}:__rand_int__", "*", "f", "v"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return re.findall(r"([\d.]+) requests per second", out)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.load_cpu", description=__doc__)
    parser.add_argument("--regions", type=int, default=3)
    parser.add_argument("--broker", choices=["kafka", "tansu"], default="kafka")
    parser.add_argument("--pipeline", type=int, default=1)
    parser.add_argument("--requests", type=int, default=30000)
    parser.add_argument("--warmup", type=int, default=30000)
    parser.add_argument("--threads", type=float, default=0.8, help="show threads above this %%")
    args = parser.parse_args()
    with LocalTopology(
        regions=args.regions,
        manual_sync=False,
        id_mode="liberal",
        broker=args.broker,
        mirror="mm2" if args.broker == "kafka" else "embedded",
        node_args=["--snapshot-every-ops", "0", "--snapshot-every-s", "0"],
    ) as topo:
        if args.warmup:
            _xadd(topo.ports[1], 16, args.warmup, "warm")
            _replicated(topo)
            time.sleep(5)
        before, began = snapshot(), time.monotonic()
        rate = _xadd(topo.ports[1], args.pipeline, args.requests, "key")
        after, ended = snapshot(), time.monotonic()
        _replicated(topo)
        replicated = args.requests / (time.monotonic() - began)
    span = ended - began
    print(f"XADD c50 P{args.pipeline}: {rate} /s, replicated {replicated:,.0f} ops/s")
    total = 0.0
    for pid, (label, cpu, threads) in sorted(after.items(), key=lambda item: item[1][0]):
        if pid not in before:
            continue
        share = 100 * (cpu - before[pid][1]) / span
        total += share
        was = before[pid][2]
        busy = sorted(
            ((100 * (t - was.get(name, 0.0)) / span, name) for name, t in threads.items()),
            reverse=True,
        )
        named = ", ".join(f"{name} {pct:.1f}" for pct, name in busy if pct >= args.threads)
        print(f"  {label:18s} {share:6.1f} %   {named}")
    print(f"  {'total':18s} {total:6.1f} % of one core over {span:.1f} s")


if __name__ == "__main__":
    main()
