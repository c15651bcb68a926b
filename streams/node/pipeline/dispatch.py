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
from collections.abc import Awaitable, Callable
from time import perf_counter_ns
from typing import Protocol

from streams import errors
from streams.commands.base import Command
from streams.commands.catalogue import unsupported
from streams.commands.slices import SLICING, SlicedRange
from streams.errors import CommandError
from streams.node.pipeline import auth, router, transactions
from streams.node.pipeline.clients import Client, Clients, Queued
from streams.node.pipeline.replies import ReplyPolicy
from streams.node.pipeline.stats import EXECUTED, QUEUED, REJECTED, UNKNOWN, Stats
from streams.node.runtime.backend import Backend, Ran
from streams.reply import NULL_ARRAY, Reply
from streams.resp.request import Dropped
from streams.resp.server import Held, Session

log = logging.getLogger(__name__)

Builtin = Callable[[Client, list[bytes]], Awaitable[Reply]]

Answer = tuple[Reply, Ran | None, Command | None, int]
"""What `_handle` gives back: the reply, how the stream command ran (None: it did not run on
the shards), the command (None: no such command here) and what became of the request
(`streams.node.pipeline.stats`)."""


class Routing(Protocol):
    """Where a request may run when the region's shards are spread over several nodes (the
    Redis Cluster protocol, `streams.node.pipeline.cluster`): None to run it here, else the MOVED or
    CROSSSLOT error to answer."""

    def redirect(self, client: Client, cmd: Command, args: list[bytes]) -> CommandError | None: ...

    def redirect_exec(self, client: Client, queued: list[Queued]) -> CommandError | None: ...


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
        self.replies = ReplyPolicy(backend, self.run)

    def bind(self, handlers: dict[str, Builtin]) -> None:
        self.builtins = router.bind(handlers)

    async def handle(self, session: Session, args: list[bytes]) -> Reply | Held:
        """The RESP entry point: one request of one connection, answered in order. Every request
        is counted here, once, when it answered (`streams.node.pipeline.stats`); when its reply
        may go out is the reply policy's decision (`streams.node.pipeline.replies`)."""
        client = self.clients.find(session) or self._register(session)
        await self.backend.paused()
        started = perf_counter_ns()
        reply, ran, cmd, what = await self._handle(client, args)
        took = perf_counter_ns() - started
        if client.blocked_ns:  # a blocked command counts the time it ran, not the wait
            took -= client.blocked_ns
            client.blocked_ns = 0
        self.stats.record(client, cmd, what, args, reply, took)
        if ran is not None and cmd is not None and ran.shards is not None:
            return self.replies.release(client, cmd, args, ran)
        return self.replies.hold(reply, None if ran is None else ran.shards)

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
        ran = self.replies.answer_now(client, found, args)  # a batch is slow: the log's state
        if ran is None:
            ran = await self.run(found, args, client)
        return ran.reply, ran, found, EXECUTED

    def _redirect(
        self, client: Client, cmd: Command, builtin: str | None, args: list[bytes]
    ) -> CommandError | None:
        """Redis Cluster's check (after authentication and arity, before queueing or running):
        a command redirected inside MULTI dooms the transaction; EXEC checks the whole queue and
        a redirected EXEC discards it."""
        assert self.routing is not None
        tx = client.transaction
        if builtin == "exec":
            moved = self.routing.redirect_exec(client, tx.queued) if tx is not None else None
            if moved is not None:
                client.transaction = None
            return moved
        moved = self.routing.redirect(client, cmd, args)
        if moved is not None and tx is not None:
            tx.dirty = True
        return moved

    async def run(self, cmd: Command, args: list[bytes], client: Client | None = None) -> Ran:
        """A stream command: executed at once; a blocking read that found nothing waits for a
        change of its keys and runs again.

        The timeout counts from the first run (BLOCK 0: forever); a re-run uses the request's
        resolved arguments (XREAD's `$` became the last ID of the first run) and the command's
        re-run row, if it has one (XREADGROUP's tells a deleted key or group apart, as Redis's
        unblocking does). The client's connection being lost ends the wait at once and the
        command is not run again (an XREADGROUP must not deliver entries to a client that is
        gone). The time spent waiting is added to `client.blocked_ns`, which the counting
        leaves out. A long range read comes back as a `SlicedRange`, frozen when it ran and
        produced here a slice per turn of the event loop (`streams.commands.slices`). What it
        returns carries the BLOCK of a read that blocked (`Ran.block_ms`), whatever its last run
        found.
        """
        lost = None if client is None else client.session.lost
        deadline: float | None = None
        block_ms: int | None = None
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
                return Ran(sliced.result(), None, ran.shards, ran.block_ms)
            block = ran.block
            if block is None or (ran.reply is not NULL_ARRAY and ran.reply is not None):
                if block_ms is not None and ran.block_ms is None:
                    return Ran(ran.reply, None, ran.shards, block_ms)
                return ran
            block_ms = block.timeout_ms
            if deadline is None:
                deadline = (
                    float("inf")
                    if block.timeout_ms == 0
                    else time.monotonic() + block.timeout_ms / 1000
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (lost is not None and lost.done()):
                return Ran(NULL_ARRAY, None, ran.shards, block_ms)
            waiting = perf_counter_ns()
            if block.retry_ms is not None:  # XREADGROUP ... CLAIM: entries become claimable
                remaining = min(remaining, block.retry_ms / 1000)
            await self.backend.wait(block.keys, remaining, lost)
            if client is not None:
                client.blocked_ns += perf_counter_ns() - waiting
            if lost is not None and lost.done():
                return Ran(NULL_ARRAY, None, ran.shards, block_ms)
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


def _dropped_error(request: Dropped) -> CommandError:
    """The refusal of a request the parser dropped an argument of: the phrase of the op-log size
    refusal (`shards.ShardSet`), since no longer value could be logged."""
    return CommandError(
        f"ERR the request is too large for the op log, nothing was applied: an argument of"
        f" {request.longest} bytes, the log takes at most {request.kept} (max.message.bytes);"
        f" the argument was not kept"
    )
