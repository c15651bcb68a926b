"""LATENCY: Redis 7.0's latency monitor, for the events a node has (`command`, `fast-command`).

When `latency-monitor-threshold` (ms) is set, a command that ran at least that long adds a sample
to its event (`streams.node.pipeline.stats.Stats.record`): one sample per event and second (the
highest), the last 160 kept, and the all-time highest. LATENCY LATEST / HISTORY / RESET / DOCTOR /
HELP answer as Redis does (DOCTOR's texts for these two events are Redis's, checked against
redis-server); LATENCY HISTOGRAM comes from the per-command histograms of `Stats`. LATENCY
GRAPH (an ASCII sparkline) is not drawn: it answers Redis's error when there are no samples and
points to HISTORY otherwise. Why: redis_exporter reads LATENCY LATEST (`redis_latency_spike_*`)
and `redis-cli --latency-history`-style tooling reads HISTORY.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from streams import errors
from streams.errors import CommandError, c_text
from streams.reply import Reply, Status

SERIES_LEN = 160

LATENCY_HELP = [
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the "
    "specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
]


@dataclass
class Series:
    samples: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=SERIES_LEN))
    """(unix second, ms), oldest first."""
    max: int = 0


class LatencyMonitor:
    def __init__(self) -> None:
        self.events: dict[str, Series] = {}

    def add(self, event: str, ns: int) -> None:
        """Redis's latencyAddSample: one sample per second, the highest of that second."""
        ms = ns // 1_000_000
        series = self.events.get(event)
        if series is None:
            series = self.events[event] = Series()
        series.max = max(series.max, ms)
        now = int(time.time())
        samples = series.samples
        if samples and samples[-1][0] == now:
            if ms > samples[-1][1]:
                samples[-1] = (now, ms)
            return
        samples.append((now, ms))


def latency(
    args: list[bytes],
    monitor: LatencyMonitor,
    histograms: Callable[[list[bytes]], Reply],
    slower_than_us: int,
    threshold_ms: int,
) -> Reply:
    """LATENCY's subcommands (arities are checked by the pipeline)."""
    sub = args[1].lower()
    events = monitor.events
    if sub == b"latest":
        return [
            [name.encode(), s.samples[-1][0], s.samples[-1][1], s.max]
            for name, s in events.items()
            if s.samples
        ]
    if sub == b"history":
        series = events.get(args[2].decode("utf-8", "replace"))
        return [] if series is None else [[t, ms] for t, ms in series.samples]
    if sub == b"reset":
        names = list(events) if len(args) == 2 else [a.decode("utf-8", "replace") for a in args[2:]]
        return sum(1 for n in names if events.pop(n, None) is not None)
    if sub == b"histogram":
        return histograms(args[2:])
    if sub == b"graph":
        if args[2].decode("utf-8", "replace") not in events:
            raise CommandError(errors.LATENCY_NO_SAMPLES_FMT.format(event=c_text(args[2])))
        raise CommandError(errors.LATENCY_GRAPH_UNSUPPORTED)
    if sub == b"doctor":
        return doctor(events, slower_than_us, threshold_ms).encode()
    return [Status(line) for line in LATENCY_HELP]


_DISABLED = (
    "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. "
    'You may use "CONFIG SET latency-monitor-threshold <milliseconds>." in order to enable it. '
    "If we weren't in a deep space mission I'd suggest to take a look at "
    "https://redis.io/topics/latency-monitor.\n"
)
_CALM = (
    "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the "
    "slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think "
    "things over.\n"
)
_OBSERVED = (
    "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about "
    "it, do you Dave?\n\n"
)
_ENABLE_SLOWLOG = (
    "- There are latency issues with potentially slow commands you are using. Try to enable the "
    "Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {us}'. If the "
    "Slow log is disabled Redis is not able to log slow commands execution for you.\n"
)
_TUNE_SLOWLOG = (
    "- Your current Slow Log configuration only logs events that are slower than your configured "
    "latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {us}'.\n"
)
_INSPECT_SLOWLOG = (
    "- Check your Slow Log to understand what are the commands you are running which are too "
    "slow to execute. Please check https://redis.io/commands/slowlog for more information.\n"
)
_SCHEDULER = (
    "- The system is slow to execute Redis code paths not containing system calls. This usually "
    "means the system does not provide Redis CPU time to run for long periods. You should try "
    "to:\n"
    "  1) Lower the system load.\n"
    "  2) Use a computer / VM just for Redis if you are running other software in the same "
    "system.\n"
    '  3) Check if you have a "noisy neighbour" problem.\n'
    "  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your "
    "system.\n"
    "  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you "
    "are using Jemalloc. However this may create fragmentation problems.\n"
)
_LARGE_OBJECTS = (
    "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking "
    "operation. If you have very large objects that are often deleted, expired, or evicted, try "
    "to fragment those objects into multiple smaller objects.\n"
)


def doctor(events: dict[str, Series], slower_than_us: int, threshold_ms: int) -> str:
    """Redis's createLatencyReport for the `command` and `fast-command` events."""
    if not events and threshold_ms == 0:
        return _DISABLED
    report = ""
    enable = tune = inspect = scheduler = large = False
    now = int(time.time())
    for number, (name, series) in enumerate(events.items(), start=1):
        if number == 1:
            report += _OBSERVED
        values = [ms for _, ms in series.samples]
        count = len(values)
        avg = sum(values) // count if count else 0
        mad = sum(abs(avg - v) for v in values) // count if count else 0
        period = max(1, now - min(t for t, _ in series.samples)) if count else 0
        report += (
            f"{number}. {name}: {count} latency spikes (average {avg}ms, mean deviation {mad}ms, "
            f"period {period / count if count else 0:.2f} sec). Worst all time event "
            f"{series.max}ms.\n"
        )
        if name == "command":
            if slower_than_us < 0:
                enable = True
            elif slower_than_us // 1000 > threshold_ms:
                tune = True
            inspect = large = True
        elif name == "fast-command":
            scheduler = True
    if not events:
        return _CALM
    if not (enable or tune or inspect or scheduler or large):
        return report + (
            "\nWhile there are latency events logged, I'm not able to suggest any easy fix. "
            "Please use the Redis community to get some help, providing this report in your "
            "help request.\n"
        )
    report += "\nI have a few advices for you:\n\n"
    if enable:
        report += _ENABLE_SLOWLOG.format(us=threshold_ms * 1000)
    if tune:
        report += _TUNE_SLOWLOG.format(us=threshold_ms * 1000)
    if inspect:
        report += _INSPECT_SLOWLOG
    if scheduler:
        report += _SCHEDULER
    if large:
        report += _LARGE_OBJECTS
    return report
