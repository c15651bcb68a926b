"""Running a batch's handlers: one after the other (the default) or up to N at once.

The consumer reads entries in batches and acks a batch with one XACK once its handlers have
returned (`streams.sdk.consumer`); this module only runs the handlers and reports, per entry,
whether its handler returned or raised. It never talks to a node, so at-least-once stays the
consumer's business: an entry whose handler raised is not acked, an entry not started (stop
requested) is handed back.

Plain (blocking) handlers run in worker threads, and a hop to a thread and back costs tens of
microseconds and two GIL hand-overs: for a handler that does little, most of an entry's cost.
So a batch makes one hop per worker, not per entry: handled one after the other, the whole batch
runs in one worker-thread call; with `concurrency = N`, N workers (a pool of N threads of this
consumer's own, so the bound is really reached whatever else uses asyncio's default pool) each
take the batch's next entry until none is left. The event loop stays free meanwhile (lease
renewal, `stop()`). Coroutine handlers run on the loop: awaited one by one, or as tasks at most N
at a time.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
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


@dataclass
class _Ran:
    """A plain handler's call in a worker; `pending` is an awaitable it returned (awaited on the
    loop afterwards: a plain function may hand back a coroutine)."""

    entry_id: str
    error: Exception | None
    seconds: float
    pending: Awaitable[object] | None = None


class BatchRunner:
    """Runs `handler` over the entries of a batch (module docstring)."""

    def __init__(self, handler: Handler, concurrency: int = 1) -> None:
        self.handler = handler
        self.concurrency = concurrency
        self.is_async = inspect.iscoroutinefunction(handler)
        self._pool: ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Let the worker threads of `concurrency > 1` go (they are idle between batches)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    async def run(self, items: list[Item], stopping: Callable[[], bool]) -> list[Outcome]:
        """The outcomes of the entries whose handler was started, in batch order. Once
        `stopping()` says so, no further handler starts (the ones running finish); the entries
        without an outcome were not started."""
        if not items:
            return []
        if self.is_async:
            return await self._coroutines(items, stopping)
        halted = False  # set if this coroutine is cancelled: the workers start no more handlers

        def stop_here() -> bool:
            return halted or stopping()

        workers = min(self.concurrency, len(items))
        ran: list[_Ran | None] = [None] * len(items)
        queue = iter(enumerate(items))
        lock = threading.Lock()
        try:
            if workers == 1:
                await asyncio.to_thread(self._work, queue, lock, ran, stop_here)
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.concurrency, "streams-sdk-handler")
                loop = asyncio.get_running_loop()
                await asyncio.gather(
                    *(
                        loop.run_in_executor(self._pool, self._work, queue, lock, ran, stop_here)
                        for _ in range(workers)
                    )
                )
        except asyncio.CancelledError:
            halted = True
            raise
        out: list[Outcome] = []
        for one in ran:
            if one is None:
                continue
            if one.pending is not None:
                started = time.perf_counter()
                try:
                    await one.pending
                except Exception as exc:
                    one.error = exc
                one.seconds += time.perf_counter() - started
            out.append(Outcome(one.entry_id, one.error, one.seconds))
        return out

    def _work(
        self,
        queue: Iterator[tuple[int, Item]],
        lock: threading.Lock,
        ran: list[_Ran | None],
        stopping: Callable[[], bool],
    ) -> None:
        """One worker: the batch's next entry until none is left or a stop is asked."""
        while True:
            with lock:
                if stopping():
                    return
                nxt = next(queue, None)
            if nxt is None:
                return
            n, (entry_id, fields) = nxt
            started = time.perf_counter()
            try:
                result = self.handler(entry_id, fields)
            except Exception as exc:
                ran[n] = _Ran(entry_id, exc, time.perf_counter() - started)
                continue
            pending = result if inspect.isawaitable(result) else None
            ran[n] = _Ran(entry_id, None, time.perf_counter() - started, pending)

    async def _coroutines(self, items: list[Item], stopping: Callable[[], bool]) -> list[Outcome]:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(entry_id: str, fields: dict[bytes, bytes]) -> Outcome | None:
            async with gate:
                if stopping():
                    return None
                started = time.perf_counter()
                try:
                    result = self.handler(entry_id, fields)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    return Outcome(entry_id, exc, time.perf_counter() - started)
                return Outcome(entry_id, None, time.perf_counter() - started)

        if self.concurrency == 1:
            out: list[Outcome] = []
            for entry_id, fields in items:
                result = await one(entry_id, fields)
                if result is None:
                    break
                out.append(result)
            return out
        results = await asyncio.gather(*(one(i, f) for i, f in items))
        return [r for r in results if r is not None]
