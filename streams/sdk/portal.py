"""The synchronous face's engine: one event loop on a daemon thread per sync object.

The SDK's logic lives once, in asyncio (`streams.sdk.aio`). A sync object owns a `Portal`, runs
its async twin's coroutines on the portal's loop and waits for the result in the caller's
thread. That keeps the sync objects usable from any thread (calls are serialized on the loop),
lets `stop()` come from another thread or a signal handler while `run()` waits, and lets
consumer leases renew on the loop while a blocking handler runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from streams import eventloop

T = TypeVar("T")


class Portal:
    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = eventloop.new_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=serve, name=self._name, daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._start())

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._thread is not None and threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "a sync SDK method was called from its own event loop thread; "
                "use streams.sdk.aio inside async code"
            )
        return self.submit(coro).result()

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()
