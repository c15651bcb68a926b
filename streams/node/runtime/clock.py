"""The node's wall clock, read once per command at the edge and carried in the ops it makes.

CRDT.CLOCK (a test hook like Redis's DEBUG commands, refused unless the node was started with
--debug-clock) pins it, so a seed table's `*` IDs are the exact ones the seed prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class NodeClock:
    def __init__(self, clock: Callable[[], float] = time.time, pinnable: bool = False) -> None:
        self._clock = clock
        self.pinnable = pinnable
        self._pinned_ms: int | None = None

    def now_ms(self) -> int:
        if self._pinned_ms is not None:
            return self._pinned_ms
        return int(self._clock() * 1000)

    def pin(self, ms: int | None) -> None:
        """Pin the clock at `ms`, or (None) let it run again."""
        self._pinned_ms = ms
