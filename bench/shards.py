"""The run of `python -m bench`: XADD throughput of a region as it grows by shards and processes
(DESIGN.md section 13), next to redis-server and a Redis Cluster, in one run, alternating systems.

Systems (`SYSTEMS`; ids for `--only` in brackets):
- redis-server with `appendonly yes, appendfsync always` [redis] (the durable anchor: like our
  group commit it replies once a write is durable) and without persistence [redis-nofsync];
- a 2-master Redis Cluster, same persistence [redis-cluster] (the anchor of several processes);
- one region with S = 1, 2, 4, 8 shards in one node process [s1 s2 s4 s8] (S transactions in
  flight, one core) and S = 4 over 2 node processes (two cores, the Redis Cluster protocol),
  loaded by `redis-benchmark --cluster` [s4n2] as the Redis Cluster is, and by a client per
  shard [s4n2-shards]: redis-benchmark's cluster mode tags every key it sends a node with one
  slot of that node, so it keeps one shard per node busy, half of S = 4 over two;
- three regions writing into r1: S = 1 [r3s1], S = 4 in one process [r3s4], S = 4 over two with
  a client per shard [r3s4n2-shards]; and two regions [r2s1], not in the default run.

Each round runs every chosen system once, the order shifted by one system per round, so a busy
spell of the shared machine does not always fall on the same system. Per system and round:
`redis-benchmark -c 50 -r 100000` XADD at P1 and P16 (bench/throughput.py), sustained (100,000
requests by default: a short burst lets replication trail, which flatters several regions); with
several regions, also the time until r2 and r3 applied everything r1 wrote, and the rate
counting it. Some systems also measure consumption (XREADGROUP + XACK over one stream: one key
lives in one shard, so only one process and S = 1 or 4); in the first round, replication latency
under load, the idle CPU of the whole topology, and a py-spy profile at P16
(bench/shards_profile.py).

Before each run the 1-minute load average is recorded, after waiting for it to fall below
`--max-load` (bench/pipeline.py's `quiet_machine`); during each run, the cores kept busy by
processes outside this benchmark (/proc/stat minus this process tree), which says whether another
engineer's tests shared the run. The load average also counts this benchmark's own previous run
(a sustained run keeps 1-2 cores busy, and the average forgets over minutes), so `--max-others`
is the sharper gate: before each run, wait until the others' cores over 2 s are below it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from bench.cluster import redis_cluster
from bench.pipeline import quiet_machine, tree_cpu_seconds
from bench.shards_profile import ProcessProfile, profile_under_load, py_spy
from bench.throughput import (
    CLIENTS,
    Figures,
    RateWriter,
    Sample,
    consume,
    own_ops,
    percentile,
    redis_server,
    replication_latency,
    run_benchmarks,
    shard_tags,
    split,
    topology_processes,
    wait_replicated,
    xadd_benchmark_command,
)
from streams.cluster.layout import spread
from topology.local import LocalTopology

ANCHOR = "redis fsync always"
CLUSTER_ANCHOR = "redis cluster 2 masters fsync always"
PIPELINES = (1, 16)
PROFILE_PIPELINE = 16
PROFILE_REQUESTS = 100_000_000
"""The profiled load is stopped after the window; this only has to outlast it."""
Say = Callable[[str], None]
FIGURES = ("p1", "p16", "consume", "latency", "idle", "profile")
"""What `--only` can pick besides systems: XADD at P1 / P16 (with the replicated rate and drain
where there are several regions), consumption, and the first round's extras."""


@dataclass(frozen=True)
class System:
    """One thing measured: redis-server, a Redis Cluster, or an embedded topology of `regions`
    regions of `shards` shards over `nodes` node processes each; which extra figures it gets."""

    id: str
    name: str
    kind: str = "streams"  # or "redis", "redis-cluster"
    durable: bool = True
    regions: int = 1
    shards: int = 1
    nodes: int = 1
    extras: frozenset[str] = frozenset()
    default: bool = True
    client: str = "one"
    """How redis-benchmark loads it (`load_commands`): "one" plain run; "cluster", one run with
    `--cluster`, which puts all the keys a node gets in one slot, so one shard per node works;
    "per-shard", a run per shard on the node owning it, keys tagged for that shard, the 50
    clients and the requests split between them, so every shard works."""

    def applies(self, figure: str) -> bool:
        return figure in ("p1", "p16") or figure in self.extras


CLIENT_NAMES = {
    "one": "",
    "cluster": ", redis-benchmark --cluster",
    "per-shard": ", a client per shard",
}
ID_SUFFIX = {"one": "", "cluster": "", "per-shard": "-shards"}


def streams(
    regions: int,
    shards: int,
    nodes: int = 1,
    *extras: str,
    client: str = "one",
    default: bool = True,
) -> System:
    prefix = "" if regions == 1 else f"r{regions}"
    where = f"{nodes} processes" if nodes > 1 else "1 process"
    return System(
        id=f"{prefix}s{shards}" + (f"n{nodes}" if nodes > 1 else "") + ID_SUFFIX[client],
        name=f"streams {regions} region{'s' if regions > 1 else ''}, "
        f"{shards} shard{'s' if shards > 1 else ''} ({where}{CLIENT_NAMES[client]})",
        regions=regions,
        shards=shards,
        nodes=nodes,
        extras=frozenset(extras),
        default=default,
        client=client,
    )


SYSTEMS: tuple[System, ...] = (
    System("redis", ANCHOR, "redis", extras=frozenset({"consume"})),
    System("redis-nofsync", "redis no persistence", "redis", False, extras=frozenset({"consume"})),
    System("redis-cluster", CLUSTER_ANCHOR, "redis-cluster", nodes=2, client="cluster"),
    streams(1, 1, 1, "consume", "profile"),
    streams(1, 2),
    streams(1, 4, 1, "consume", "profile"),
    streams(1, 8),
    streams(1, 4, 2, "idle", client="cluster"),
    streams(1, 4, 2, "profile", client="per-shard"),
    streams(2, 1, 1, "consume", "latency", "idle", default=False),
    streams(3, 1, 1, "consume", "latency", "idle"),
    streams(3, 4, 1, "consume", "latency", "idle"),
    streams(3, 4, 2, "idle", client="per-shard"),
)
BY_ID = {s.id: s for s in SYSTEMS}
DEFAULT_SYSTEMS = tuple(s.id for s in SYSTEMS if s.default)


@dataclass
class Plan:
    rounds: int = 3
    requests: int = 100_000
    consume_entries: int = 20_000
    systems: tuple[str, ...] = DEFAULT_SYSTEMS
    figures: tuple[str, ...] = FIGURES
    latency_samples: int = 200
    latency_rates: tuple[int, ...] = (1000, 10000)
    idle_window: float = 10.0
    profile_seconds: float = 10.0
    max_load: float | None = None
    max_others: float | None = None
    max_wait: float = 1200.0


def pick(only: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`--only s4n2,redis-cluster,p16` -> (systems, figures): named systems (the default ones
    when none is named) and named figures (all when none is named)."""
    tokens = [t.strip() for t in only.split(",") if t.strip()]
    unknown = [t for t in tokens if t not in BY_ID and t not in FIGURES]
    if unknown:
        raise ValueError(
            f"unknown {', '.join(unknown)}: systems are {', '.join(BY_ID)}; "
            f"figures are {', '.join(FIGURES)}"
        )
    systems = tuple(t for t in tokens if t in BY_ID) or DEFAULT_SYSTEMS
    figures = tuple(t for t in tokens if t in FIGURES) or FIGURES
    return systems, figures


@dataclass(frozen=True)
class Latency:
    """Replication latency samples (s) under a writer that achieved `achieved` XADD/s, and the
    1-minute load average before."""

    samples: list[float]
    achieved: float
    load: float


@dataclass(frozen=True)
class Profile:
    """The processes of one system under the profiled load, and the load average before."""

    processes: list[ProcessProfile]
    load: float
    error: str = ""


@dataclass
class Results:
    figures: Figures = field(default_factory=Figures)
    idle: dict[str, float] = field(default_factory=dict)
    latency: dict[tuple[str, int], Latency] = field(default_factory=dict)
    profiles: dict[str, Profile] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """Where a system listens: the port given to redis-benchmark (with `--cluster`, any node)
    and, for ours, the topology."""

    port: int
    topo: LocalTopology | None = None


@contextlib.contextmanager
def serve(system: System) -> Iterator[Target]:
    if system.kind == "redis":
        with redis_server(system.durable) as port:
            yield Target(port)
    elif system.kind == "redis-cluster":
        with redis_cluster(system.nodes, system.durable) as ports:
            yield Target(ports[0])
    else:
        with LocalTopology(
            regions=system.regions, shards=system.shards, nodes=system.nodes, manual_sync=False
        ) as topo:
            yield Target(topo.ports[1], topo)


# --- the machine ------------------------------------------------------------------------------


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine's processes ran since boot (/proc/stat: user, nice, system,
    steal). Interrupt time is left out: it is mostly the loopback traffic of the run itself,
    which no process is charged for."""
    with open("/proc/stat") as f:
        cells = [int(c) for c in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = cells
    return (user + nice + system + steal) / os.sysconf("SC_CLK_TCK")


class Others:
    """Cores kept busy by processes outside this benchmark's process tree since construction
    (the tree: this process with the mirrors' threads, servers, brokers, nodes, and the
    redis-benchmark runs it waited for)."""

    def __init__(self) -> None:
        self._machine, self._ours = machine_busy_seconds(), tree_cpu_seconds(os.getpid())
        self._started = time.monotonic()

    def cores(self) -> float:
        machine = machine_busy_seconds() - self._machine
        ours = tree_cpu_seconds(os.getpid()) - self._ours
        return max(0.0, machine - ours) / (time.monotonic() - self._started)


OTHERS_WINDOW = 2.0
OTHERS_POLL = 10.0


def settle(plan: Plan, say: Say) -> float:
    """Wait for a quiet machine as the plan asks (`max_load`, then `max_others`, each for at most
    `max_wait` seconds); the 1-minute load average it then has."""
    load = quiet_machine(plan.max_load, plan.max_wait)
    if plan.max_others is None:
        return load
    deadline = time.monotonic() + plan.max_wait
    while True:
        others = Others()
        time.sleep(OTHERS_WINDOW)
        busy = others.cores()
        if busy < plan.max_others or time.monotonic() > deadline:
            return os.getloadavg()[0]
        say(f"other processes keep {busy:.2f} cores busy (>= {plan.max_others}): waiting")
        time.sleep(OTHERS_POLL)


def idle_cpu(window: float) -> float:
    """Percent of one core used by this process tree (an idle topology: brokers, nodes, the
    mirrors' threads) over `window` seconds."""
    time.sleep(min(5.0, window))  # past the idle switch of the fetch waits
    before, started = tree_cpu_seconds(os.getpid()), time.monotonic()
    time.sleep(window)
    return 100 * (tree_cpu_seconds(os.getpid()) - before) / (time.monotonic() - started)


# --- the run ----------------------------------------------------------------------------------


def run(plan: Plan, say: Say) -> Results:
    results = Results()
    chosen = [BY_ID[s] for s in plan.systems]
    if "profile" in plan.figures and py_spy() is None:
        results.notes.append("No profile: py-spy is not installed (`pip install py-spy`).")
    for round_no in range(1, plan.rounds + 1):
        shift = (round_no - 1) % len(chosen)
        for system in chosen[shift:] + chosen[:shift]:
            wanted = [f for f in plan.figures if system.applies(f)]
            if round_no > 1:
                wanted = [f for f in wanted if f in ("p1", "p16", "consume")]
            if wanted:
                measure(system, round_no, wanted, plan, results, say)
    return results


def measure(
    system: System, round_no: int, wanted: list[str], plan: Plan, results: Results, say: Say
) -> None:
    """Every wanted figure of one system in one round, on one server or topology."""
    with serve(system) as target:
        for p in PIPELINES:
            if f"p{p}" in wanted:
                xadd(system, target, round_no, p, plan, results.figures, say)
        if "consume" in wanted:
            load = settle(plan, say)
            others = Others()
            eps = consume(target.port, f"consume:{round_no}", plan.consume_entries)
            sample = Sample(round_no, eps, load, others.cores())
            results.figures.add("XREADGROUP+XACK c50", system.name, sample)
            say(f"round {round_no}: {system.name}: consume {eps:,.0f} entries/s (load {load:.2f})")
        if "profile" in wanted and py_spy() is not None and target.topo is not None:
            results.profiles[system.id] = profile(target, system, plan, say)
        if "latency" in wanted and target.topo is not None:
            latency(system, target.topo, plan, results, say)
        if "idle" in wanted:
            results.idle[system.id] = idle_cpu(plan.idle_window)
            say(f"{system.name}: idle {results.idle[system.id]:.1f} % of one core")


def xadd(
    system: System,
    target: Target,
    round_no: int,
    pipeline: int,
    plan: Plan,
    figures: Figures,
    say: Say,
) -> None:
    """One sustained redis-benchmark XADD run; with several regions, then wait until the others
    applied it all: the rate counting that wait is what the database sustains, replication
    included."""
    topo = target.topo
    replicated = topo is not None and topo.n > 1
    load = settle(plan, say)
    others = Others()
    before = own_ops(topo, 1) if topo is not None and replicated else 0
    started = time.monotonic()
    rps = run_benchmarks(load_commands(system, target, plan.requests, pipeline))
    written = time.monotonic() - started
    figure = f"XADD c50 P{pipeline}"
    line = f"round {round_no}: {system.name}: XADD P{pipeline} {rps:,.0f}/s"
    if topo is not None and replicated:
        drain = wait_replicated(topo)
        rate = (own_ops(topo, 1) - before) / (written + drain)
        busy = others.cores()
        figures.add(f"{figure} replicated", system.name, Sample(round_no, rate, load, busy))
        figures.add(f"drain after P{pipeline}", system.name, Sample(round_no, drain, load, busy))
        line += f", replicated {rate:,.0f}/s (drain {drain:.1f} s)"
    figures.add(figure, system.name, Sample(round_no, rps, load, others.cores()))
    say(f"{line} (load {load:.2f})")


def load_commands(system: System, target: Target, requests: int, pipeline: int) -> list[list[str]]:
    """The redis-benchmark runs that load a system (`System.client`), into region r1."""
    if system.client != "per-shard":
        return [xadd_benchmark_command(target.port, requests, pipeline, system.client == "cluster")]
    assert target.topo is not None
    ports = target.topo.node_ports[1]
    owner = {s: node for node, group in enumerate(spread(system.shards, len(ports))) for s in group}
    return [
        xadd_benchmark_command(ports[owner[s]], n, pipeline, clients=c, tag=tag)
        for s, (tag, n, c) in enumerate(
            zip(
                shard_tags(system.shards),
                split(requests, system.shards),
                split(CLIENTS, system.shards),
                strict=True,
            )
        )
    ]


def profile(target: Target, system: System, plan: Plan, say: Say) -> Profile:
    assert target.topo is not None
    processes = topology_processes(target.topo)
    nodes = {k: v for k, v in processes.items() if k.startswith("node ")}
    watched = {k: v for k, v in processes.items() if k not in nodes}
    load = settle(plan, say)
    say(f"{system.name}: py-spy on {len(nodes)} node process(es) at P{PROFILE_PIPELINE} ...")
    commands = load_commands(system, target, PROFILE_REQUESTS, PROFILE_PIPELINE)
    try:
        found = profile_under_load(commands, nodes, watched, plan.profile_seconds)
    except (RuntimeError, subprocess.TimeoutExpired) as e:  # the figures matter more
        say(f"{system.name}: no profile: {e}")
        return Profile([], load, str(e))
    for p in found:
        best = ", ".join(f"{name} {share:.0%}" for name, share in p.top[:3])
        gil = f", GIL held {p.gil:.0%}; {best}" if p.samples else ""
        say(f"  {p.label}: {p.cores:.2f} cores{gil}")
    return Profile(found, load)


def latency(system: System, topo: LocalTopology, plan: Plan, results: Results, say: Say) -> None:
    for rate in plan.latency_rates:
        load = settle(plan, say)
        with RateWriter(topo.ports[1], rate) as writer:
            started = time.monotonic()
            lat = replication_latency(topo.ports[1], topo.ports[2], plan.latency_samples)
            achieved = writer.sent / (time.monotonic() - started)
        results.latency[(system.id, rate)] = Latency(lat, achieved, load)
        if lat:
            say(
                f"{system.name}: replication r1->r2 under {achieved:,.0f} XADD/s: p50 "
                f"{1000 * percentile(lat, 0.5):.1f} ms p99 {1000 * percentile(lat, 0.99):.1f} ms"
            )


# --- the page ---------------------------------------------------------------------------------


RATE_FIGURES = (
    "XADD c50 P1",
    "XADD c50 P1 replicated",
    "XADD c50 P16",
    "XADD c50 P16 replicated",
    "XREADGROUP+XACK c50",
)


def markdown(results: Results, plan: Plan, machine: str) -> str:
    names = [BY_ID[s].name for s in plan.systems]
    cmd = " ".join(xadd_benchmark_command(0, plan.requests, 1)).replace(" -p 0", "")
    cmd = cmd.replace(" --csv", "").replace("-P 1 ", "-P 1|16 ")
    lines = [
        "## Throughput next to Redis (bench/shards.py: `python -m bench`)",
        "",
        machine,
        "",
        f"{plan.rounds} round{'s' if plan.rounds > 1 else ''}, every system once per round in "
        "turn (the order shifted by one each round); min / median / max over rounds. XADD: "
        f"`{cmd}`; against several nodes either `--cluster` with key `key:{{tag}}:__rand_int__` "
        "(redis-benchmark gives each node's keys the hash tag of one of its slots: one shard per "
        "node works) or a client per shard (key `key:{sN}:__rand_int__` with a tag of that shard, "
        "on its node; the 50 clients and the requests split between them). "
        '"replicated": ops written in r1 / the time from the start of the run until every other '
        "region applied all of them. Consumption: 50 asyncio clients looping XREADGROUP COUNT "
        f"10 + XACK over {plan.consume_entries:,} entries of one stream. Ratios: per round, our "
        "figure over the anchor's of the same round; median (min-max) over rounds. Load: the "
        "1-minute load average before each run (min-max); others: cores kept busy during the "
        "run by processes outside the benchmark (max over rounds).",
    ]
    lines += rate_table(results.figures, names)
    lines += drain_table(results.figures, names)
    lines.append("")
    for system_id, pct in results.idle.items():
        lines.append(
            f"Idle {BY_ID[system_id].name} (brokers, nodes, mirrors): "
            f"**{pct:.1f} % of one core** in total."
        )
    for (system_id, rate), found in results.latency.items():
        lat = found.samples
        if lat:
            lines.append(
                f"Replication latency r1 -> r2, {BY_ID[system_id].name} (XADD sent in r1 until "
                f"a blocked XREAD in r2 returns it, {len(lat)} samples) under "
                f"{found.achieved:,.0f} XADD/s on r1 (asked {rate:,}; load {found.load:.2f}): "
                f"p50 {1000 * percentile(lat, 0.5):.1f} ms, p99 "
                f"{1000 * percentile(lat, 0.99):.1f} ms, max {1000 * max(lat):.1f} ms."
            )
    lines += profile_lines(results.profiles, plan)
    lines += results.notes
    return "\n".join(lines) + "\n"


def rate_table(figures: Figures, names: list[str]) -> list[str]:
    rows = []
    for figure in RATE_FIGURES:
        for name in names:
            s = figures.summary(figure, name)
            if s is not None:
                ratios = [_ratio(figures, figure, name, a) for a in (ANCHOR, CLUSTER_ANCHOR)]
                rows.append(
                    f"| {figure} | {name} | {s[0]:,.0f} | {s[1]:,.0f} | {s[2]:,.0f} | "
                    f"{ratios[0]} | {ratios[1]} | {_machine_cells(figures, figure, name)} |"
                )
    if not rows:
        return []
    return [
        "",
        "| figure | system | min | median | max | vs Redis fsync always "
        "| vs Redis Cluster 2 masters | load before | others (cores) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
        *rows,
    ]


def drain_table(figures: Figures, names: list[str]) -> list[str]:
    rows = []
    for name in names:
        found = [figures.summary(f"drain after P{p}", name) for p in PIPELINES]
        if any(found):
            cells = " | ".join(
                "-" if s is None else f"{s[0]:.1f} / {s[1]:.1f} / {s[2]:.1f}" for s in found
            )
            rows.append(f"| {name} | {cells} |")
    if not rows:
        return []
    return [
        "",
        "Replication drain: seconds from the end of the redis-benchmark run in r1 until every "
        "other region had applied every op (min / median / max).",
        "",
        "| system | after P1 | after P16 |",
        "|---|--:|--:|",
        *rows,
    ]


def _ratio(figures: Figures, figure: str, name: str, anchor: str) -> str:
    """`median (min-max)` of our figure over the anchor's, per round (a replicated figure over
    the anchor's plain one: Redis has nothing to replicate)."""
    r = figures.ratios(figure, name, anchor, figure.removesuffix(" replicated"))
    return "-" if r is None else f"{r[1]:.2f} ({r[0]:.2f}-{r[2]:.2f})"


def _machine_cells(figures: Figures, figure: str, name: str) -> str:
    samples = figures.samples[(figure, name)]
    loads = [s.load for s in samples]
    others = [s.others for s in samples if s.others is not None]
    busy = f"{max(others):.2f}" if others else "-"
    return f"{min(loads):.2f}-{max(loads):.2f} | {busy}"


def profile_lines(profiles: dict[str, Profile], plan: Plan) -> list[str]:
    if not profiles:
        return []
    lines = [
        "",
        f"Profiles at P{PROFILE_PIPELINE} (first round; `py-spy record --gil --native`, "
        f"{plan.profile_seconds:.0f} s at 100 Hz on every node process under the same "
        "redis-benchmark load; cores = CPU seconds / wall seconds of each process over the "
        "window; GIL held = samples / (100 x seconds); functions by self time while holding "
        "the GIL (C code counted for the Python function calling it, the cyclic garbage "
        "collector apart), share of the process's samples):",
        "",
    ]
    for system_id, found in profiles.items():
        cpu = ", ".join(f"{p.label} {p.cores:.2f}" for p in found.processes)
        lines.append(f"- {BY_ID[system_id].name} (load {found.load:.2f}): cores busy: {cpu}.")
        if found.error:
            lines.append(f"  - no profile: {found.error}")
        for p in found.processes:
            if p.top:
                best = "; ".join(f"`{name}` {share:.1%}" for name, share in p.top)
                lines.append(f"  - {p.label} (GIL held {p.gil:.0%}, {p.samples} samples): {best}")
    return lines
