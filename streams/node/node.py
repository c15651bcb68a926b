"""The region node: command executor, writer and materializer on one asyncio loop.

Commands run one at a time under `_lock` (Redis-like atomicity): dispatch reads the materialized
state, the replicated ops it asks for are appended to Kafka, and only after Kafka acknowledged them
are they committed to the state and is the client answered. Remote ops arrive from the
materializer thread as batches, are queued, and are applied under the same lock, so a command
never sees the state change between reading it and committing its ops.

Local ops (PEL, consumers, cursors) are applied at once and appended in the background at least
every `LOCAL_FLUSH_S`; losing the last few in a crash re-delivers entries, it never loses one.
Consecutive-XACK effects are coalesced and logged every `ACK_FLUSH_S` (and on CRDT.FLUSH).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from streams.commands.base import Context, Result, parse_int
from streams.commands.reply import NULL_ARRAY, OK, Map, Reply
from streams.commands.table import dispatch
from streams.crdt import ops
from streams.crdt.region import Region
from streams.errors import CommandError
from streams.ids import IdMode
from streams.node import connection
from streams.node.materializer import Batch, Materializer
from streams.node.waiters import Waiters
from streams.node.writer import RegionWriter, WriterError, WriterFenced
from streams.resp.server import Session, serve
from topology.config import RegionConfig, Topology
from topology.topics import ensure_topics, local_topic, oplog_topic

log = logging.getLogger(__name__)

LOCAL_FLUSH_S = 0.05
ACK_FLUSH_S = 0.1

Clock = Callable[[], float]
Builtin = Callable[[Session, list[bytes]], Awaitable[Reply]]


class RegionNode:
    def __init__(
        self,
        topology: Topology,
        region_name: str,
        clock: Clock = time.time,
        debug_clock: bool = False,
    ) -> None:
        self.topology = topology
        self.config: RegionConfig = topology.region(region_name)
        self.name = region_name
        self.region = Region(self.config.id, IdMode.parse(self.config.id_mode))
        self.region_names = {r.id: r.name for r in topology.regions}
        self.oplog = oplog_topic(region_name)
        self.local = local_topic(region_name)
        self._clock = clock
        self._debug_clock = debug_clock
        self._pinned_ms: int | None = None
        self._lock = asyncio.Lock()
        self._inbox: deque[Batch] = deque()
        self._held_local: deque[ops.LocalOp] = deque()
        self._unflushed_local: list[ops.LocalOp] = []
        self.waiters = Waiters()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._server: asyncio.Server | None = None
        self.write_fault: str | None = None
        self.fatal: str | None = None
        self.last_ts: dict[int, int] = {}
        self.writer = RegionWriter(self.config.bootstrap, region_name, self.oplog, self.local)
        self.materializer = Materializer(
            self.config.bootstrap,
            self.local,
            self._on_batch_thread,
            self._on_error_thread,
            name=f"materializer-{region_name}",
        )

    # --- life cycle ---

    def now_ms(self) -> int:
        if self._pinned_ms is not None:
            return self._pinned_ms
        return int(self._clock() * 1000)

    async def start(self, serve_resp: bool = True, catch_up_timeout: float = 120.0) -> None:
        self._loop = asyncio.get_running_loop()
        await self._loop.run_in_executor(
            None, ensure_topics, self.config.bootstrap, [self.oplog, self.local]
        )
        await self._loop.run_in_executor(None, self.writer.start)
        self.materializer.start()
        deadline = time.monotonic() + catch_up_timeout
        while not self.materializer.caught_up.is_set():
            if self.fatal:
                raise RuntimeError(self.fatal)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: did not catch up with the op logs in time")
            await asyncio.sleep(0.01)
        await self._drain()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        if serve_resp:
            self._server = await serve(self.handle, self.config.bind, self.config.resp_port)
        log.info("%s serving RESP on %s:%s", self.name, self.config.bind, self.config.resp_port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        try:
            await self._flush_local()
        except WriterError:
            pass
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.materializer.stop)
        await loop.run_in_executor(None, self.writer.close)

    # --- remote ops ---

    def _on_batch_thread(self, batch: Batch) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._enqueue, batch)

    def _on_error_thread(self, exc: Exception) -> None:
        self.fatal = str(exc)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(log.error, "materializer stopped: %s", exc)

    def _enqueue(self, batch: Batch) -> None:
        self._inbox.append(batch)
        asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        async with self._lock:
            self._apply_inbox()

    def _apply_inbox(self) -> None:
        touched: set[bytes] = set()
        while self._inbox:
            for item in self._inbox.popleft():
                record = item.record
                if isinstance(record, ops.Op):
                    for applied in self.region.receive(record):
                        touched.add(applied.body.key)
                        self.last_ts[applied.origin] = applied.ts_ms
                elif record.region == self.region.id and record.seq > self.region.local_seq:
                    self._held_local.append(record)
        while self._held_local and self._covered(self._held_local[0].ctx):
            record = self._held_local.popleft()
            if record.seq > self.region.local_seq:
                self.region.apply_local(record)
                touched.add(record.body.key)
        self.waiters.wake(touched)

    def _covered(self, ctx: ops.Vector) -> bool:
        applied = self.region.causal.applied
        return all(applied.get(r, 0) >= s for r, s in ctx)

    # --- commands ---

    async def handle(self, session: Session, args: list[bytes]) -> Reply:
        name = args[0].lower()
        builtin = self._builtin(name)
        if builtin is not None:
            return await builtin(session, args)
        deadline: float | None = None
        while True:
            async with self._lock:
                result = dispatch(self._context(), args)
                reply = await self._commit(result)
            block = result.block
            if block is None or (reply is not NULL_ARRAY and reply is not None):
                return reply
            if deadline is None:
                deadline = (
                    float("inf")
                    if block.timeout_ms == 0
                    else time.monotonic() + block.timeout_ms / 1000
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return NULL_ARRAY
            await self.waiters.wait(block.keys, remaining)
            args = list(block.args)

    def _context(self) -> Context:
        return Context(
            self.region.state,
            self.region.id,
            self.region.mode,
            self.now_ms(),
            self.region.vector,
            self.region_names,
        )

    async def _commit(self, result: Result) -> Reply:
        if not result.ops or isinstance(result.reply, CommandError):
            return result.reply
        now = self.now_ms()
        replicated = [b for b in result.ops if ops.is_replicated(b)]
        if replicated:
            refused = self._write_refusal()
            if refused is not None:
                return refused
            prepared = self.region.prepare_all(replicated, now)  # type: ignore[arg-type]
            try:
                await self.writer.append(prepared, [])
            except WriterFenced as exc:
                self.write_fault = str(exc)
                return CommandError(f"ERR {exc}")
            except WriterError as exc:
                self.write_fault = str(exc)
                asyncio.ensure_future(self._reread_own_log())
                return CommandError(f"ERR {exc}; writes are refused until the log is re-read")
            for op in prepared:
                self.region.commit(op)
                self.last_ts[op.origin] = op.ts_ms
        for body in result.ops:
            if not ops.is_replicated(body):
                self._unflushed_local.append(self.region.issue_local(body, now))  # type: ignore[arg-type]
        self.waiters.wake(body.key for body in result.ops)
        return result.reply

    def _write_refusal(self) -> CommandError | None:
        if self.writer.fenced:
            return CommandError(f"ERR {self.write_fault or 'this region writer was fenced'}")
        if self.write_fault is not None:
            return CommandError(
                f"ERR writes refused until the op log is re-read: {self.write_fault}"
            )
        if self.fatal is not None:
            return CommandError(f"ERR writes refused: {self.fatal}")
        return None

    async def _reread_own_log(self) -> None:
        """After a failed append: wait until the materializer has seen the end of every log again
        (so an op that did land after all is applied, and its seq is never reused), then accept
        writes again."""
        seen = self.materializer.eof_events
        while not self.writer.fenced:
            await asyncio.sleep(0.2)
            if self.materializer.eof_events > seen and self.materializer.caught_up.is_set():
                await self._drain()
                self.write_fault = None
                return

    # --- background work ---

    async def _housekeeping(self) -> None:
        last_ack = time.monotonic()
        while True:
            await asyncio.sleep(LOCAL_FLUSH_S)
            try:
                await self._flush_local()
                if time.monotonic() - last_ack >= ACK_FLUSH_S:
                    last_ack = time.monotonic()
                    await self.flush_ack_effects()
            except WriterError as exc:
                log.warning("%s: background append failed: %s", self.name, exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: housekeeping failed", self.name)

    async def _flush_local(self) -> None:
        if not self._unflushed_local:
            return
        batch, self._unflushed_local = self._unflushed_local, []
        try:
            await self.writer.append([], batch)
        except WriterError:
            self._unflushed_local[:0] = batch
            raise

    async def flush_ack_effects(self) -> int:
        async with self._lock:
            effects = self.region.ack_effects()
            if not effects or self._write_refusal() is not None:
                return 0
            prepared = self.region.prepare_all(list(effects), self.now_ms())
            await self.writer.append(prepared, [])
            for op in prepared:
                self.region.commit(op)
            return len(prepared)

    # --- admin and connection commands ---

    def _builtin(self, name: bytes) -> Builtin | None:
        return {
            b"ping": self._sync(connection.ping),
            b"echo": self._sync(connection.echo),
            b"hello": self._hello,
            b"client": self._sync(connection.client),
            b"select": self._sync(connection.select),
            b"quit": self._sync(connection.quit_),
            b"command": self._sync(connection.command_info),
            b"info": self._info,
            b"crdt.flush": self._crdt_flush,
            b"crdt.info": self._crdt_info,
            b"crdt.clock": self._crdt_clock,
        }.get(name)

    @staticmethod
    def _sync(fn: Callable[[Session, list[bytes]], Reply]) -> Builtin:
        async def run(session: Session, args: list[bytes]) -> Reply:
            try:
                return fn(session, args)
            except CommandError as exc:
                return exc

        return run

    async def _hello(self, session: Session, args: list[bytes]) -> Reply:
        try:
            return connection.hello(session, args, {})
        except CommandError as exc:
            return exc

    async def _info(self, session: Session, args: list[bytes]) -> Reply:
        return connection.info(session, args, self.info_sections)

    async def _crdt_flush(self, session: Session, args: list[bytes]) -> Reply:
        """Log what is held back for coalescing (XACK effects, local ops) now; used by sync()."""
        try:
            await self._flush_local()
            count = await self.flush_ack_effects()
        except WriterError as exc:
            return CommandError(f"ERR {exc}")
        return count if count else OK

    async def _crdt_clock(self, session: Session, args: list[bytes]) -> Reply:
        """CRDT.CLOCK [ms]: pin (or, without an argument, release) the node's wall clock.

        A test hook, like Redis's DEBUG commands: it lets a seed table's `*` IDs be the exact ones
        the seed prints. Refused unless the node was started with --debug-clock.
        """
        if not self._debug_clock:
            return CommandError("ERR CRDT.CLOCK is disabled: start the node with --debug-clock")
        if len(args) > 2:
            return CommandError("ERR wrong number of arguments for 'crdt.clock' command")
        if len(args) == 1:
            self._pinned_ms = None
            return OK
        try:
            self._pinned_ms = parse_int(args[1])
        except CommandError as exc:
            return exc
        return OK

    async def _crdt_info(self, session: Session, args: list[bytes]) -> Reply:
        info = self.crdt_info()
        return Map(tuple((k.encode(), _reply_value(v)) for k, v in info.items()))

    def crdt_info(self) -> dict[str, object]:
        vector = self.region.vector
        now = self.now_ms()
        lag = {
            self.region_names.get(o, f"r{o}"): max(0, now - ts)
            for o, ts in sorted(self.last_ts.items())
            if o != self.region.id
        }
        return {
            "region": self.name,
            "region_id": self.region.id,
            "id_mode": self.region.mode.value,
            "vector": " ".join(
                f"{self.region_names.get(o, f'r{o}')}={s}" for o, s in sorted(vector.items())
            ),
            "waiting_ops": self.region.causal.waiting,
            "ms_since_last_op": " ".join(f"{k}={v}" for k, v in lag.items()),
            "local_seq": self.region.local_seq,
            "write_fault": self.write_fault or "",
            "materializer_error": self.fatal or "",
            "topics": " ".join(f"{t}@{p}" for t, p in sorted(self.materializer.positions.items())),
        }

    def info_sections(self) -> dict[str, dict[str, object]]:
        crdt = self.crdt_info()
        return {
            "server": connection.server_section(),
            "replication": {
                "role": "master",
                "crdt_region": crdt["region"],
                "crdt_vector": crdt["vector"],
                "crdt_ms_since_last_op": crdt["ms_since_last_op"],
            },
            "keyspace": {"db0": f"keys={sum(1 for _ in self.region.state.existing_keys())}"},
        }


def _reply_value(value: object) -> Reply:
    if isinstance(value, int):
        return value
    return str(value).encode()
