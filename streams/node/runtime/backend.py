"""The port between the request pipeline and what holds the state: `Backend`, and `Ran`, how a
stream command ran on it.

The live node's backend is its shards (`streams.node.runtime.shards.ShardSet`); `streams replay
--serve` answers through the same pipeline from a replayed state (`streams.replay.serve`). Kept
apart from both so that neither the pipeline nor the replay server loads the shards to speak of
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import NamedTuple, Protocol

from streams.commands.base import BlockRequest, Command
from streams.errors import CommandError
from streams.reply import Reply

Outcome = asyncio.Future[CommandError | None]
"""Resolves to None once a write batch committed, or to the refusal every reply held on it gets
instead (`streams.node.runtime.refusals`: NOT_CONFIRMED, or WRITES_REFUSED for a batch failed
without being sent)."""


class Ran(NamedTuple):
    """A stream command run on the shards: its reply, whether it asks to block, the shards it
    read or wrote (None: possibly all of them) and, for a blocking read, its BLOCK milliseconds
    as parsed (`Result.block_ms`: carried here so nothing parses the request again)."""

    reply: Reply
    block: BlockRequest | None = None
    shards: frozenset[int] | None = None
    block_ms: int | None = None


class Backend(Protocol):
    """What the pipeline needs of whatever holds the state."""

    async def paused(self) -> None:
        """Return once commands may run (a snapshot may be forking)."""
        ...

    def execute(self, cmd: Command, args: list[bytes]) -> Ran: ...

    def committed(self, cmd: Command, args: list[bytes]) -> Ran | None:
        """A read run on the state the log holds, answered without waiting, when that differs
        from the live state because a write batch is slow to commit; None otherwise (then
        `execute`)."""
        ...

    def pending(self, shards: frozenset[int] | None) -> Outcome | None:
        """What a reply that read or wrote `shards` (None: any) must wait for: the write
        batches pending now, as one outcome; None when none is."""
        ...

    async def wait(
        self, keys: Iterable[bytes], timeout: float, lost: asyncio.Future[None] | None
    ) -> None:
        """Wait until one of `keys` changes, `timeout` seconds pass or `lost` resolves."""
        ...
