"""Client limits side by side (issue 27, item 6): how long one XRANGE over a long stream holds
everyone else up, and how much memory five clients that never read their replies cost, on the
node of each tree given (an old commit's checkout and this one) and on redis-server, in one run.

    python -m bench.client_limits --tree /tmp/old-checkout --tree . --entries 1000000

Each node runs in a process of its own (PYTHONPATH=tree) on an in-memory op log (no broker: the
figures are the RESP front door's and the state's), its stream `big` filled in process with
`--entries` entries of one small field; redis-server gets the same entries. Then:
1. 20 connections PING in a loop while another reads `XRANGE big - +` three times (raw bytes,
   not parsed): the PINGs' p50 / p99 / max during the ranges, and each range's time.
2. `CONFIG SET client-output-buffer-limit "normal 32mb 16mb 5"` (refused by a node before
   issue 27), then five connections with a 4 KB receive buffer send `XRANGE big - +` and read
   nothing for 8 s: the server's peak RSS and how many of the five are still connected.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import hiredis

from topology.ports import free_port, wait_for_port

NODE = """
import asyncio, sys
from streams.node.pipeline.auth import AuthConfig
from streams.node.runtime.memory import MemoryLog
from streams.node.node import NodeOptions, RegionNode
from streams.resp.server import Held, Session
from streams.config import RegionConfig, Topology

port, entries = int(sys.argv[1]), int(sys.argv[2])

async def main():
    topology = Topology(regions=(RegionConfig("r1", 1, "127.0.0.1:1", port),),
                        mirror_naming="identity")
    node = RegionNode(NodeOptions(topology, "r1", auth=AuthConfig()), log=MemoryLog())
    await node.start()
    session = Session(10**6)
    for start in range(0, entries, 1000):
        await node.handle(session, [b"MULTI"])
        for i in range(start, min(start + 1000, entries)):
            await node.handle(session, [b"XADD", b"big", b"*", b"f", b"v%d" % i])
        reply = await node.handle(session, [b"EXEC"])
        if isinstance(reply, Held):
            await reply.until
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _call(port: int, *args: bytes) -> Any:
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall(_command(*args))
        reader = hiredis.Reader()
        while True:
            reply = reader.gets()
            if reply is not False:
                return reply
            reader.feed(sock.recv(1 << 20))


def _range_bytes(port: int) -> int:
    """The size of `XRANGE big - +`'s reply (read once, parsed, not timed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall(_command(b"XRANGE", b"big", b"-", b"+"))
        reader = hiredis.Reader()
        size = 0
        while True:
            chunk = sock.recv(1 << 20)
            size += len(chunk)
            reader.feed(chunk)
            if reader.gets() is not False:
                return size


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _pings(port: int, stop: threading.Event, out: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while not stop.is_set():
        started = time.perf_counter()
        writer.write(b"*1\r\n$4\r\nPING\r\n")
        await reader.readexactly(7)
        out.append(time.perf_counter() - started)
    writer.close()


def _ranges(port: int, size: int, times: list[float], stop: threading.Event) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        buf = bytearray(1 << 20)
        for _ in range(3):
            started = time.perf_counter()
            sock.sendall(_command(b"XRANGE", b"big", b"-", b"+"))
            got = 0
            while got < size:
                got += sock.recv_into(buf)
            times.append(time.perf_counter() - started)
    stop.set()


async def _loop_hold(port: int, size: int) -> dict[str, Any]:
    stop = threading.Event()
    latencies: list[float] = []
    times: list[float] = []
    pingers = [asyncio.ensure_future(_pings(port, stop, latencies)) for _ in range(20)]
    await asyncio.sleep(0.5)
    latencies.clear()
    thread = threading.Thread(target=_ranges, args=(port, size, times, stop))
    thread.start()
    while thread.is_alive():
        await asyncio.sleep(0.05)
    await asyncio.gather(*pingers)
    ordered = sorted(latencies)
    return {
        "xrange_s": [round(t, 2) for t in times],
        "pings": len(ordered),
        "ping_p50_ms": round(1000 * statistics.median(ordered), 1),
        "ping_p99_ms": round(1000 * ordered[int(0.99 * (len(ordered) - 1))], 1),
        "ping_max_ms": round(1000 * ordered[-1], 1),
    }


def _unread(port: int, pid: int) -> dict[str, Any]:
    limit = b"normal 32mb 16mb 5"
    answer = _call(port, b"CONFIG", b"SET", b"client-output-buffer-limit", limit)
    before = _rss_mb(pid)
    socks = []
    for i in range(5):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(
            _command(b"CLIENT", b"SETNAME", b"unread%d" % i)
            + _command(b"XRANGE", b"big", b"-", b"+")
        )
        socks.append(sock)
    peak = before
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        peak = max(peak, _rss_mb(pid))
        time.sleep(0.1)
    listed = _call(port, b"CLIENT", b"LIST")
    still = sum(f"name=unread{i} ".encode() in listed for i in range(5))
    for sock in socks:
        sock.close()
    time.sleep(1)
    return {
        "config_set": answer.decode() if isinstance(answer, bytes) else str(answer),
        "rss_before_mb": round(before),
        "rss_peak_mb": round(peak),
        "rss_after_mb": round(_rss_mb(pid)),
        "unread_clients_still_connected": still,
    }


def _measure(port: int, pid: int) -> dict[str, Any]:
    size = _range_bytes(port)
    result = {"reply_mb": round(size / 2**20, 1)}
    result.update(asyncio.run(_loop_hold(port, size)))
    result.update(_unread(port, pid))
    return result


def _node(tree: str, entries: int) -> dict[str, Any]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
    proc = subprocess.Popen(
        [sys.executable, "-c", NODE, str(port), str(entries)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tree,
    )
    try:
        assert proc.stdout is not None
        started = time.monotonic()
        if proc.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"the node of {tree} did not start")
        commit = subprocess.run(
            ["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        print(f"node of {tree} ({commit}) filled in {time.monotonic() - started:.0f} s", flush=True)
        return {"server": f"node {commit} ({tree})", **_measure(port, proc.pid)}
    finally:
        proc.kill()
        proc.wait()


def _redis(entries: int) -> dict[str, Any]:
    executable = shutil.which("redis-server")
    if executable is None:
        return {"server": "redis-server: not installed"}
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        proc = subprocess.Popen(
            [executable, "--port", str(port), "--save", "", "--dir", folder],
            stdout=subprocess.DEVNULL,
        )
        try:
            wait_for_port(port)
            with socket.create_connection(("127.0.0.1", port)) as sock:
                reader = hiredis.Reader()
                for start in range(0, entries, 10_000):
                    count = min(10_000, entries - start)
                    sock.sendall(
                        b"".join(
                            _command(b"XADD", b"big", b"*", b"f", b"v%d" % i)
                            for i in range(start, start + count)
                        )
                    )
                    got = 0
                    while got < count:
                        reply = reader.gets()
                        if reply is False:
                            reader.feed(sock.recv(1 << 20))
                        else:
                            got += 1
            version = _call(port, b"INFO", b"server").split(b"redis_version:")[1].split(b"\r")[0]
            return {"server": f"redis-server {version.decode()}", **_measure(port, proc.pid)}
        finally:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], help="a checkout (repeatable)")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--no-redis", action="store_true")
    args = parser.parse_args()
    results = [_node(tree, args.entries) for tree in args.tree or ["."]]
    if not args.no_redis:
        results.append(_redis(args.entries))
    for result in results:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
