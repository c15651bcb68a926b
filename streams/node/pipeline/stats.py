"""What the node counts about the requests it serves, as Redis 7.0 counts it: the one place.

The request pipeline (`streams.node.pipeline.dispatch`) reports every request once, after it
answered, through `Stats.record` (and EXEC each queued command it runs); everything INFO
commandstats / errorstats / latencystats / stats, SLOWLOG and LATENCY say is derived from that one
call, so the counting cannot drift apart between places. Why Redis's rules and names: monitoring
built for Redis (redis_exporter, dashboards, `redis-cli --stat`) reads exactly these fields.

Redis's rules kept here:
- A request is `EXECUTED` (a call: `calls`, `usec`, `total_commands_processed`; an error reply is a
  `failed_calls`), `REJECTED` before it ran (wrong arity, NOAUTH, MOVED, refused in MULTI:
  `rejected_calls`), `QUEUED` in MULTI (nothing), or `UNKNOWN` (no such command: only errorstats).
- Every error reply counts in errorstats by its code (the first word) and in `total_error_replies`;
  at most 128 codes are tracked, then errorstats stop until CONFIG RESETSTAT, as in Redis.
- A blocked command counts once, when it answers, with the time it ran (not the time it waited).
- Durations go into a per-command histogram with HdrHistogram's layout at 2 significant figures
  (1 ns to 1 s, as Redis's), so the percentiles and LATENCY HISTOGRAM buckets read as Redis's.

Counting costs two clock reads and a few dict updates per request (docs/benchmarks.md has the
measured P16 cost).
"""

from __future__ import annotations

import resource
import time
from collections import deque
from collections.abc import Iterator

from streams.commands.base import Command
from streams.errors import CommandError
from streams.node.pipeline.clients import Client
from streams.node.pipeline.latency import LatencyMonitor
from streams.node.pipeline.slowlog import SlowLog
from streams.reply import Map, Reply
from streams.resp.server import Traffic

EXECUTED, REJECTED, QUEUED, UNKNOWN = 0, 1, 2, 3
"""What became of a request (`Stats.record`)."""

MAX_ERROR_CODES = 128
"""Redis's ERROR_STATS_NUMBER: more distinct error codes than this switch errorstats off."""

HISTOGRAM_MAX_NS = 1_000_000_000
"""Redis's LATENCY_HISTOGRAM_MAX_VALUE: longer calls count as one second."""

RATE_SAMPLES = 16
"""Redis's STATS_METRIC_SAMPLES: the instantaneous rates average over the last 16 samples,
taken every 100 ms (`Stats.sample`, from the node's housekeeping)."""


def bucket_value(ns: int) -> int:
    """`ns` within the histogram's range (1 ns to 1 s), as Redis clamps it."""
    return 1 if ns < 1 else min(ns, HISTOGRAM_MAX_NS)


def bucket(ns: int) -> int:
    """The HdrHistogram counts index of `ns` (lowest value 1, 2 significant figures: 256
    sub-buckets, half of them per power of two above 255)."""
    ns = bucket_value(ns)
    shift = (ns | 255).bit_length() - 8
    return (shift << 7) + (ns >> shift)


def bucket_range(index: int) -> tuple[int, int]:
    """The lowest and highest value (ns) that `bucket` files under `index`."""
    if index < 256:
        return index, index
    shift = (index >> 7) - 1
    low = (index - (shift << 7)) << shift
    return low, low + (1 << shift) - 1


class Figures:
    """One command's counters (a row of INFO commandstats) and its latency histogram."""

    __slots__ = ("calls", "failed", "histogram", "ns", "rejected")

    def __init__(self) -> None:
        self.calls = 0
        self.ns = 0
        self.rejected = 0
        self.failed = 0
        self.histogram: dict[int, int] = {}
        """HdrHistogram counts index -> count (`bucket`)."""

    def percentile(self, p: float) -> int:
        """hdr_value_at_percentile: the highest value equivalent to the one at `p` (0: the lowest
        equivalent value of the smallest)."""
        total = sum(self.histogram.values())
        if total == 0:
            return 0
        wanted = max(1, int(min(p, 100.0) / 100 * total + 0.5))
        seen = 0
        for index in sorted(self.histogram):
            seen += self.histogram[index]
            if seen >= wanted:
                low, high = bucket_range(index)
                return low if p == 0 else high
        return 0  # pragma: no cover (seen reaches total)

    def cumulative(self) -> Iterator[tuple[int, int]]:
        """LATENCY HISTOGRAM's buckets: for 1024 ns and each power of two above, the bucket's
        highest equivalent value in usec and how many calls took at most that long (a bucket is
        given only when the count grew), as Redis's fillCommandCDF walks the histogram."""
        counts = sorted(self.histogram.items())
        total = sum(c for _, c in counts)
        level, seen, i, previous = 1024, 0, 0, 0
        while previous < total:
            top = bucket(level)
            while i < len(counts) and counts[i][0] <= top:
                seen += counts[i][1]
                i += 1
            if seen > previous:
                yield bucket_range(top)[1] // 1000, seen
            previous = seen
            level *= 2


class Stats:
    """Every counter INFO reports about requests, the slow log and the latency monitor.

    CONFIG pushes its values here (`configure`), so a request reads plain attributes."""

    def __init__(self) -> None:
        self.traffic = Traffic()
        """Bytes and socket reads / writes, counted by the RESP server."""
        self.slowlog = SlowLog()
        self.latency = LatencyMonitor()
        self.tracking = True
        """latency-tracking: per-command histograms on."""
        self.percentiles: tuple[float, ...] = (50.0, 99.0, 99.9)
        self.slower_than_ns = 10_000_000
        """slowlog-log-slower-than in ns (negative: the slow log is off)."""
        self.threshold_ns = 0
        """latency-monitor-threshold in ns (0: the latency monitor is off)."""
        self.alert_ns = self.slower_than_ns
        """The shortest run time the slow log or the latency monitor wants to hear of (one
        comparison per request)."""
        self.connections = 0
        self.processed = 0
        self.commands: dict[str, Figures] = {}
        self.errors: dict[str, int] = {}
        self.errors_enabled = True
        self.error_replies = 0
        self.samples: deque[tuple[float, int, int, int]] = deque(maxlen=RATE_SAMPLES)
        """(monotonic time, commands, bytes in, bytes out) for the instantaneous rates."""

    def configure(self, values: dict[str, str]) -> None:
        """Take the CONFIG parameters that shape counting (`streams.node.pipeline.settings`)."""
        self.tracking = values["latency-tracking"] == "yes"
        percentiles = values["latency-tracking-info-percentiles"].split()
        self.percentiles = tuple(float(p) for p in percentiles)
        slower_than = int(values["slowlog-log-slower-than"])
        self.slower_than_ns = slower_than * 1000 if slower_than >= 0 else -1
        self.slowlog.resize(int(values["slowlog-max-len"]))
        self.threshold_ns = int(values["latency-monitor-threshold"]) * 1_000_000
        wanted = [t for t in (self.slower_than_ns, self.threshold_ns or -1) if t >= 0]
        self.alert_ns = min(wanted) if wanted else 1 << 62

    def reset(self) -> None:
        """CONFIG RESETSTAT: Redis's resetServerStats and resetCommandTableStats, error stats."""
        self.connections = 0
        self.processed = 0
        self.commands.clear()
        self.errors.clear()
        self.errors_enabled = True
        self.error_replies = 0
        self.traffic.reset()
        self.samples.clear()

    def sample(self) -> None:
        """Take a sample for INFO's instantaneous_* rates (Redis: trackInstantaneousMetric in
        serverCron, every 100 ms)."""
        t = self.traffic
        self.samples.append((time.monotonic(), self.processed, t.bytes_in, t.bytes_out))

    def rates(self) -> tuple[float, float, float]:
        """Commands per second and KB/s in and out over the samples kept."""
        if len(self.samples) < 2:
            return 0.0, 0.0, 0.0
        (t0, c0, i0, o0), (t1, c1, i1, o1) = self.samples[0], self.samples[-1]
        span = t1 - t0
        if span <= 0:
            return 0.0, 0.0, 0.0
        return (c1 - c0) / span, (i1 - i0) / span / 1024, (o1 - o0) / span / 1024

    def record(
        self,
        client: Client,
        cmd: Command | None,
        what: int,
        args: list[bytes],
        reply: Reply,
        ns: int,
    ) -> None:
        """One request answered: `what` became of it, `ns` it ran for. The hot path."""
        if what == EXECUTED:
            assert cmd is not None
            self.processed += 1
            spec = cmd.spec
            figures = self.commands.get(spec.name)
            if figures is None:
                figures = self.commands[spec.name] = Figures()
            figures.calls += 1
            figures.ns += ns
            if self.tracking:  # `bucket`, inlined: this runs for every request
                value = ns if 0 < ns < HISTOGRAM_MAX_NS else bucket_value(ns)
                shift = (value | 255).bit_length() - 8
                index = (shift << 7) + (value >> shift)
                histogram = figures.histogram
                histogram[index] = histogram.get(index, 0) + 1
            if ns >= self.alert_ns:
                self._slow(client, cmd, args, ns)
            if reply.__class__ is CommandError:  # (EXEC's queued commands count on their own)
                figures.failed += 1
                self.error(reply)
        elif what == QUEUED:
            return
        else:
            if what == REJECTED and cmd is not None:
                name = cmd.spec.name
                figures = self.commands.get(name)
                if figures is None:
                    figures = self.commands[name] = Figures()
                figures.rejected += 1
            if reply.__class__ is CommandError:
                self.error(reply)

    def _slow(self, client: Client, cmd: Command, args: list[bytes], ns: int) -> None:
        """A command ran at least as long as the slow log or the latency monitor asks for."""
        flags = cmd.spec.flags
        if 0 <= self.slower_than_ns <= ns and "skip_slowlog" not in flags:
            self.slowlog.push(client, args, ns // 1000)
        if self.threshold_ns and ns >= self.threshold_ns:
            self.latency.add("fast-command" if "fast" in flags else "command", ns)

    def error(self, reply: Reply) -> None:
        """An error reply was sent: errorstats and total_error_replies."""
        assert isinstance(reply, CommandError)
        self.error_replies += 1
        if not self.errors_enabled:
            return
        code = reply.code
        count = self.errors.get(code)
        if count is None and len(self.errors) >= MAX_ERROR_CODES:
            self.errors_enabled = False  # as Redis: too many distinct codes, a bug or an attack
            self.errors.clear()
            return
        self.errors[code] = (count or 0) + 1

    def histograms(self, names: list[bytes]) -> Reply:
        """LATENCY HISTOGRAM [command ...]: every command's with calls (none named), or those
        named (a container: its subcommands' too), as Redis's fillCommandCDF gives them."""
        if names:
            chosen: list[str] = []
            for raw in names:
                name = raw.lower().decode("utf-8", "replace")
                sub = name + "|"
                chosen += [n for n in sorted(self.commands) if n == name or n.startswith(sub)]
        else:
            chosen = sorted(self.commands)
        return Map(
            tuple(
                (name.encode(), self._histogram(self.commands[name]))
                for name in chosen
                if self.commands[name].histogram
            )
        )

    @staticmethod
    def _histogram(f: Figures) -> Reply:
        return Map(
            (
                (b"calls", sum(f.histogram.values())),
                (b"histogram_usec", Map(tuple(f.cumulative()))),
            )
        )

    # --- INFO -------------------------------------------------------------------------------

    def commandstats(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for name, f in sorted(self.commands.items()):
            usec = f.ns // 1000
            per_call = usec / f.calls if f.calls else 0.0
            out[f"cmdstat_{name}"] = (
                f"calls={f.calls},usec={usec},usec_per_call={per_call:.2f},"
                f"rejected_calls={f.rejected},failed_calls={f.failed}"
            )
        return out

    def errorstats(self) -> dict[str, object]:
        return {f"errorstat_{code}": f"count={n}" for code, n in sorted(self.errors.items())}

    def latencystats(self) -> dict[str, object]:
        labels = [f"p{percentile_text(p)}" for p in self.percentiles]
        out: dict[str, object] = {}
        for name, f in sorted(self.commands.items()):
            if not f.histogram:
                continue
            out[f"latency_percentiles_usec_{name}"] = ",".join(
                f"{label}={f.percentile(p) / 1000:.3f}"
                for label, p in zip(labels, self.percentiles, strict=True)
            )
        return out

    def stats(self) -> dict[str, object]:
        """The request counters of INFO stats (the node adds the others)."""
        t = self.traffic
        ops, kbps_in, kbps_out = self.rates()
        return {
            "total_connections_received": self.connections,
            "total_commands_processed": self.processed,
            "instantaneous_ops_per_sec": round(ops),
            "total_net_input_bytes": t.bytes_in,
            "total_net_output_bytes": t.bytes_out,
            "instantaneous_input_kbps": f"{kbps_in:.2f}",
            "instantaneous_output_kbps": f"{kbps_out:.2f}",
            "total_error_replies": self.error_replies,
            "total_reads_processed": t.reads,
            "total_writes_processed": t.writes,
        }


def percentile_text(p: float) -> str:
    """Redis's `%f` trimmed of trailing zeros (trimDoubleString): 50, 99.9, 33.3333."""
    return f"{p:f}".rstrip("0").rstrip(".")


def cpu_section() -> dict[str, object]:
    """INFO cpu: the process's and its children's CPU seconds, and the event loop thread's (the
    one that runs every command: Redis's main thread). Called on that thread."""
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    fields: dict[str, object] = {
        "used_cpu_sys": f"{cpu.ru_stime:.6f}",
        "used_cpu_user": f"{cpu.ru_utime:.6f}",
        "used_cpu_sys_children": f"{children.ru_stime:.6f}",
        "used_cpu_user_children": f"{children.ru_utime:.6f}",
    }
    thread = getattr(resource, "RUSAGE_THREAD", None)
    if thread is not None:  # Linux
        main = resource.getrusage(thread)
        fields["used_cpu_sys_main_thread"] = f"{main.ru_stime:.6f}"
        fields["used_cpu_user_main_thread"] = f"{main.ru_utime:.6f}"
    return fields
