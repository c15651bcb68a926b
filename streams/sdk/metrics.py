"""Metrics hooks: what a consumer reports, for whatever metrics system the user runs.

The consumer calls these methods as things happen (processed, failed, redelivered,
dead-lettered) and, every `metrics_interval_s`, `lag` with the group's lag and pending count as
the serving region sees them (XINFO GROUPS / XPENDING). Lag and pending are the numbers an
autoscaler wants (keda#2819): counts alone do not say whether the group keeps up.

`Metrics` does nothing; subclass it and override what you need. `CountingMetrics` keeps counters
in memory (thread-safe), which the tests and examples use.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


class Metrics:
    """Override any of these; every call happens on the consumer's event-loop thread and must
    not block."""

    def processed(self, entry_id: str, seconds: float) -> None:
        """The handler returned and the entry was acknowledged."""

    def failed(self, entry_id: str, error: BaseException) -> None:
        """The handler raised; the entry stays pending for a retry."""

    def redelivered(self, entry_id: str, attempt: int) -> None:
        """An entry came again: a retry, a reclaim, or a re-read after a region change."""

    def duplicate_skipped(self, entry_id: str) -> None:
        """An entry (or idempotency key) this consumer had already handled was acked unhandled."""

    def dead_lettered(self, entry_id: str, attempts: int, error: str) -> None:
        """The entry was copied to the dead-letter stream (or dropped without one) and acked."""

    def lag(self, lag: int | None, pending: int) -> None:
        """The group's lag (entries not yet delivered; None when the server cannot tell) and its
        pending count (delivered, not acknowledged)."""

    def failover(self, from_url: str, to_url: str) -> None:
        """The consumer or producer moved to another endpoint."""


@dataclass
class Counts:
    processed: int = 0
    failed: int = 0
    redelivered: int = 0
    duplicate_skipped: int = 0
    dead_lettered: int = 0
    failovers: int = 0
    lag: int | None = None
    pending: int = 0


class CountingMetrics(Metrics):
    """Counters in memory; `snapshot()` returns a copy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = Counts()

    def snapshot(self) -> Counts:
        with self._lock:
            return Counts(**vars(self._counts))

    def processed(self, entry_id: str, seconds: float) -> None:
        with self._lock:
            self._counts.processed += 1

    def failed(self, entry_id: str, error: BaseException) -> None:
        with self._lock:
            self._counts.failed += 1

    def redelivered(self, entry_id: str, attempt: int) -> None:
        with self._lock:
            self._counts.redelivered += 1

    def duplicate_skipped(self, entry_id: str) -> None:
        with self._lock:
            self._counts.duplicate_skipped += 1

    def dead_lettered(self, entry_id: str, attempts: int, error: str) -> None:
        with self._lock:
            self._counts.dead_lettered += 1

    def lag(self, lag: int | None, pending: int) -> None:
        with self._lock:
            self._counts.lag = lag
            self._counts.pending = pending

    def failover(self, from_url: str, to_url: str) -> None:
        with self._lock:
            self._counts.failovers += 1
