"""Background tasks that must not be lost: asyncio keeps only a weak reference to a task, so an
unreferenced one may be collected mid-flight. Each owner keeps its tasks here and cancels them
when it stops."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Tasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()

    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
