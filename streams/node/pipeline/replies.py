"""When a reply may go out, and what goes out instead: the one owner of held replies.

A command runs at once on the live state, whose newest ops may still be in a write batch that is
committing (group commit, `streams.node.runtime.writepath`). Its reply must not show an op the log
does not hold, so it is held (`streams.resp.server.Held`) until the batches it may have seen are
committed. This module decides, for every reply the pipeline computed, which of these applies:

- a write: held until its batch commits; the batch's refusal instead if it fails
  (`refusals.NOT_CONFIRMED`);
- a read: held until the batches it may have seen commit; if one of them failed (its ops were
  undone), the read runs again on the state the log holds and that reply goes out (`Instead`),
  never a write's error;
- a read while a batch is slow (over `SLOW_READ_S`: the broker stalls): run on the committed
  view (`Committed.committed`) and answered at once, unless the client's own write is pending
  (it must see its write);
- a blocking XREADGROUP that delivered, when its delivery's batch fails or the shard refuses
  writes for a while (`refusals.PASSING`): it keeps waiting, as a blocked client expects, and is
  answered by what it delivers once writes are taken again;
- anything held when the node stops: `ERR the write was abandoned`
  (`streams.resp.server.released`).

Decisions are taken on typed values: a refusal's `kind` (`streams.node.runtime.refusals`), the
command's flags, and the BLOCK its result carries (`Ran.block_ms`), never on a reply's text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from streams.commands.base import Command
from streams.errors import CommandError
from streams.node.pipeline.clients import Client
from streams.node.runtime.backend import Outcome, Ran
from streams.node.runtime.refusals import PASSING, is_refusal
from streams.reply import NULL_ARRAY, Reply
from streams.resp.server import Held, Instead, Until

log = logging.getLogger(__name__)

SLOW_READ_S = 0.025
"""A read waiting this long for a write batch runs again on the state the log holds
(`Backend.committed`): the batch is slow, the broker may be away."""
REFUSED_RETRY_S = 0.1
"""How often a blocked XREADGROUP that could not deliver looks whether writes are taken again."""
READ_AGAIN_LIMIT = 5
"""How often a read runs again when the batches it waited for keep failing (after a failure the
shard refuses writes up front until it recovered, so a second failure is rare)."""

Rerun = Callable[[Command, list[bytes], Client], Awaitable[Ran]]
"""Runs a stream command again (blocking reads wait as they would): the dispatcher's `run`."""


class Committed(Protocol):
    """What the policy needs of the backend (`streams.node.runtime.shards.ShardSet`)."""

    def pending(self, shards: frozenset[int] | None) -> Outcome | None:
        """What a reply that read or wrote `shards` (None: any) must wait for; None: nothing."""
        ...

    def committed(self, cmd: Command, args: list[bytes]) -> Ran | None:
        """A read run on the state the log holds, when a write batch is slow to commit; None
        when the live state may be read."""
        ...


class ReplyPolicy:
    def __init__(self, backend: Committed, rerun: Rerun) -> None:
        self.backend = backend
        self.rerun = rerun
        self._rereads: set[asyncio.Task[None]] = set()
        """Reads running again after the batch they waited for failed or was slow."""

    # --- before a command runs ----------------------------------------------------------------

    def answer_now(self, client: Client, cmd: Command, args: list[bytes]) -> Ran | None:
        """A read answered from the state the log holds, without waiting, while a batch is slow
        to commit and the client has no write of its own pending; None: run it as usual."""
        if "readonly" not in cmd.flags or _pending_own_write(client) is not None:
            return None
        ran = self.backend.committed(cmd, args)
        return ran if ran is not None and ran.block is None else None

    # --- once it ran ----------------------------------------------------------------------------

    def release(self, client: Client, cmd: Command, args: list[bytes], ran: Ran) -> Reply | Held:
        """The reply of a stream command that ran, or the same held until it may go out."""
        until = self.backend.pending(ran.shards)
        if ran.block_ms is not None and cmd.name == "xreadgroup":
            if until is not None or is_refusal(ran.reply, PASSING):
                return Held(ran.reply, self._deliver_again_if_needed(until, cmd, args, client))
        if until is None:
            return ran.reply
        if "readonly" in cmd.flags:
            return Held(ran.reply, self._read_again_if_needed(until, cmd, args, client))
        client.own_write = until  # its later reads must see it (`_pending_own_write`)
        return Held(ran.reply, until)

    def hold(self, reply: Reply, shards: frozenset[int] | None) -> Reply | Held:
        """`reply` held until the batches of `shards` pending now are committed (replies of
        built-ins and of commands that were refused before they ran)."""
        until = self.backend.pending(shards)
        return reply if until is None else Held(reply, until)

    # --- the blocking XREADGROUP whose delivery did not commit ----------------------------------

    def _deliver_again_if_needed(
        self, until: Outcome | None, cmd: Command, args: list[bytes], client: Client
    ) -> asyncio.Future[Instead | None]:
        """A blocking XREADGROUP that found entries but could not deliver them (its batch failed,
        or the shard refuses writes until it has recovered: `until` None) keeps waiting, as a
        client blocked in it expects, and is answered by what it delivers once writes are taken
        again. Running it again is safe: a delivery whose batch failed either landed (the entries
        are then in the consumer's PEL, past the group's cursor) or did not."""
        loop = asyncio.get_running_loop()
        out: asyncio.Future[Instead | None] = loop.create_future()

        def again() -> None:
            self._spawn(self._deliver_again(out, cmd, args, client))

        def done(outcome: Outcome) -> None:
            if out.done():
                return
            if outcome.cancelled():
                out.cancel()
            elif outcome.result() is None:
                out.set_result(None)
            else:
                again()

        if until is None:
            again()
        else:
            until.add_done_callback(done)
        return out

    async def _deliver_again(
        self, out: asyncio.Future[Instead | None], cmd: Command, args: list[bytes], client: Client
    ) -> None:
        reply: Reply = NULL_ARRAY
        lost = client.session.lost
        try:
            while lost is None or not lost.done():
                ran = await self.rerun(cmd, args, client)
                if is_refusal(ran.reply, PASSING):
                    await asyncio.sleep(REFUSED_RETRY_S)  # until the shard takes writes again
                    continue
                until = self.backend.pending(ran.shards)
                if until is None or await asyncio.shield(until) is None:
                    reply = ran.reply
                    break
        except Exception:
            log.exception("running %r again after its delivery failed", args[:1])
            reply = CommandError("ERR internal error, see the node's log")
        finally:
            if not out.done():
                out.set_result(Instead(reply))

    # --- a read whose batches failed or are slow ------------------------------------------------

    def _read_again_if_needed(
        self, until: Outcome, cmd: Command, args: list[bytes], client: Client
    ) -> asyncio.Future[Instead | None]:
        """A read's reply waits for the write batches it may have seen (`until`). If one failed,
        the ops it may have seen were undone (`streams.node.runtime.undo`): the read runs again
        on that state and its new reply is sent instead; a read never answers with a write's
        error. If the batch is slow (SLOW_READ_S: the broker stalls), the read runs again on the
        state the log holds and is answered at once (`Committed.committed`), unless the client's
        own write is among those pending (it must see it)."""
        loop = asyncio.get_running_loop()
        out: asyncio.Future[Instead | None] = loop.create_future()
        running: list[asyncio.Task[None]] = []

        def again() -> None:
            if running or out.done():
                return
            running.append(self._spawn(self._read_again(out, cmd, args, client)))

        own = _pending_own_write(client)
        timer = None if own is not None else loop.call_later(SLOW_READ_S, again)

        def done(outcome: Outcome) -> None:
            if timer is not None:
                timer.cancel()
            if out.done():
                return
            if outcome.cancelled():
                out.cancel()
            elif outcome.result() is None:
                out.set_result(None)  # the reply computed first shows only committed ops now
                for task in running:
                    task.cancel()
            else:
                again()

        until.add_done_callback(done)
        return out

    async def _read_again(
        self, out: asyncio.Future[Instead | None], cmd: Command, args: list[bytes], client: Client
    ) -> None:
        reply: Reply = CommandError(
            f"ERR the write batches this read saw failed {READ_AGAIN_LIMIT} times in a row; "
            "nothing was read, try again"
        )
        failures = 0
        try:
            while failures < READ_AGAIN_LIMIT:
                ran = self.backend.committed(cmd, args)
                if ran is not None and ran.block is None:
                    reply = ran.reply
                    break
                ran = await self.rerun(cmd, args, client)
                until = self.backend.pending(ran.shards)
                if until is None:
                    reply = ran.reply
                    break
                try:
                    failed = await asyncio.wait_for(asyncio.shield(until), SLOW_READ_S)
                except TimeoutError:
                    continue
                if failed is None:
                    reply = ran.reply
                    break
                failures += 1
        except Exception:
            reply = CommandError("ERR internal error, see the node's log")
            log.exception("running %r again after a failed write batch failed", args[:1])
        finally:
            if not out.done():
                out.set_result(Instead(reply))

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._rereads.add(task)
        task.add_done_callback(self._rereads.discard)
        return task


def _pending_own_write(client: Client) -> Until | None:
    """The client's newest write, while its batch is not committed (set by `release`)."""
    own = client.own_write
    return None if own is None or own.done() else own
