"""The loads and servers of `python -m bench` (the run itself is bench/shards.py): what users do to
a database, many clients at once and pipelines, measured the same way on redis-server and on ours.

- `redis_server`: Debian's redis-server with `appendonly yes, appendfsync always` (durable: the
  anchor of group commit, which also replies only once a write is on disk) or without
  persistence, standalone or as one master of a Redis Cluster (bench/cluster.py);
- `xadd_benchmark_command` / `run_benchmarks`: `redis-benchmark -c 50 -r 100000` XADD on random
  keys at a pipeline depth, with `--cluster` against several nodes, or one run per shard with
  keys tagged for it (`shard_tags`), the runs' requests over the longest run;
- `consume`: 50 asyncio clients looping XREADGROUP COUNT 10 + XACK over one stream;
- `RateWriter` + `replication_latency`: a rate-limited writer loads region r1 while the time from
  an XADD in r1 to a blocked XREAD in r2 returning it is sampled;
- `wait_replicated`: how long the other regions take to apply everything r1 wrote (a client-side
  rate alone overstates a multi-region figure when replication trails).

`write_section` replaces one harness's section of docs/benchmarks.md (every bench uses it).
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis
import redis.asyncio as aioredis

from streams.slots import shard_of
from topology.local import LocalTopology
from topology.ports import free_port, wait_for_port

CLIENTS = 50
KEYSPACE = 100_000
"""`redis-benchmark -r`: XADDs go to random keys among this many, so every shard gets its share."""


# --- redis-server ---------------------------------------------------------------------------


@contextlib.contextmanager
def redis_server(durable: bool, cluster: bool = False, port: int | None = None) -> Iterator[int]:
    """A redis-server on `port` (a free one when None): `durable` = AOF with fsync on every
    write; `cluster` = `cluster-enabled yes` (its nodes.conf in the server's own directory)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("bench: redis-server is not installed (apt-get install redis-server)")
    port = free_port() if port is None else port
    workdir = tempfile.mkdtemp(prefix="bench-redis-")
    persistence = (
        ["--appendonly", "yes", "--appendfsync", "always"] if durable else ["--appendonly", "no"]
    )
    clustering = ["--cluster-enabled", "yes"] if cluster else []
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir]
        + persistence
        + clustering,
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


def xadd_benchmark_command(
    port: int,
    requests: int,
    pipeline: int,
    cluster: bool = False,
    clients: int = CLIENTS,
    tag: str | None = None,
) -> list[str]:
    """`redis-benchmark -c 50 -r 100000 -P pipeline XADD key:__rand_int__ * field value`.

    With `cluster`, `--cluster` and `{tag}` in the key: redis-benchmark replaces `{tag}` by the
    hash tag of one slot of the node each client talks to, so no request meets MOVED (without a
    tag it would send keys to nodes that do not own them), but every key a node gets is in that
    one slot: one shard of each node. With `tag`, the keys carry that hash tag (`shard_tags`:
    the keys of one shard). Without either the key has no tag, or every key would hash to the
    slot of the word `tag`."""
    key = "key:{tag}:__rand_int__" if cluster else "key:__rand_int__"
    if tag is not None:
        key = f"key:{{{tag}}}:__rand_int__"
    return [
        "redis-benchmark",
        *(["--cluster"] if cluster else []),
        "-p", str(port),
        "-c", str(clients),
        "-n", str(requests),
        "-r", str(KEYSPACE),
        "-P", str(pipeline),
        "--csv",
        "XADD", key, "*", "field", "value",
    ]  # fmt: skip


def run_benchmarks(commands: list[list[str]]) -> float:
    """requests/s of redis-benchmark commands run at once: all their requests over the longest
    run, each run's time from its own figure (requests / its rate), so one command gives
    exactly what redis-benchmark reports. redis-benchmark exits on an error reply, so a figure
    means every request succeeded."""
    procs = [
        subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in commands
    ]
    requests = [int(c[c.index("-n") + 1]) for c in commands]
    try:
        outs = [
            p.communicate(timeout=max(600, n // 100)) for p, n in zip(procs, requests, strict=True)
        ]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    durations = []
    for proc, (stdout, stderr), n in zip(procs, outs, requests, strict=True):
        if proc.returncode != 0:
            raise RuntimeError(f"redis-benchmark failed ({proc.returncode}): {stderr[-2000:]}")
        durations.append(n / benchmark_rate(stdout, stderr))
    return sum(requests) / max(durations)


def benchmark_rate(stdout: str, stderr: str = "") -> float:
    """The rps cell of redis-benchmark's --csv line for XADD."""
    for line in stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells and cells[0].startswith("XADD"):
            return float(cells[1])
    raise RuntimeError(f"redis-benchmark gave no figure: {stdout!r} {stderr!r}")


def shard_tags(shards: int) -> list[str]:
    """A short hash tag per shard whose slot that shard owns: keys `key:{tag}:...` of the tag of
    shard s all live in shard s."""
    tags: dict[int, str] = {}
    i = 0
    while len(tags) < shards:
        tag = f"s{i}"
        tags.setdefault(shard_of(tag.encode(), shards), tag)
        i += 1
    return [tags[s] for s in range(shards)]


def split(total: int, parts: int) -> list[int]:
    """`total` in `parts` nearly equal whole parts (the first ones one larger)."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


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
    """Seconds from an XADD sent in region `src` until a blocked XREAD in `dst` returns it."""
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


def own_ops(topo: LocalTopology, region: int, origin: int = 1) -> int:
    """Ops of region `origin` that region `region` applied (summed over its shards and nodes)."""
    return topo.vector(region).get(topo.names[origin], 0)


def wait_replicated(topo: LocalTopology, origin: int = 1, timeout: float = 600.0) -> float:
    """Seconds until every other region applied every op region `origin` committed so far."""
    started = time.monotonic()
    target = own_ops(topo, origin, origin)
    others = [i for i in sorted(topo.names) if i != origin]
    while True:
        behind = {i: own_ops(topo, i, origin) for i in others}
        if all(applied >= target for applied in behind.values()):
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError(
                f"after {timeout:.0f} s the regions applied {behind} of {target} ops of "
                f"{topo.names[origin]}"
            )
        time.sleep(0.02)


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of these processes (live ones; /proc)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
            total += (int(parts[11]) + int(parts[12])) / tick
    return total


def topology_processes(topo: LocalTopology) -> dict[str, int]:
    """Label -> pid of every node and broker process of a topology (the mirrors are threads of
    this process). Reads LocalTopology's and EmbeddedBroker's private handles: they have no
    public pid."""
    out: dict[str, int] = {}
    for (region, node), proc in sorted(topo._procs.items()):
        several = len(topo.node_ports[region]) > 1
        out[f"node {topo.names[region]}" + (f" n{node}" if several else "")] = proc.pid
    for region, broker in sorted(topo.brokers.items()):
        if broker._proc is not None:
            out[f"broker {topo.names[region]}"] = broker._proc.pid
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One run's figure, its round, and how busy the machine was: the 1-minute load average
    before the run and the cores kept busy outside this benchmark's processes during it."""

    round: int
    value: float
    load: float
    others: float | None = None


@dataclass
class Figures:
    """Samples per (figure, system) across rounds."""

    samples: dict[tuple[str, str], list[Sample]] = field(default_factory=dict)

    def add(self, figure: str, system: str, sample: Sample) -> None:
        self.samples.setdefault((figure, system), []).append(sample)

    def values(self, figure: str, system: str) -> list[float]:
        return [s.value for s in self.samples.get((figure, system), [])]

    def summary(self, figure: str, system: str) -> tuple[float, float, float] | None:
        return spread(self.values(figure, system))

    def ratios(
        self, figure: str, system: str, anchor: str, anchor_figure: str | None = None
    ) -> tuple[float, float, float] | None:
        """min / median / max over rounds of this system's figure over the anchor's (its
        `anchor_figure`, by default the same figure) of the same round: both ran in that round,
        under the same conditions."""
        theirs = {s.round: s.value for s in self.samples.get((anchor_figure or figure, anchor), [])}
        return spread(
            [
                s.value / theirs[s.round]
                for s in self.samples.get((figure, system), [])
                if theirs.get(s.round)
            ]
        )


def spread(values: list[float]) -> tuple[float, float, float] | None:
    """(min, median, max), or None without values."""
    if not values:
        return None
    return min(values), statistics.median(values), max(values)


def write_section(
    path: Path, section: str, name: str = "throughput", *, at_end: bool = False
) -> None:
    """Replace one harness's section of the benchmarks page (other sections stay); a new
    section goes under the title, or at the end of the page (`at_end`)."""
    begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{begin}\n{section}{end}\n"
    if begin in text and end in text:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end + "\n")
        text = head + block + tail
    elif at_end:
        text = text.rstrip("\n") + "\n\n" + block
    else:
        title, _, body = text.partition("\n")
        text = f"{title}\n\n{block}{body}"
    path.write_text(text)
