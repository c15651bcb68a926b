"""The request pipeline: one request of one connection, from its arguments to its reply.

Redis's processCommand order: the command must exist, the connection must be authenticated, the
arity must fit, the user's ACL rules must allow it (`auth.Rules`); inside MULTI the command is
then queued; otherwise a command the node runs itself (connection, server, transaction and admin
commands: "built-ins") runs, a Redis command we do not implement is refused clearly, and a
stream command is executed by the `Backend` (and may block).

The live node and `streams replay --serve` both answer through this pipeline; they differ only
in their backend (the node's shards, or a replayed state that refuses writes) and in the
built-ins they bind. The reply of a command is held (`streams.resp.server.Held`) until the write
batches it may have seen are committed, as the backend says.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from time import perf_counter_ns
from typing import NamedTuple, Protocol

from streams import errors
from streams.commands.base import BlockRequest, Command
from streams.commands.catalogue import unsupported
from streams.commands.slices import SLICING, SlicedRange
from streams.errors import CommandError
from streams.node import auth, router, transactions
from streams.node.clients import Client, Clients, Queued
from streams.node.stats import EXECUTED, QUEUED, REJECTED, UNKNOWN, Stats
from streams.reply import NULL_ARRAY, Reply
from streams.resp.request import Dropped
from streams.resp.server import Held, Instead, Session, Until

log = logging.getLogger(__name__)

SLOW_READ_S = 0.025
"""A read waiting this long for a write batch runs again on the state the log holds
(`Backend.committed`): the batch is slow, the broker may be away."""
REFUSED_RETRY_S = 0.1
"""How often a blocked XREADGROUP that could not deliver looks whether writes are taken again."""
WRITES_REFUSED = "ERR writes refused"
"""How a shard's refusal of every write starts (`streams.node.shard`)."""
READ_AGAIN_LIMIT = 5
"""How often a read runs again when the batches it waited for keep failing (after a failure the
shard refuses writes up front until it recovered, so a second failure is rare)."""

Builtin = Callable[[Client, list[bytes]], Awaitable[Reply]]

Answer = tuple[Reply, frozenset[int] | None, Command | None, int]
"""What `_handle` gives back: the reply, the shards it read or wrote (None: any), the command
(None: no such command here) and what became of the request (`streams.node.stats`)."""


class Ran(NamedTuple):
    """A stream command's reply, whether it asks to block, and the shards it read or wrote (None:
    possibly all of them)."""

    reply: Reply
    block: BlockRequest | None = None
    shards: frozenset[int] | None = None


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

    def hold(self, reply: Reply, shards: frozenset[int] | None) -> Reply | Held:
        """`reply`, held until the write batches of `shards` pending now are committed."""
        ...

    async def wait(
        self, keys: Iterable[bytes], timeout: float, lost: asyncio.Future[None] | None
    ) -> None:
        """Wait until one of `keys` changes, `timeout` seconds pass or `lost` resolves."""
        ...


class Routing(Protocol):
    """Where a request may run when the region's shards are spread over several nodes (the
    Redis Cluster protocol, `streams.node.cluster`): None to run it here, else the MOVED or
    CROSSSLOT error to answer."""

    def redirect(self, cmd: Command, args: list[bytes]) -> CommandError | None: ...

    def redirect_exec(self, queued: list[Queued]) -> CommandError | None: ...


def sync(fn: Callable[[Client, list[bytes]], Reply]) -> Builtin:
    """A built-in that does not await, as the pipeline calls built-ins."""

    async def run_sync(client: Client, args: list[bytes]) -> Reply:
        try:
            return fn(client, args)
        except CommandError as exc:
            return exc

    return run_sync


class Dispatcher:
    def __init__(
        self,
        backend: Backend,
        auth_config: auth.AuthConfig,
        clients: Clients | None = None,
        stats: Stats | None = None,
        routing: Routing | None = None,
    ) -> None:
        self.backend = backend
        self.routing = routing
        self.auth = auth_config
        self.clients = clients if clients is not None else Clients()
        self.stats = stats if stats is not None else Stats()
        self.builtins: dict[str, Builtin] = {}
        """The handlers of `router.BUILTINS`, bound by the owner (`bind`)."""
        self._rereads: set[asyncio.Task[None]] = set()
        """Reads running again after the batch they waited for failed or was slow."""

    def bind(self, handlers: dict[str, Builtin]) -> None:
        self.builtins = router.bind(handlers)

    async def handle(self, session: Session, args: list[bytes]) -> Reply | Held:
        """The RESP entry point: one request of one connection, answered in order. Every request
        is counted here, once, when it answered (`streams.node.stats`)."""
        client = self.clients.find(session) or self._register(session)
        await self.backend.paused()
        started = perf_counter_ns()
        reply, shards, cmd, what = await self._handle(client, args)
        ran = perf_counter_ns() - started
        if client.blocked_ns:  # a blocked command counts the time it ran, not the wait
            ran -= client.blocked_ns
            client.blocked_ns = 0
        self.stats.record(client, cmd, what, args, reply, ran)
        held = self.backend.hold(reply, shards)
        if what == EXECUTED and shards is not None and cmd is not None:
            block_ms = _group_read_block(cmd, args)
            if block_ms is not None and (
                isinstance(held, Held) or str(reply).startswith(WRITES_REFUSED)
            ):
                until = held.until if isinstance(held, Held) else None
                return Held(reply, self._group_read_again_if_needed(until, cmd, args, client))
            if isinstance(held, Held) and "readonly" in cmd.flags:
                return Held(reply, self._read_again_if_needed(held.until, cmd, args, client))
            if isinstance(held, Held):
                self._note_own_write(client, held.until)
        return held

    def _group_read_again_if_needed(
        self, until: Until | None, cmd: Command, args: list[bytes], client: Client
    ) -> asyncio.Future[Instead | None]:
        """A blocking XREADGROUP that found entries but could not deliver them (its batch failed,
        or the shard refuses writes until it has recovered: `until` None) keeps waiting, as a
        client blocked in it expects, and is answered by what it delivers once writes are taken
        again. Running it again is safe: a delivery whose batch failed either landed (the entries
        are then in the consumer's PEL, past the group's cursor) or did not."""
        loop = asyncio.get_running_loop()
        out: asyncio.Future[Instead | None] = loop.create_future()

        def again() -> None:
            task = loop.create_task(self._group_read_again(out, cmd, args, client))
            self._rereads.add(task)
            task.add_done_callback(self._rereads.discard)

        def done(outcome: Until) -> None:
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

    async def _group_read_again(
        self, out: asyncio.Future[Instead | None], cmd: Command, args: list[bytes], client: Client
    ) -> None:
        reply: Reply = NULL_ARRAY
        lost = client.session.lost
        try:
            while lost is None or not lost.done():
                answer, shards = await self._run(cmd, args, client)
                if str(answer).startswith(WRITES_REFUSED):
                    await asyncio.sleep(REFUSED_RETRY_S)  # until the shard takes writes again
                    continue
                held = self.backend.hold(answer, shards)
                if not isinstance(held, Held) or await asyncio.shield(held.until) is None:
                    reply = answer
                    break
        except Exception:
            log.exception("running %r again after its delivery failed", args[:1])
            reply = CommandError("ERR internal error, see the node's log")
        finally:
            if not out.done():
                out.set_result(Instead(reply))

    def _note_own_write(self, client: Client, until: Until) -> None:
        """The client's newest write waiting for its batch: its later reads must see it, so they
        wait for the batch rather than be answered from the state without it. Kept on the client
        and read with `_pending_own_write` (no callback per write to forget it)."""
        client.own_write = until

    def _read_again_if_needed(
        self, until: Until, cmd: Command, args: list[bytes], client: Client
    ) -> asyncio.Future[Instead | None]:
        """A read's reply waits for the write batches it may have seen (`until`). If one failed,
        the ops it may have seen were undone (`streams.node.undo`): the read runs again on that
        state and its new reply is sent instead; a read never answers with a write's error. If
        the batch is slow (SLOW_READ_S: the broker stalls), the read runs again on the state the
        log holds and is answered at once (`Backend.committed`), unless the client's own write
        is among those pending (it must see it)."""
        loop = asyncio.get_running_loop()
        out: asyncio.Future[Instead | None] = loop.create_future()
        running: list[asyncio.Task[None]] = []

        def again() -> None:
            if running or out.done():
                return
            task = loop.create_task(self._read_again(out, cmd, args, client))
            running.append(task)
            self._rereads.add(task)
            task.add_done_callback(self._rereads.discard)

        own = _pending_own_write(client)
        timer = None if own is not None else loop.call_later(SLOW_READ_S, again)

        def done(outcome: Until) -> None:
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
                answer, shards = await self._run(cmd, args, client)
                held = self.backend.hold(answer, shards)
                if not isinstance(held, Held):
                    reply = answer
                    break
                try:
                    failed = await asyncio.wait_for(asyncio.shield(held.until), SLOW_READ_S)
                except TimeoutError:
                    continue
                if failed is None:
                    reply = answer
                    break
                failures += 1
        except Exception:
            reply = CommandError("ERR internal error, see the node's log")
            log.exception("running %r again after a failed write batch failed", args[:1])
        finally:
            if not out.done():
                out.set_result(Instead(reply))

    def _register(self, session: Session) -> Client:
        client = self.clients.add(session)
        self.stats.connections += 1
        auth.start(client, self.auth)
        return client

    async def _handle(self, client: Client, args: list[bytes]) -> Answer:
        """The reply, the shards it read or wrote, the command and what became of the request
        (`stats.EXECUTED`, `REJECTED`, `QUEUED`, `UNKNOWN`)."""
        client.last_seen = time.monotonic()
        try:
            found = router.resolve(args)
        except CommandError as exc:
            return transactions.reject(client, args[0].lower(), exc), None, None, UNKNOWN
        if isinstance(found, str):
            client.last_cmd = found
            if not client.authenticated:
                return CommandError(errors.NOAUTH), None, None, UNKNOWN
            refused = transactions.reject(client, args[0].lower(), unsupported(found))
            return refused, None, None, UNKNOWN
        client.last_cmd = found.name
        if not client.authenticated and "no_auth" not in found.flags:
            return CommandError(errors.NOAUTH), None, found, REJECTED
        if not found.arity_ok(len(args)):
            refused = transactions.reject(client, args[0].lower(), errors.wrong_arity(found.name))
            return refused, None, found, REJECTED
        if not self.auth.allows(client.user, found):
            denied = CommandError(auth.NOPERM_FMT.format(name=found.name))
            if found.name == "exec" and client.transaction is None:  # Redis's rejectCommand
                denied = CommandError(errors.EXECABORT_BECAUSE_FMT.format(reason=denied.text))
            return transactions.reject(client, args[0].lower(), denied), None, found, REJECTED
        if type(args) is Dropped:
            refused = transactions.reject(client, args[0].lower(), _dropped_error(args))
            return refused, None, found, REJECTED
        builtin = router.builtin_name(found)
        tx = client.transaction
        if self.routing is not None:
            moved = self._redirect(client, found, builtin, args)
            if moved is not None:
                return moved, None, found, REJECTED
        if tx is not None and builtin not in transactions.IMMEDIATE:
            if "no_multi" in found.flags:
                not_here = tx.queue(found, args, CommandError(errors.NOT_IN_MULTI))
                return not_here, None, found, REJECTED
            return tx.queue(found, args), None, found, QUEUED
        if builtin is not None:
            return await self.builtins[builtin](client, args), None, found, EXECUTED
        if "readonly" in found.flags and _pending_own_write(client) is None:
            ran = self.backend.committed(found, args)  # a batch is slow: what the log holds
            if ran is not None and ran.block is None:
                return ran.reply, ran.shards, found, EXECUTED
        reply, shards = await self._run(found, args, client)
        return reply, shards, found, EXECUTED

    def _redirect(
        self, client: Client, cmd: Command, builtin: str | None, args: list[bytes]
    ) -> CommandError | None:
        """Redis Cluster's check (after authentication and arity, before queueing or running):
        a command redirected inside MULTI dooms the transaction; EXEC checks the whole queue and
        a redirected EXEC discards it."""
        assert self.routing is not None
        tx = client.transaction
        if builtin == "exec":
            moved = self.routing.redirect_exec(tx.queued) if tx is not None else None
            if moved is not None:
                client.transaction = None
            return moved
        moved = self.routing.redirect(cmd, args)
        if moved is not None and tx is not None:
            tx.dirty = True
        return moved

    async def _run(
        self, cmd: Command, args: list[bytes], client: Client | None = None
    ) -> tuple[Reply, frozenset[int] | None]:
        """A stream command: executed at once; a blocking read that found nothing waits for a
        change of its keys and runs again.

        The timeout counts from the first run (BLOCK 0: forever); a re-run uses the request's
        resolved arguments (XREAD's `$` became the last ID of the first run) and the command's
        re-run row, if it has one (XREADGROUP's tells a deleted key or group apart, as Redis's
        unblocking does). The client's connection being lost ends the wait at once and the
        command is not run again (an XREADGROUP must not deliver entries to a client that is
        gone). The time spent waiting is added to `client.blocked_ns`, which the counting
        leaves out. A long range read comes back as a `SlicedRange`, frozen when it ran and
        produced here a slice per turn of the event loop (`streams.commands.slices`).
        """
        lost = None if client is None else client.session.lost
        deadline: float | None = None
        while True:
            slicing = SLICING.set(True)
            try:
                ran = self.backend.execute(cmd, args)
            finally:
                SLICING.reset(slicing)
            if isinstance(ran.reply, SlicedRange):  # a long range: produced between others
                sliced = ran.reply
                while not sliced.step():
                    await asyncio.sleep(0)
                return sliced.result(), ran.shards
            block = ran.block
            if block is None or (ran.reply is not NULL_ARRAY and ran.reply is not None):
                return ran.reply, ran.shards
            if deadline is None:
                deadline = (
                    float("inf")
                    if block.timeout_ms == 0
                    else time.monotonic() + block.timeout_ms / 1000
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (lost is not None and lost.done()):
                return NULL_ARRAY, ran.shards
            waiting = perf_counter_ns()
            if block.retry_ms is not None:  # XREADGROUP ... CLAIM: entries become claimable
                remaining = min(remaining, block.retry_ms / 1000)
            await self.backend.wait(block.keys, remaining, lost)
            if client is not None:
                client.blocked_ns += perf_counter_ns() - waiting
            if lost is not None and lost.done():
                return NULL_ARRAY, ran.shards
            args = list(block.args)  # run again (a shard reloading now answers LOADING)
            cmd = block.rerun or cmd

    async def exec_transaction(self, client: Client, args: list[bytes]) -> Reply:
        """EXEC: every queued command in one go (nothing awaits in between), so nothing of
        another client or region comes in between, later commands see earlier writes, and the
        ops of each shard land in one write batch. A blocking read answers at once as timed out,
        as in Redis."""
        try:
            tx = transactions.take(client)
        except CommandError as exc:
            return exc
        replies: list[Reply] = []
        client.executing = len(tx.queued)
        try:
            for cmd, queued in tx.queued:
                started = perf_counter_ns()
                reply = await self._exec_one(client, cmd, queued)
                self.stats.record(client, cmd, EXECUTED, queued, reply, perf_counter_ns() - started)
                replies.append(reply)
        finally:
            client.executing = None
        return replies

    async def _exec_one(self, client: Client, cmd: Command, args: list[bytes]) -> Reply:
        try:
            builtin = router.builtin_name(cmd)
            if builtin is not None:  # none of them awaits anything (no_multi)
                return await self.builtins[builtin](client, args)
            return self.backend.execute(cmd, args).reply
        except Exception:  # one broken command must not lose the others' replies
            log.exception("command %r inside EXEC failed", args[:1])
            return CommandError("ERR internal error, see the node's log")


def _pending_own_write(client: Client) -> Until | None:
    """The client's newest write, while its batch is not committed (`_note_own_write`)."""
    own = client.own_write
    return None if own is None or own.done() else own


def _dropped_error(request: Dropped) -> CommandError:
    """The refusal of a request the parser dropped an argument of: the phrase of the op-log size
    refusal (`shards.ShardSet`), since no longer value could be logged."""
    return CommandError(
        f"ERR the request is too large for the op log, nothing was applied: an argument of"
        f" {request.longest} bytes, the log takes at most {request.kept} (max.message.bytes);"
        f" the argument was not kept"
    )


def _group_read_block(cmd: Command, args: list[bytes]) -> int | None:
    """BLOCK's milliseconds of an XREADGROUP (None: not one, or not blocking)."""
    if cmd.name != "xreadgroup":
        return None
    for i, arg in enumerate(args[:-1]):
        word = arg.lower()
        if word == b"streams":
            return None
        if word == b"block":
            try:
                return int(args[i + 1])
            except ValueError:
                return None
    return None
