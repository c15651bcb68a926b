"""Write and consumption throughput, replication latency under load and idle cost, measured the way
users load a database: many clients at once, pipelines, side by side with redis-server.

Everything runs in one process tree on this machine, alternating ours and Redis's in the same run:
- redis-server 7 (Debian's) with `appendonly yes, appendfsync always` (durable, the anchor of
  group commit) and with persistence off;
- an embedded topology of 1, 2 or 3 regions (Tansu brokers, mirrors, region nodes).
`redis-benchmark -c 50` drives XADD at pipeline 1 and 16; an asyncio client pool (50
connections) drives the XREADGROUP + XACK consumption loop; a rate-limited writer loads r1
while XADD-to-blocked-XREAD latency is sampled between r1 and r2; the idle cost is the CPU time
of every process of an idle topology over a wall-clock window.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis
import redis.asyncio as aioredis

from topology.local import LocalTopology
from topology.ports import free_port, wait_for_port

CLIENTS = 50


@dataclass
class Figures:
    """Samples per (figure, system) across rounds."""

    samples: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, figure: str, system: str, value: float) -> None:
        self.samples.setdefault((figure, system), []).append(value)

    def summary(self, figure: str, system: str) -> tuple[float, float, float] | None:
        values = self.samples.get((figure, system))
        if not values:
            return None
        return min(values), statistics.median(values), max(values)


# --- redis-server ---------------------------------------------------------------------------


@contextlib.contextmanager
def redis_server(durable: bool) -> Iterator[int]:
    """A redis-server on a free port: `durable` = AOF with fsync on every write."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("bench: redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="bench-redis-")
    persistence = (
        ["--appendonly", "yes", "--appendfsync", "always"] if durable else ["--appendonly", "no"]
    )
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir]
        + persistence,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, 10)
        yield port
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def redis_version() -> str:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
    return out.stdout.split()[2].removeprefix("v=") if out.returncode == 0 else "?"


# --- loads ------------------------------------------------------------------------------------


def redis_benchmark(port: int, requests: int, pipeline: int, key: str) -> float:
    """requests/s of `redis-benchmark -c 50 -P pipeline XADD key * f v`."""
    out = subprocess.run(
        [
            "redis-benchmark", "-p", str(port), "-c", str(CLIENTS), "-n", str(requests),
            "-P", str(pipeline), "--csv", "XADD", key, "*", "field", "value",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    for line in out.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells and cells[0].startswith("XADD"):
            return float(cells[1])
    raise RuntimeError(f"redis-benchmark gave no figure: {out.stdout!r} {out.stderr!r}")


def prefill(port: int, key: str, entries: int) -> None:
    client = redis.Redis(port=port)
    try:
        for start in range(0, entries, 1000):
            pipe = client.pipeline(transaction=False)
            for i in range(start, min(entries, start + 1000)):
                pipe.xadd(key, {"field": "value", "n": i})
            pipe.execute()
    finally:
        client.close()


def consume(port: int, key: str, entries: int, count: int = 10) -> float:
    """Entries/s of 50 consumers of one group, each looping XREADGROUP COUNT 10 then XACK of
    what it got, until the stream's entries are all acknowledged."""
    prefill(port, key, entries)
    setup = redis.Redis(port=port)
    setup.xgroup_create(key, "g", id="0")
    setup.close()

    async def run() -> float:
        done = 0
        finished = asyncio.Event()

        async def consumer(i: int) -> None:
            nonlocal done
            client = aioredis.Redis(port=port)
            try:
                while not finished.is_set():
                    got = await client.xreadgroup("g", f"c{i}", {key: ">"}, count=count)
                    ids = [eid for _s, batch in got for eid, _f in batch]
                    if not ids:
                        finished.set()
                        return
                    await client.xack(key, "g", *ids)
                    done += len(ids)
            finally:
                await client.aclose()

        started = time.perf_counter()
        await asyncio.gather(*(consumer(i) for i in range(CLIENTS)))
        return done / (time.perf_counter() - started)

    return asyncio.run(run())


class RateWriter:
    """A background writer of `rate` XADD/s to one node (pipelined in 10 ms slices)."""

    def __init__(self, port: int, rate: int, key: str = "load") -> None:
        self.port, self.rate, self.key = port, rate, key
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RateWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        client = redis.Redis(port=self.port)
        per_slice = max(1, self.rate // 100)
        next_at = time.perf_counter()
        while not self._stop.is_set():
            pipe = client.pipeline(transaction=False)
            for _ in range(per_slice):
                pipe.xadd(self.key, {"f": "v"}, maxlen=10000, approximate=True)
            pipe.execute()
            self.sent += per_slice
            next_at += 0.01
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        client.close()


def replication_latency(src: int, dst: int, samples: int) -> list[float]:
    """Seconds from XADD acknowledged... sent in region `src` until a blocked XREAD in `dst`
    returns it."""
    writer = redis.Redis(port=src)
    reader = redis.Redis(port=dst)
    out: list[float] = []
    try:
        for i in range(samples):
            result: list[float] = []
            key = f"probe:{i}"

            def block(key: str = key, result: list[float] = result) -> None:
                reply = reader.xread({key: "$"}, block=5000)
                if reply:
                    result.append(time.perf_counter())

            t = threading.Thread(target=block)
            t.start()
            time.sleep(0.02)  # the XREAD is blocked by now
            sent = time.perf_counter()
            writer.xadd(key, {"i": i})
            t.join()
            if result:
                out.append(result[0] - sent)
    finally:
        writer.close()
        reader.close()
    return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
            total += (int(parts[11]) + int(parts[12])) / tick
    return total


def topology_pids(topo: LocalTopology) -> list[int]:
    pids = [os.getpid()]  # the mirrors run as threads of this process
    pids += [p.pid for p in topo._procs.values()]
    pids += [b._proc.pid for b in topo.brokers.values() if b._proc is not None]
    return pids


def idle_cpu(topo: LocalTopology, window: float) -> float:
    """Percent of one core used by every process of an idle topology over `window` seconds."""
    pids = topology_pids(topo)
    time.sleep(min(5.0, window))  # past the idle switch of the fetch waits
    before, t0 = cpu_seconds(pids), time.monotonic()
    time.sleep(window)
    return 100 * (cpu_seconds(pids) - before) / (time.monotonic() - t0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- the run ------------------------------------------------------------------------------------


@dataclass
class Plan:
    rounds: int = 3
    requests: int = 20000
    consume_entries: int = 20000
    regions: tuple[int, ...] = (1, 2, 3)
    latency_samples: int = 200
    latency_rates: tuple[int, ...] = (1000, 10000)
    idle_window: float = 10.0


def run(plan: Plan, say: Callable[[str], None]) -> tuple[Figures, dict[str, object]]:
    figures = Figures()
    extra: dict[str, object] = {}
    for round_no in range(1, plan.rounds + 1):
        for durable, name in ((True, "redis fsync always"), (False, "redis no persistence")):
            with redis_server(durable) as port:
                for p in (1, 16):
                    rps = redis_benchmark(port, plan.requests, p, f"xadd:{round_no}:{p}")
                    figures.add(f"XADD c50 P{p}", name, rps)
                    say(f"round {round_no}: {name}: XADD P{p} {rps:,.0f}/s")
                eps = consume(port, f"consume:{round_no}", plan.consume_entries)
                figures.add("XREADGROUP+XACK c50", name, eps)
                say(f"round {round_no}: {name}: consume {eps:,.0f} entries/s")
        for regions in plan.regions:
            name = f"streams {regions} region{'s' if regions > 1 else ''}"
            with LocalTopology(regions=regions, manual_sync=False) as topo:
                port = topo.ports[1]
                for p in (1, 16):
                    rps = redis_benchmark(port, plan.requests, p, f"xadd:{round_no}:{p}")
                    figures.add(f"XADD c50 P{p}", name, rps)
                    say(f"round {round_no}: {name}: XADD P{p} {rps:,.0f}/s")
                eps = consume(port, f"consume:{round_no}", plan.consume_entries)
                figures.add("XREADGROUP+XACK c50", name, eps)
                say(f"round {round_no}: {name}: consume {eps:,.0f} entries/s")
                if round_no == 1 and regions == max(plan.regions):
                    extra.update(topology_extras(topo, plan, say))
    return figures, extra


def topology_extras(
    topo: LocalTopology, plan: Plan, say: Callable[[str], None]
) -> dict[str, object]:
    out: dict[str, object] = {}
    out["idle_cpu"] = idle_cpu(topo, plan.idle_window)
    say(f"idle topology: {out['idle_cpu']:.1f} % of one core")
    if topo.n < 2:
        return out
    for rate in plan.latency_rates:
        with RateWriter(topo.ports[1], rate) as load:
            started = time.monotonic()
            lat = replication_latency(topo.ports[1], topo.ports[2], plan.latency_samples)
            achieved = load.sent / (time.monotonic() - started)
        out[f"latency@{rate}"] = (lat, achieved)
        if lat:
            say(
                f"replication r1->r2 under {achieved:,.0f} XADD/s: p50 "
                f"{1000 * percentile(lat, 0.5):.1f} ms p99 {1000 * percentile(lat, 0.99):.1f} ms"
            )
    return out


def markdown(figures: Figures, extra: dict[str, object], plan: Plan, machine: str) -> str:
    systems = ["redis fsync always", "redis no persistence"] + [
        f"streams {r} region{'s' if r > 1 else ''}" for r in plan.regions
    ]
    lines = [
        "## Throughput next to Redis (bench/throughput.py: `python -m bench`)",
        "",
        machine,
        "",
        f"{plan.rounds} rounds alternating redis-server and the embedded topology; min / median /"
        " max per figure; ratio = our median / the median of redis-server with `appendfsync "
        "always` (the durable anchor). XADD: `redis-benchmark -c 50 -n "
        f"{plan.requests}`; consumption: 50 asyncio clients looping XREADGROUP COUNT 10 + XACK "
        f"over {plan.consume_entries} entries. Streams figures are for region r1 with the others"
        " replicating.",
        "",
        "| figure | system | min | median | max | ratio to durable Redis |",
        "|---|---|---|---|---|---|",
    ]
    for figure in ("XADD c50 P1", "XADD c50 P16", "XREADGROUP+XACK c50"):
        anchor = figures.summary(figure, "redis fsync always")
        for system in systems:
            s = figures.summary(figure, system)
            if s is None:
                continue
            ratio = f"{s[1] / anchor[1]:.2f}" if anchor and anchor[1] else "-"
            lines.append(
                f"| {figure} | {system} | {s[0]:,.0f} | {s[1]:,.0f} | {s[2]:,.0f} | {ratio} |"
            )
    lines.append("")
    if "idle_cpu" in extra:
        lines.append(
            f"Idle {max(plan.regions)}-region topology (brokers, nodes, mirrors): "
            f"**{extra['idle_cpu']:.1f} % of one core** in total."
        )
    for rate in plan.latency_rates:
        found = extra.get(f"latency@{rate}")
        if not found:
            continue
        assert isinstance(found, tuple)
        lat: list[float] = found[0]
        achieved: float = found[1]
        if lat:
            lines.append(
                f"Replication latency r1 -> r2 (XADD sent in r1 until a blocked XREAD in r2 "
                f"returns it, {len(lat)} samples) under {achieved:,.0f} XADD/s on r1 "
                f"(asked {rate:,}): p50 {1000 * percentile(lat, 0.5):.1f} ms, p99 "
                f"{1000 * percentile(lat, 0.99):.1f} ms, max {1000 * max(lat):.1f} ms."
            )
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str, name: str = "throughput") -> None:
    """Replace one harness's section of the benchmarks page (other sections stay)."""
    begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{begin}\n{section}{end}\n"
    if begin in text and end in text:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end + "\n")
        text = head + block + tail
    else:
        title, _, body = text.partition("\n")
        text = f"{title}\n\n{block}{body}"
    path.write_text(text)
