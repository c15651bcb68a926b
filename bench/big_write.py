"""`python -m bench.big_write`: what one oversized XADD costs the other clients of a region.

    python -m bench.big_write [--tree DIR ...] [--mb 70] [--clients 20] [--seconds 3]

For each source tree given (default: this one; e.g. an old commit unpacked with
`git archive <commit> | tar -x -C DIR`), in turn: an embedded Tansu broker, one region node run
from that tree, `--clients` connections (asyncio, in a process of their own) doing XADD then
XRANGE in a loop, and, once they run, one XADD of `--mb` MB from another process. Printed per
tree: the big write's reply and time, the node's peak RSS before and after it, and for the
other clients' requests from the big write's start until `--seconds` after it: count, errors
(LOADING, failed batches), p50 / p99 / max
latency. Printed, never asserted (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
import redis.asyncio as aredis

from topology.broker import EmbeddedBroker
from topology.ports import free_port

HERE = Path(__file__).resolve().parents[1]


async def _client(
    port: int, name: str, stop_at: float, out: list[tuple[float, float, str]]
) -> None:
    client = aredis.Redis(port=port, socket_timeout=60)
    i = 0
    try:
        while time.time() < stop_at:
            i += 1
            started = time.time()
            error = ""
            try:
                await client.xadd(name, {"i": str(i)})
                await client.xrange(name, count=5)
            except redis.RedisError as exc:
                error = type(exc).__name__
                await asyncio.sleep(0.01)
            out.append((started, time.time() - started, error))
    finally:
        await client.aclose()


def _clients(port: int, count: int, stop_at: float, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    async def main() -> list[tuple[float, float, str]]:
        out: list[tuple[float, float, str]] = []
        await asyncio.gather(*(_client(port, f"c{i}", stop_at, out) for i in range(count)))
        return out

    queue.put(asyncio.run(main()))


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_tree(tree: Path, mb: int, clients: int, seconds: float) -> None:
    broker = EmbeddedBroker("bigwrite")
    broker.start()
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="bench-big-"))
    topology = work / "topology.toml"
    topology.write_text(
        f'[[region]]\nname = "r1"\nid = 1\nbootstrap = "{broker.bootstrap}"\nresp_port = {port}\n'
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    node = subprocess.Popen(
        [sys.executable, "-m", "streams.node", "--topology", str(topology), "--region", "r1"],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(work / "node.log", "wb"),  # noqa: SIM115 - closed with the process
        start_new_session=True,
    )
    try:
        probe = redis.Redis(port=port, socket_timeout=1)
        deadline = time.time() + 60
        while True:
            try:
                if probe.ping():
                    break
            except redis.RedisError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        value = os.urandom(mb * 1024 * 1024)
        peak_before = _peak_rss_mb(node.pid)
        queue: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
        big_at = time.time() + 2.0
        stop_at = big_at + seconds
        others = multiprocessing.Process(target=_clients, args=(port, clients, stop_at, queue))
        others.start()
        time.sleep(max(0.0, big_at - time.time()))
        big = redis.Redis(port=port, socket_timeout=120)
        started = time.time()
        try:
            reply = str(big.xadd("huge", {"f": value}))
        except redis.RedisError as exc:
            reply = f"{type(exc).__name__}: {exc}"
        took = time.time() - started
        results = queue.get(timeout=seconds + 120)
        others.join()
        window = [(lat, err) for at, lat, err in results if at >= started]
        lats = sorted(lat for lat, err in window if not err)
        errors: dict[str, int] = {}
        for _lat, err in window:
            if err:
                errors[err] = errors.get(err, 0) + 1

        def pct(p: float) -> float:
            return lats[min(len(lats) - 1, int(len(lats) * p))] * 1000 if lats else float("nan")

        peak_after = _peak_rss_mb(node.pid)
        print(f"tree {tree}")
        print(f"  {mb} MB XADD: {took * 1000:.0f} ms, {reply[:110]}")
        print(f"  node peak RSS {peak_before:.0f} MB before it, {peak_after:.0f} MB after")
        print(
            f"  others during and {seconds:g} s after: {len(window)} requests,"
            f" errors {errors or 'none'}, p50 {pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms,"
            f" max {pct(1.0):.1f} ms"
        )
    finally:
        node.terminate()
        try:
            node.wait(15)
        except subprocess.TimeoutExpired:
            node.kill()
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.big_write", description=__doc__)
    parser.add_argument("--tree", action="append", type=Path, help="source tree(s) to run")
    parser.add_argument("--mb", type=int, default=70)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    for tree in args.tree or [HERE]:
        run_tree(tree.resolve(), args.mb, args.clients, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
