"""Running a batch's handlers: one after the other (the default) or up to N at once.

The consumer reads entries in batches and acks a batch with one XACK once its handlers have
returned (`streams.sdk.consumer`); this module only runs the handlers and reports, per entry,
whether its handler returned or raised. It never talks to a node, so at-least-once stays the
consumer's business: an entry whose handler raised is not acked, an entry not started (stop
requested) is handed back.

Why a whole batch of plain (blocking) handlers runs in one worker-thread call when handled one
after the other: a hop to a worker thread and back costs tens of microseconds and two switches
of the GIL, which for a handler that does little is most of the cost of an entry (the consumer
handled ~360 entries/s with one XACK and one thread hop per entry). One hop per batch keeps the
event loop free for the lease renewal while the handlers run. With `concurrency > 1`, each
handler runs in its own worker thread (or task, for coroutine handlers), at most `concurrency`
at a time, for handlers that wait on I/O.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Handler = Callable[[str, dict[bytes, bytes]], Awaitable[None] | None]
"""`handler(entry_id, fields)`: return to ack; raise to fail (see streams.sdk.errors)."""

Item = tuple[str, dict[bytes, bytes]]
"""An entry to handle: its ID and fields."""


@dataclass(frozen=True)
class Outcome:
    """What one handler call did: returned (`error` None) or raised `error`, in `seconds`."""

    entry_id: str
    error: Exception | None
    seconds: float


class BatchRunner:
    """Runs `handler` over the entries of a batch (module docstring)."""

    def __init__(self, handler: Handler, concurrency: int = 1) -> None:
        self.handler = handler
        self.concurrency = concurrency
        self.is_async = inspect.iscoroutinefunction(handler)

    async def run(self, items: list[Item], stopping: Callable[[], bool]) -> list[Outcome]:
        """The outcomes of the entries whose handler was started, in batch order. Once
        `stopping()` says so, no further handler starts (the ones running finish); the entries
        without an outcome were not started."""
        if not items:
            return []
        if self.concurrency > 1 and len(items) > 1:
            return await self._concurrent(items, stopping)
        if self.is_async:
            out: list[Outcome] = []
            for entry_id, fields in items:
                if stopping():
                    break
                out.append(await self._one_async(entry_id, fields))
            return out
        halted = False  # set if this coroutine is cancelled: the thread starts no more handlers

        def stop_here() -> bool:
            return halted or stopping()

        try:
            ran = await asyncio.to_thread(self._sequential_in_thread, items, stop_here)
        except asyncio.CancelledError:
            halted = True
            raise
        out = []
        for entry_id, error, seconds, result in ran:
            if result is not None:  # a plain function that returned an awaitable: await it here
                started = time.perf_counter()
                try:
                    await result
                except Exception as exc:
                    error = exc
                seconds += time.perf_counter() - started
            out.append(Outcome(entry_id, error, seconds))
        return out

    def _sequential_in_thread(
        self, items: list[Item], stopping: Callable[[], bool]
    ) -> list[tuple[str, Exception | None, float, Awaitable[object] | None]]:
        out: list[tuple[str, Exception | None, float, Awaitable[object] | None]] = []
        for entry_id, fields in items:
            if stopping():
                break
            started = time.perf_counter()
            error: Exception | None = None
            pending: Awaitable[object] | None = None
            try:
                result = self.handler(entry_id, fields)
                if inspect.isawaitable(result):
                    pending = result
            except Exception as exc:
                error = exc
            out.append((entry_id, error, time.perf_counter() - started, pending))
        return out

    async def _one_async(self, entry_id: str, fields: dict[bytes, bytes]) -> Outcome:
        started = time.perf_counter()
        try:
            if self.is_async:
                result = self.handler(entry_id, fields)
            else:
                result = await asyncio.to_thread(self.handler, entry_id, fields)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            return Outcome(entry_id, exc, time.perf_counter() - started)
        return Outcome(entry_id, None, time.perf_counter() - started)

    async def _concurrent(self, items: list[Item], stopping: Callable[[], bool]) -> list[Outcome]:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(entry_id: str, fields: dict[bytes, bytes]) -> Outcome | None:
            async with gate:
                if stopping():
                    return None
                return await self._one_async(entry_id, fields)

        results = await asyncio.gather(*(one(i, f) for i, f in items))
        return [r for r in results if r is not None]
