"""Where a sharded region's time goes at pipeline 16: py-spy on every node process under the same
`redis-benchmark` load the throughput figures use, and the CPU of every process involved.

The figures say how fast; this says what bounds them. One node process doing all the work at
~100 % of a core means Python CPU (the GIL) bounds it, and its self-time functions say which
code; nodes well below a core with the broker busy point at the broker or at commit waits; and on
a 2-core machine redis-benchmark's own share is taken from the database's.

`py-spy record --gil --native --format raw` writes collapsed stacks (`outer (file:line);...;leaf
(file:line) count`) of the thread holding the GIL at each sample: a node's Python work runs only
there, whatever its threads (asyncio loop, Kafka readers, the writers' executor) wait on, and
py-spy's idle filter alone keeps threads blocked in C (a queue get, librdkafka's poll) as busy.
So samples / (rate x seconds) is the share of the window the GIL was held (near 1: Python CPU
bounds the process). A sample's time is its own to the innermost Python function of its stack
(C called from Python counts for the caller, line numbers dropped), except the interpreter's
cyclic garbage collector, named as such (`GC`): it runs inside whichever allocation crossed the
threshold, so without --native its time lands on arbitrary functions (a constructor, a
generator) and the profile misleads.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.throughput import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
_PREFIX = re.compile(r"^.*/(?:site-packages|python3\.\d+)/")
GC = "GC (the cyclic garbage collector)"
GC_FRAMES = ("gc_collect", "collect_with_callback")
"""CPython 3.11's collector: gc_collect_main (and the functions calling it)."""


@dataclass(frozen=True)
class ProcessProfile:
    """One process under load: cores it kept busy, py-spy samples (the GIL held), the share of
    the window the GIL was held, top self-time functions (function, share of the samples); no
    samples for processes only watched (broker, client)."""

    label: str
    pid: int
    cores: float
    samples: int = 0
    gil: float = 0.0
    top: tuple[tuple[str, float], ...] = ()


def function_name(frame: str) -> str:
    """`handle (/work/main/streams/node/x.py:12)` -> `handle (streams/node/x.py)`: the function,
    its file relative to the repository, site-packages or the standard library, no line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    path = path.removeprefix(f"{ROOT}/")
    path = _PREFIX.sub("", path)
    return f"{name} ({path})" if path else name


def is_python(frame: str) -> bool:
    """A frame of Python code (`f (x.py:3)`, `<module> (<frozen runpy>:1)`), not of C."""
    where = frame.partition(" (")[2].rstrip(")").rsplit(":", 1)[0]
    return where.endswith(".py") or where.startswith("<")


def owner(stack: list[str]) -> str:
    """Whose time a sample is: `GC` when the garbage collector runs below the innermost Python
    frame, else that frame's function, else (no Python at all) the leaf."""
    inner = max((i for i, frame in enumerate(stack) if is_python(frame)), default=None)
    below = stack if inner is None else stack[inner + 1 :]
    if any(frame.startswith(GC_FRAMES) for frame in below):
        return GC
    return function_name(stack[-1] if inner is None else stack[inner])


def self_time(raw: str, top: int = 10) -> tuple[int, tuple[tuple[str, float], ...]]:
    """(samples, the `top` owners of samples (`owner`) with their share) from py-spy's raw
    (collapsed stack) output."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[owner(stack.split(";"))] += int(count)
    total = sum(counts.values())
    if not total:
        return 0, ()
    return total, tuple((name, n / total) for name, n in counts.most_common(top))


def py_spy() -> str | None:
    return shutil.which("py-spy")


def profile_under_load(
    loads: list[list[str]],
    spied: dict[str, int],
    watched: dict[str, int],
    seconds: float,
    warmup: float = 2.0,
    rate: int = 100,
    top: int = 10,
) -> list[ProcessProfile]:
    """Run the `loads` commands, let them warm up, then py-spy every process of `spied` (label
    -> pid) for `seconds` at `rate` Hz while measuring the CPU of those, of `watched` and of the
    loads themselves (together); the loads are stopped at the end (they should be long enough
    to outlast the window)."""
    spy = py_spy()
    if spy is None:
        raise RuntimeError("py-spy is not installed (pip install py-spy)")
    clients = [
        subprocess.Popen(load, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for load in loads
    ]
    try:
        time.sleep(warmup)
        if any(c.poll() is not None for c in clients):
            raise RuntimeError("the load ended before the profile")
        every = {label: [pid] for label, pid in {**spied, **watched}.items()}
        every["redis-benchmark"] = [c.pid for c in clients]
        with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
            outputs = {label: Path(tmp) / f"{pid}.txt" for label, pid in spied.items()}
            duration = max(1, round(seconds))
            before = {label: cpu_seconds(pids) for label, pids in every.items()}
            started = time.monotonic()
            spies = [
                subprocess.Popen(
                    [
                        spy, "record", "--pid", str(pid), "--duration", str(duration),
                        "--rate", str(rate), "--gil", "--native", "--format", "raw",
                        "--output", str(outputs[label]),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
                for label, pid in spied.items()
            ]  # fmt: skip
            errors = [p.communicate(timeout=seconds + 60)[1] for p in spies]
            elapsed = time.monotonic() - started
            after = {label: cpu_seconds(pids) for label, pids in every.items()}
            out = []
            for (label, pid), error in zip(spied.items(), errors, strict=True):
                if not outputs[label].exists():
                    raise RuntimeError(f"py-spy on {label} wrote nothing: {error[-1000:]!r}")
                samples, best = self_time(outputs[label].read_text(), top)
                cores = (after[label] - before[label]) / elapsed
                gil = samples / (rate * duration)
                out.append(ProcessProfile(label, pid, cores, samples, gil, best))
            for label, pids in every.items():
                if label not in spied:
                    cores = (after[label] - before[label]) / elapsed
                    out.append(ProcessProfile(label, pids[0], cores))
            return out
    finally:
        for c in clients:
            c.terminate()
            c.wait()
