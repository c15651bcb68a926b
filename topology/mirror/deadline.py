"""What stops a mirror: `MirrorError` (fatal), `MirrorTimeout`, and the `Deadline` each operation
of a mirror works against (every client call takes its timeout from it)."""

from __future__ import annotations

import time


class MirrorError(RuntimeError):
    """A fatal condition that retrying cannot fix: the configuration or the logs are wrong."""


class MirrorTimeout(TimeoutError):
    """`copy_available` did not reach the source's end and get it acknowledged in time."""


class Deadline:
    """When one operation of mirror `name` must be done (local monotonic time: it only bounds
    waiting, nothing that regions must agree on depends on it)."""

    def __init__(self, seconds: float, name: str) -> None:
        self.name = name
        self.at = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        """Seconds left (never negative), at most `cap`."""
        left = max(0.0, self.at - time.monotonic())
        return min(left, cap) if cap is not None else left

    def check(self, doing: str) -> None:
        """MirrorTimeout naming what was being done, once the deadline passed."""
        if time.monotonic() >= self.at:
            raise self.expired(doing)

    def expired(self, doing: str) -> MirrorTimeout:
        return MirrorTimeout(f"{self.name}: timed out {doing}")
