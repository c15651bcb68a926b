"""Progress of long work on stderr: a line about once a second with the count and the rate.

Why one module: every command that can run for more than a couple of seconds (`streams replay`,
`snapshot`, `history`, `diff`, the Spark jobs) reports the same way and obeys the same two
switches, so a user learns them once:

- by default progress is shown only when stderr is a terminal: a pipe, a file or CI gets clean
  output and no carriage returns;
- `--quiet` turns it off; `--progress` turns it on even when stderr is not a terminal (a log file).

On a terminal the line is rewritten in place; elsewhere each report is a line of its own. Work
that ends before the first second prints nothing at all, so quick commands stay quiet.

The long loops call `tick(n)` per record (cheap: a counter and a monotonic clock read) and
`stage(...)` when they move to another part of the work (reading one cluster, then folding);
`finish()` prints the final counts when anything was shown.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

INTERVAL_S = 1.0
"""Seconds between two reports."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--progress` / `--quiet` (dest `progress`: True, False, or None for "if a terminal")."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="report progress on stderr about once a second even when stderr is not a "
        "terminal (default: only on a terminal)",
    )
    group.add_argument(
        "--quiet",
        dest="progress",
        action="store_false",
        help="no progress reports on stderr",
    )


def wanted(args: argparse.Namespace | None = None, stream: TextIO | None = None) -> bool:
    """Whether to report: `--progress` yes, `--quiet` no, else only when `stream` (stderr) is a
    terminal."""
    choice = None if args is None else getattr(args, "progress", None)
    if choice is not None:
        return bool(choice)
    return is_terminal(sys.stderr if stream is None else stream)


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed, or not a real file
        return False


class Progress:
    """Counts of one piece of work, reported on `out` (stderr) at most once per `interval`."""

    def __init__(
        self,
        what: str,
        enabled: bool = True,
        *,
        unit: str = "records",
        total: int | None = None,
        out: TextIO | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.enabled = enabled
        self.out: TextIO = sys.stderr if out is None else out
        self.inplace = enabled and is_terminal(self.out)
        """On a terminal: rewrite one line (carriage return) instead of adding lines."""
        self.interval = INTERVAL_S if interval is None else interval
        self.clock = clock
        self.started = clock()
        self.shown = 0
        """Reports printed so far (finish() prints the final counts only when one was)."""
        self._label = ""
        self._unit = unit
        self._total = total
        self._stage_started = self.started
        self._next = self.started + self.interval
        self.done = 0
        """Items counted in the current stage."""

    @classmethod
    def off(cls) -> Progress:
        return cls("", enabled=False)

    def stage(self, label: str, *, unit: str | None = None, total: int | None = None) -> None:
        """Move to another part of the work: its own label, count and rate."""
        self._label = label
        if unit is not None:
            self._unit = unit
        self._total = total
        self.done = 0
        self._stage_started = self.clock()

    def tick(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = self.clock()
        if now >= self._next:
            self._next = now + self.interval
            self._show(now)

    __call__ = tick  # a `progress(n)` callback (streams.replay.reader.read)

    def line(self, now: float | None = None) -> str:
        """`replay: 120,345 records, 41,200 records/s, 3s` (with `of ~N` and an ETA when the
        total is known)."""
        now = self.clock() if now is None else now
        rate = self.done / max(now - self._stage_started, 1e-6)
        label = f"{self._label}: " if self._label else ""
        of = f" of ~{self._total:,}" if self._total else ""
        eta = ""
        if self._total and rate > 0:
            eta = f", ETA {max(0.0, (self._total - self.done) / rate):.0f}s"
        return (
            f"{self.what}: {label}{self.done:,}{of} {self._unit}, "
            f"{rate:,.0f} {self._unit}/s{eta}, {now - self.started:.0f}s"
        )

    def _show(self, now: float) -> None:
        text = self.line(now)
        try:
            if self.inplace:
                self.out.write(f"\r{text}\x1b[K")
            else:
                self.out.write(text + "\n")
            self.out.flush()
        except (OSError, ValueError):  # stderr closed (a pipe gone): stop reporting
            self.enabled = False
            return
        self.shown += 1

    def finish(self) -> None:
        """The final counts, when a report was shown (a short run prints nothing); ends the
        rewritten line on a terminal."""
        if not self.enabled or not self.shown:
            return
        text = self.line()
        try:
            self.out.write(f"\r{text}\x1b[K\n" if self.inplace else text + "\n")
            self.out.flush()
        except (OSError, ValueError):
            pass
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()
