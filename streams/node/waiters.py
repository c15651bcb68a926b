"""Clients blocked on XREAD / XREADGROUP BLOCK, woken when a key they wait on changes.

Any applied op wakes the waiters of its key, whether the op was local (a command of this node) or
remote (a replicated op from the materializer), so a blocked reader sees entries from every region.
A woken client re-runs its command; a client that disconnects while blocked is cancelled with its
connection's task, and `wait` always unregisters it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class Waiters:
    def __init__(self) -> None:
        self._by_key: dict[bytes, set[asyncio.Future[None]]] = {}

    def __len__(self) -> int:
        return len({id(f) for futures in self._by_key.values() for f in futures})

    async def wait(self, keys: Iterable[bytes], timeout: float) -> bool:
        """Wait until one of `keys` changes (True) or `timeout` seconds pass (False)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._by_key.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, None if timeout == float("inf") else timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                waiting = self._by_key.get(key)
                if waiting is not None:
                    waiting.discard(fut)
                    if not waiting:
                        del self._by_key[key]

    def wake(self, keys: Iterable[bytes]) -> None:
        for key in keys:
            for fut in self._by_key.get(key, ()):
                if not fut.done():
                    fut.set_result(None)
