"""Clients blocked on XREAD / XREADGROUP BLOCK, woken when a key they wait on changes.

Any applied op wakes the waiters of its key, whether the op was local (a command of this node) or
remote (a replicated op from the materializer), so a blocked reader sees entries from every region.
A woken client re-runs its command. A client that disconnects while blocked ends its wait at once
through its connection's `lost` future (the server never cancels a running command, see
`streams.resp.server`), and `wait` always unregisters, however it ends (woken, timed out, aborted,
cancelled): `len(waiters)` is the number of blocked clients, and CRDT.INFO reports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class Waiters:
    def __init__(self) -> None:
        self._by_key: dict[bytes, set[asyncio.Future[None]]] = {}

    def __len__(self) -> int:
        return len({id(f) for futures in self._by_key.values() for f in futures})

    async def wait(
        self,
        keys: Iterable[bytes],
        timeout: float,
        abort: asyncio.Future[None] | None = None,
    ) -> bool:
        """Wait until one of `keys` changes (True), or `timeout` seconds pass (inf: forever) or
        `abort` resolves (False)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._by_key.setdefault(key, set()).add(fut)
        try:
            waiting: list[asyncio.Future[None]] = [fut] if abort is None else [fut, abort]
            await asyncio.wait(
                waiting,
                timeout=None if timeout == float("inf") else timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
            return fut.done()
        finally:
            for key in keys:
                futures = self._by_key.get(key)
                if futures is not None:
                    futures.discard(fut)
                    if not futures:
                        del self._by_key[key]

    def wake(self, keys: Iterable[bytes]) -> None:
        for key in keys:
            for fut in self._by_key.get(key, ()):
                if not fut.done():
                    fut.set_result(None)

    def wake_all(self) -> None:
        """Wake every blocked client (the state was rebuilt: any key may have changed)."""
        self.wake(list(self._by_key))
