"""The region node: command executor, write path and materializer on one asyncio loop.

Commands run one at a time on the event loop (Redis-like atomicity, no lock: dispatching a command
and applying its ops to the state never awaits). A write's ops are applied at dispatch and join
the write path's open batch (`writepath`: group commit, one Kafka transaction per batch); its
reply, and the reply of any read that may have seen uncommitted ops, is held until that batch
committed. Remote ops arrive from the materializer thread as batches and are applied on the loop
between commands. Local ops (PEL, consumers, cursors) ride in the same batches, to
`<region>.local`. Consecutive-XACK effects are coalesced and logged every `ACK_FLUSH_S` (and on
CRDT.FLUSH).

When a batch fails, its replies and those of the batch built on it fail, and the node reloads its
state from the log (answering LOADING meanwhile) before it serves again; see `writepath`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from streams import errors
from streams.commands.base import Command, Context, Result, parse_int
from streams.commands.catalogue import unsupported
from streams.commands.table import run
from streams.crdt import ops
from streams.crdt.region import Region
from streams.errors import CommandError
from streams.ids import IdMode
from streams.node import (
    auth,
    connection,
    introspection,
    router,
    settings,
    snapshots,
    transactions,
)
from streams.node import clients as client_commands
from streams.node import info as info_command
from streams.node.clients import Client, Clients
from streams.node.materializer import Batch, Materializer, RecordAt
from streams.node.waiters import Waiters
from streams.node.writepath import WriteBatch, WritePath
from streams.node.writer import RegionWriter, WriterError
from streams.crdt.fold import Fold
from streams.reply import NULL_ARRAY, OK, Map, Reply
from streams.resp.server import Held, Session, serve
from streams.snapshot import Positions, read_snapshot
from topology.config import RegionConfig, Topology
from topology.topics import ensure_topics, local_topic, oplog_topic, snapshot_topic

log = logging.getLogger(__name__)

ACK_FLUSH_S = 0.1
RECOVERY_RETRY_S = 1.0
TOMBSTONE_GC_S = 5.0
"""How often DEL / XGROUP DESTROY tombstones that every region has applied are dropped."""

DEFAULT_CATCH_UP_TIMEOUT_S = 300.0
DEFAULT_SNAPSHOT_EVERY_OPS = 100_000
DEFAULT_SNAPSHOT_EVERY_S = 600.0

Clock = Callable[[], float]
Builtin = Callable[[Client, list[bytes]], Awaitable[Reply]]


class CatchUpTimeout(TimeoutError):
    """The node could not read its op logs to their end in time; the text says how far it got."""


LOADING = CommandError(errors.LOADING)

Booted = tuple[Region, Positions]


class RegionNode:
    def __init__(
        self,
        topology: Topology,
        region_name: str,
        clock: Clock = time.time,
        debug_clock: bool = False,
        debug_faults: bool = False,
        bind: str | None = None,
        port: int | None = None,
        auth_config: auth.AuthConfig | None = None,
        snapshot: str | None = None,
        snapshot_every_ops: int = DEFAULT_SNAPSHOT_EVERY_OPS,
        snapshot_every_s: float = DEFAULT_SNAPSHOT_EVERY_S,
        skip_records: frozenset[RecordAt] = frozenset(),
    ) -> None:
        """`bind` / `port` override the topology's RESP address; `auth_config` sets passwords;
        `snapshot`: a snapshot file (streams snapshot, streams spark snapshot) to boot from,
        reading only the logs' tails (else the newest complete one in `<region>.snapshot`);
        `snapshot_every_ops` / `snapshot_every_s`: when the node writes a snapshot there (0: never
        for that reason); `skip_records`: (topic, partition, offset) of records that do not
        decode and that an operator decided to skip (each skip is logged)."""
        self.topology = topology
        config = topology.region(region_name)
        if bind is not None or port is not None:
            config = dataclasses.replace(
                config,
                bind=config.bind if bind is None else bind,
                resp_port=config.resp_port if port is None else port,
            )
        self.config: RegionConfig = config
        self.auth = auth_config or auth.AuthConfig()
        self.settings = settings.Settings(
            settings.default_settings(config.resp_port, config.bind)
        )
        self.stats = info_command.Stats()
        self.clients = Clients()
        self._builtins: dict[str, Builtin] = router.bind(self._builtin_handlers())
        self._started = time.time()
        self._run_id = secrets.token_hex(20)
        self.name = region_name
        self.region = Region(self.config.id, IdMode.parse(self.config.id_mode))
        self.region_names = {r.id: r.name for r in topology.regions}
        self.oplog = oplog_topic(region_name)
        self.local = local_topic(region_name)
        self._clock = clock
        self._debug_clock = debug_clock
        self._debug_faults = debug_faults
        self._pinned_ms: int | None = None
        self._inbox: deque[Batch] = deque()
        self._held_local: deque[ops.LocalOp] = deque()
        self._fold: Fold | None = None
        self.snapshot_path = snapshot
        self.booted_from = "full replay of the logs"
        self.snapshot_topic = snapshot_topic(region_name)
        self.snapshot_every_ops = snapshot_every_ops
        self.snapshot_every_s = snapshot_every_s
        self.skip_records = skip_records
        self._quiet: asyncio.Event | None = None
        self._snapshotting = False
        self._snapshot_at = (0, time.monotonic())  # (committed ops, when) of the last one
        self.snapshots_taken = 0
        self.tombstones_collected = 0
        self.last_snapshot = ""
        self.last_snapshot_pause_ms = 0.0
        self._applied_pos: dict[tuple[str, int], int] = {}
        self.boot_records = 0
        self.waiters = Waiters()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self._server: asyncio.Server | None = None
        self.write_fault: str | None = None
        self.loading: str | None = "starting"
        self.fatal: str | None = None
        self.last_ts: dict[int, int] = {}
        self.writer = RegionWriter(self.config.bootstrap, region_name, self.oplog, self.local)
        self.writepath = WritePath(self.writer, self._on_committed, self._on_failed)
        self._generation = 0
        self.materializer = self._new_materializer()

    def _new_materializer(self, start: dict[str, int] | None = None) -> Materializer:
        """A materializer whose batches reach the node only while it is the current one (after a
        reload, the old one's late batches are dropped), reading each topic from `start`."""
        self._generation += 1
        generation = self._generation

        def on_batch(batch: Batch) -> None:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._enqueue, generation, batch)

        return Materializer(
            self.config.bootstrap,
            self.local,
            on_batch,
            self._on_error_thread,
            start_offsets=start,
            name=f"materializer-{self.name}",
            # A fenced node keeps reading its own logs: another writer appends to them now.
            own_topics=frozenset() if self.writer.fenced else frozenset({self.oplog, self.local}),
            skip_records=self.skip_records,
        )

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        """Run a background task, keeping a reference until it ends (asyncio keeps only a weak
        one: an unreferenced task may be collected mid-flight)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- life cycle ---

    def now_ms(self) -> int:
        if self._pinned_ms is not None:
            return self._pinned_ms
        return int(self._clock() * 1000)

    async def start(
        self, serve_resp: bool = True, catch_up_timeout: float = DEFAULT_CATCH_UP_TIMEOUT_S
    ) -> None:
        """Read every op log to its end (the backlog), then serve.

        Raises `CatchUpTimeout`, naming per topic how far reading got and where the end is,
        when the backlog is not read within `catch_up_timeout` seconds.
        """
        self._loop = asyncio.get_running_loop()
        await self._loop.run_in_executor(
            None,
            ensure_topics,
            self.config.bootstrap,
            [self.oplog, self.local, self.snapshot_topic],
        )
        await self._loop.run_in_executor(None, self.writer.start)
        booted = await self._loop.run_in_executor(None, self._read_snapshot)
        await self._catch_up(catch_up_timeout, booted)
        self.loading = None
        self.writepath.start()
        self._spawn(self._housekeeping())
        if serve_resp:
            self._server = await serve(self.handle, self.config.bind, self.config.resp_port)
        log.info("%s serving RESP on %s:%s", self.name, self.config.bind, self.config.resp_port)

    def _read_snapshot(self) -> Booted | None:
        """The state and positions to boot from: the snapshot file given, else the newest
        complete snapshot in `<region>.snapshot` (older ones if it does not read back), else
        None (a full replay)."""
        if self.snapshot_path is None:
            found = snapshots.load_newest(
                self.config.bootstrap, self.snapshot_topic, self.region.id
            )
            if found is None:
                return None
            snapshot_id, region, positions = found
            self.booted_from = f"snapshot {snapshot_id} from {self.snapshot_topic}"
            return region, positions
        with open(self.snapshot_path, "rb") as fp:
            region, positions, meta = read_snapshot(fp)
        if region.id != self.region.id:
            raise ValueError(
                f"{self.snapshot_path} is a snapshot of region id {region.id}, not of "
                f"{self.name} (id {self.region.id})"
            )
        self.booted_from = f"snapshot file {self.snapshot_path}"
        return region, positions

    async def _catch_up(self, timeout: float, booted: Booted | None = None) -> None:
        """Fold every log from the start (or from a snapshot's positions) to its end.

        The fold gates replicated ops on the region's local ops (`streams.crdt.fold`), so each
        local op (a delivery, an ack) is applied on the state it was made on, as replay and
        Spark do; the materializer reads `.local` first for that."""
        if booted is None:
            region = Region(self.config.id, IdMode.parse(self.config.id_mode))
            positions: dict[tuple[str, int], int] = {}
        else:
            region, positions = booted
        self.region = region
        self._fold = Fold(region, positions=positions)
        if booted is not None or self.materializer.caught_up.is_set():
            self.materializer = self._new_materializer({t: o for (t, _p), o in positions.items()})
        self.materializer.start()
        deadline = time.monotonic() + timeout
        while not self.materializer.caught_up.is_set():
            if self.fatal:
                raise RuntimeError(self.fatal)
            if time.monotonic() > deadline:
                raise CatchUpTimeout(
                    f"{self.name}: did not catch up with the op logs within "
                    f"{timeout:g} s (--catch-up-timeout): "
                    f"{self.materializer.records_read} records read, "
                    f"{self.materializer.progress()}"
                )
            await asyncio.sleep(0.01)
        self._apply_inbox()
        self._fold.finish()
        self._applied_pos = self._fold.safe_positions()
        self._fold = None
        self.boot_records = self.materializer.records_read
        self._snapshot_at = (self.writepath.ops, time.monotonic())
        self._apply_inbox()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        try:
            await asyncio.wait_for(self.writepath.stop(), 15)
        except (TimeoutError, WriterError):
            pass
        for task in list(self._tasks):
            task.cancel()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.materializer.stop)
        await loop.run_in_executor(None, self.writer.close)

    # --- remote ops ---

    def _on_error_thread(self, exc: Exception) -> None:
        self.fatal = str(exc)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(log.error, "materializer stopped: %s", exc)

    def _enqueue(self, generation: int, batch: Batch) -> None:
        if generation != self._generation:
            return  # a replaced materializer's late batch
        self._inbox.append(batch)
        self._apply_inbox()

    def _apply_inbox(self) -> None:
        fold = self._fold
        if fold is not None:  # catching up: the fold orders local and replicated ops
            while self._inbox:
                for item in self._inbox.popleft():
                    fold.feed((item.topic, item.partition), item.offset, item.record)
            return
        touched: set[bytes] = set()
        applied_pos = self._applied_pos
        while self._inbox:
            for item in self._inbox.popleft():
                applied_pos[(item.topic, item.partition)] = item.offset + 1
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

    async def handle(self, session: Session, args: list[bytes]) -> Reply | Held:
        """The RESP entry point: one request of one connection, answered in order.

        Redis's processCommand order: the command must exist, the connection must be
        authenticated, the arity must fit; inside MULTI the command is then queued; otherwise a
        connection command runs here, a Redis command we do not implement is refused clearly,
        and a stream command is dispatched (and may block). The reply is held until the write
        batch holding anything it may have seen is committed.
        """
        client = self.clients.find(session) or self._register(session)
        if self._quiet is not None:  # a snapshot is being forked: a few milliseconds
            await self._quiet.wait()
        reply = await self._handle(client, args)
        self.stats.count(reply)
        return self._held(reply)

    def _held(self, reply: Reply) -> Reply | Held:
        pending = self.writepath.pending()
        return reply if pending is None else Held(reply, pending)

    def _register(self, session: Session) -> Client:
        client = self.clients.add(session)
        self.stats.connections += 1
        auth.start(client, self.auth)
        return client

    async def _handle(self, client: Client, args: list[bytes]) -> Reply:
        client.last_seen = time.monotonic()
        try:
            found = router.resolve(args)
        except CommandError as exc:
            return transactions.reject(client, args[0].lower(), exc)
        if isinstance(found, str):
            client.last_cmd = found
            if not client.authenticated:
                return CommandError(errors.NOAUTH)
            return transactions.reject(client, args[0].lower(), unsupported(found))
        client.last_cmd = found.name
        if not client.authenticated and "no_auth" not in found.flags:
            return CommandError(errors.NOAUTH)
        if not found.arity_ok(len(args)):
            return transactions.reject(client, args[0].lower(), errors.wrong_arity(found.name))
        builtin = router.builtin_name(found)
        tx = client.transaction
        if tx is not None and builtin not in transactions.IMMEDIATE:
            refusal = CommandError(errors.NOT_IN_MULTI) if "no_multi" in found.flags else None
            return tx.queue(found, args, refusal)
        if builtin is not None:
            return await self._builtins[builtin](client, args)
        if self.loading is not None:
            return LOADING
        return await self._run(found, args, client.session.lost)

    async def _run(
        self, cmd: Command, args: list[bytes], lost: asyncio.Future[None] | None = None
    ) -> Reply:
        """A stream command: dispatch and apply at once; a blocking read that found nothing
        waits for a change of its keys and runs again.

        The timeout counts from the first run (BLOCK 0: forever); a re-run uses the request's
        resolved arguments (XREAD's `$` became the last ID of the first run). `lost` resolves when
        the client disconnects: the wait ends at once and the command is not run again (an
        XREADGROUP must not deliver entries to a client that is gone).
        """
        deadline: float | None = None
        while True:
            result = run(cmd, self._context(), args)
            reply = self._issue(result)
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
            if remaining <= 0 or (lost is not None and lost.done()):
                return NULL_ARRAY
            await self.waiters.wait(block.keys, remaining, lost)
            if lost is not None and lost.done():
                return NULL_ARRAY
            if self.loading is not None:
                return LOADING
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

    def _issue(self, result: Result) -> Reply:
        """Apply a dispatched command's ops to the state now and put them in the open batch
        (numbered, with the causal context of this moment); the caller holds the reply."""
        if not result.ops or isinstance(result.reply, CommandError):
            return result.reply
        now = self.now_ms()
        replicated = [b for b in result.ops if ops.is_replicated(b)]
        if replicated:
            refused = self._write_refusal()
            if refused is not None:
                return refused
        prepared = self.region.prepare_all(replicated, now) if replicated else []  # type: ignore[arg-type]
        for op in prepared:
            self.region.commit(op)
        local = [
            self.region.issue_local(body, now)  # type: ignore[arg-type]
            for body in result.ops
            if not ops.is_replicated(body)
        ]
        self.writepath.add(prepared, local)
        self.waiters.wake(body.key for body in result.ops)
        return result.reply

    def _on_committed(self, batch: WriteBatch) -> None:
        for op in batch.replicated:
            self.last_ts[op.origin] = op.ts_ms

    def _write_refusal(self) -> CommandError | None:
        if self.writer.fenced:
            return CommandError(f"ERR {self.write_fault or 'this region writer was fenced'}")
        if self.loading is not None:
            return LOADING
        if self.write_fault is not None:
            return CommandError(f"ERR writes refused: {self.write_fault}")
        if self.fatal is not None:
            return CommandError(f"ERR writes refused: {self.fatal}")
        return None

    # --- failure: reload from the log ---

    def _on_failed(self, exc: WriterError) -> None:
        """A batch did not commit: the state may hold ops the log does not. Serve nothing until
        it was rebuilt from the log (the log decides whether the failed batch landed)."""
        self.write_fault = str(exc)
        log.error("%s: a write batch failed (%s): reloading the state from the log", self.name, exc)
        if self.loading is None:
            self.loading = f"reloading after a failed write: {exc}"
            self._spawn(self._recover())

    async def _recover(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            old = self.materializer
            await loop.run_in_executor(None, old.stop)
            self._inbox.clear()
            self._held_local.clear()
            self.last_ts = {}
            self.fatal = None
            self.materializer = self._new_materializer()
            self.booted_from = "full replay of the logs (reload after a failed write)"
            try:
                booted = await loop.run_in_executor(None, self._read_snapshot)
                await self._catch_up(DEFAULT_CATCH_UP_TIMEOUT_S, booted)
            except (CatchUpTimeout, RuntimeError) as exc:
                log.warning("%s: reloading failed (%s); retrying", self.name, exc)
                await asyncio.sleep(RECOVERY_RETRY_S)
                continue
            break
        self.loading = None
        if not self.writer.fenced:
            self.write_fault = None
        self.waiters.wake_all()
        log.warning("%s: state reloaded from the log; serving again", self.name)

    # --- background work ---

    async def _housekeeping(self) -> None:
        next_gc = time.monotonic() + TOMBSTONE_GC_S
        while True:
            await asyncio.sleep(ACK_FLUSH_S)
            try:
                self.flush_ack_effects()
                if time.monotonic() >= next_gc and self.loading is None:
                    next_gc = time.monotonic() + TOMBSTONE_GC_S
                    self.tombstones_collected += self.region.collect_tombstones(
                        sorted(self.region_names)
                    )
                if self._snapshot_due():
                    self._spawn(self.take_snapshot())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: housekeeping failed", self.name)

    # --- snapshots (streams/node/snapshots.py) ---

    def _snapshot_due(self) -> bool:
        if self._snapshotting or self.loading is not None or self.writer.fenced:
            return False
        ops_then, when = self._snapshot_at
        new_ops = self.writepath.ops - ops_then
        by_ops = self.snapshot_every_ops > 0 and new_ops >= self.snapshot_every_ops
        by_time = (
            self.snapshot_every_s > 0
            and new_ops > 0
            and time.monotonic() - when >= self.snapshot_every_s
        )
        return by_ops or by_time

    def _snapshot_positions(self) -> Positions:
        """The next offset per topic that the state covers: what the node applied from the
        other regions' logs, and for its own logs what its committed transactions wrote."""
        positions = dict(self._applied_pos)
        own = dict(self.materializer.own_positions)
        for topic, offset in self.writer.next_offsets.items():
            own[topic] = max(own.get(topic, 0), offset)
        for topic, offset in own.items():
            positions[(topic, 0)] = max(positions.get((topic, 0), 0), offset)
        return positions

    async def take_snapshot(self) -> str | None:
        """Write a snapshot to `<region>.snapshot`; its id, or None when none could be taken.

        Commands wait while the batch in flight commits and the state is forked (BGSAVE-like:
        the child serializes its copy-on-write image), then go on while the child writes."""
        if self._snapshotting:
            return None
        self._snapshotting = True
        loop = asyncio.get_running_loop()
        try:
            forked: tuple[int, str, str] | None = None
            for _attempt in range(20):
                if self.loading is not None:
                    return None
                quiet = self._quiet = asyncio.Event()
                paused = time.perf_counter()
                try:
                    if await self.writepath.settled() is not None:
                        return None  # the batch failed: the node reloads
                    self._apply_inbox()
                    if (
                        self.writepath.pending() is None
                        and self.region.causal.waiting == 0
                        and not self._held_local
                        and self.loading is None
                    ):
                        snapshot_id = f"{self.now_ms()}-{self.region.vector.get(self.region.id, 0)}"
                        meta = {"writer": f"node {self.name}", "snapshot_id": snapshot_id}
                        pid, path = snapshots.fork_write(
                            self.region, self._snapshot_positions(), self.name, meta
                        )
                        forked = (pid, path, snapshot_id)
                        self._snapshot_at = (self.writepath.ops, time.monotonic())
                finally:
                    self._quiet = None
                    quiet.set()
                    self.last_snapshot_pause_ms = (time.perf_counter() - paused) * 1000
                if forked is not None:
                    break
                await asyncio.sleep(0.05)
            if forked is None:
                log.warning("%s: no quiet moment for a snapshot; trying later", self.name)
                return None
            pid, path, snapshot_id = forked
            try:
                if not await loop.run_in_executor(None, snapshots.wait_child, pid):
                    log.error("%s: the snapshot child failed; no snapshot stored", self.name)
                    return None
                with open(path, "rb") as fp:
                    data = fp.read()
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            await loop.run_in_executor(
                None,
                snapshots.publish,
                self.config.bootstrap,
                self.snapshot_topic,
                snapshot_id,
                data,
            )
            self.snapshots_taken += 1
            self.last_snapshot = snapshot_id
            log.info(
                "%s: snapshot %s stored (%d bytes; commands paused %.1f ms)",
                self.name,
                snapshot_id,
                len(data),
                self.last_snapshot_pause_ms,
            )
            return snapshot_id
        except Exception:
            log.exception("%s: taking a snapshot failed", self.name)
            return None
        finally:
            self._snapshotting = False

    def flush_ack_effects(self) -> int:
        """Issue the consecutive-XACK effects held back for coalescing into the open batch."""
        if self._write_refusal() is not None:
            return 0
        effects = self.region.ack_effects()
        if not effects:
            return 0
        prepared = self.region.prepare_all(list(effects), self.now_ms())
        for op in prepared:
            self.region.commit(op)
        self.writepath.add(prepared, [])
        return len(prepared)

    # --- admin and connection commands ---

    def _builtin_handlers(self) -> dict[str, Builtin]:
        """The commands the node runs itself (`router.BUILTINS`), bound once."""
        return {
            "ping": self._sync(connection.ping),
            "echo": self._sync(connection.echo),
            "hello": self._sync(lambda c, a: connection.hello(c, a, self.auth)),
            "auth": self._sync(lambda c, a: auth.auth(c, a, self.auth)),
            "client": self._sync(
                lambda c, a: client_commands.client(c, a, self.clients.live())
            ),
            "select": self._sync(connection.select),
            "quit": self._sync(connection.quit_),
            "reset": self._sync(lambda c, a: connection.reset(c, self.auth)),
            "command": self._sync(lambda c, a: introspection.command(a)),
            "info": self._sync(lambda c, a: info_command.info(a, self.info_sections())),
            "config": self._sync(self._config),
            "multi": self._sync(transactions.multi),
            "discard": self._sync(transactions.discard),
            "watch": self._sync(transactions.watch),
            "unwatch": self._sync(transactions.unwatch),
            "exec": self._exec,
            "crdt.flush": self._crdt_flush,
            "crdt.info": self._crdt_info,
            "crdt.clock": self._crdt_clock,
            "crdt.fault": self._crdt_fault,
            "crdt.snapshot": self._crdt_snapshot,
        }

    @staticmethod
    def _sync(fn: Callable[[Client, list[bytes]], Reply]) -> Builtin:
        async def run_sync(client: Client, args: list[bytes]) -> Reply:
            try:
                return fn(client, args)
            except CommandError as exc:
                return exc

        return run_sync

    def _config(self, client: Client, args: list[bytes]) -> Reply:
        if args[1].lower() == b"resetstat":
            self.stats.reset()
        return settings.config(args, self.settings)

    async def _exec(self, client: Client, args: list[bytes]) -> Reply:
        """EXEC: every queued command in one go on the event loop (nothing awaits in between), so
        nothing of another client or region comes in between, later commands see earlier writes,
        and all the ops land in one write batch: one Kafka transaction. A blocking read answers
        at once as timed out, as in Redis."""
        try:
            tx = transactions.take(client)
        except CommandError as exc:
            return exc
        replies: list[Reply] = []
        client.executing = len(tx.queued)
        try:
            for cmd, queued in tx.queued:
                reply = await self._exec_one(client, cmd, queued)
                self.stats.count(reply)
                replies.append(reply)
        finally:
            client.executing = None
        return replies

    async def _exec_one(self, client: Client, cmd: Command, args: list[bytes]) -> Reply:
        try:
            builtin = router.builtin_name(cmd)
            if builtin is not None:  # none of them awaits anything (no_multi)
                return await self._builtins[builtin](client, args)
            if self.loading is not None:
                return LOADING
            return self._issue(run(cmd, self._context(), args))
        except Exception:  # one broken command must not lose the others' replies
            log.exception("command %r inside EXEC failed", args[:1])
            return CommandError("ERR internal error, see the node's log")

    async def _crdt_flush(self, client: Client, args: list[bytes]) -> Reply:
        """Log what is held back for coalescing (XACK effects, local ops) now; used by sync(),
        so the materializer also leaves its idle fetch wait: replicated ops come next."""
        self.materializer.wake()
        count = self.flush_ack_effects()
        failure = await self.writepath.settled()
        if failure is not None:
            return failure
        return count if count else OK

    async def _crdt_clock(self, client: Client, args: list[bytes]) -> Reply:
        """CRDT.CLOCK [ms]: pin (or, without an argument, release) the node's wall clock.

        A test hook, like Redis's DEBUG commands: it lets a seed table's `*` IDs be the exact ones
        the seed prints. Refused unless the node was started with --debug-clock.
        """
        if not self._debug_clock:
            return CommandError("ERR CRDT.CLOCK is disabled: start the node with --debug-clock")
        if len(args) > 2:
            return errors.wrong_arity("crdt.clock")
        if len(args) == 1:
            self._pinned_ms = None
            return OK
        try:
            self._pinned_ms = parse_int(args[1])
        except CommandError as exc:
            return exc
        return OK

    async def _crdt_snapshot(self, client: Client, args: list[bytes]) -> Reply:
        """CRDT.SNAPSHOT: write a snapshot now (as BGSAVE, but answered once it is stored)."""
        if self.loading is not None:
            return LOADING
        snapshot_id = await self.take_snapshot()
        if snapshot_id is None:
            return CommandError("ERR no snapshot was taken now (one in progress, or see the log)")
        return snapshot_id.encode()

    async def _crdt_fault(self, client: Client, args: list[bytes]) -> Reply:
        """CRDT.FAULT APPEND n: the next n op-log appends fail (their transactions are aborted),
        to prove the failure path of group commit. Refused unless started with --debug-faults."""
        if not self._debug_faults:
            return CommandError("ERR CRDT.FAULT is disabled: start the node with --debug-faults")
        if args[1].lower() != b"append":
            return CommandError("ERR CRDT.FAULT knows only APPEND <count>")
        try:
            count = parse_int(args[2])
        except CommandError as exc:
            return exc
        self.writer.fail_next = max(0, count)
        return OK

    async def _crdt_info(self, client: Client, args: list[bytes]) -> Reply:
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
            "booted_from": self.booted_from,
            "snapshots_taken": self.snapshots_taken,
            "tombstones_collected": self.tombstones_collected,
            "last_snapshot": self.last_snapshot,
            "last_snapshot_pause_ms": round(self.last_snapshot_pause_ms, 2),
            "boot_records_read": self.boot_records,
            "write_fault": self.write_fault or "",
            "materializer_error": self.fatal or "",
            "records_skipped": self.materializer.records_skipped,
            "topics": " ".join(f"{t}@{p}" for t, p in sorted(self.materializer.positions.items())),
            "blocked_clients": len(self.waiters),
        }

    def info_sections(self) -> dict[str, dict[str, object]]:
        """INFO's sections, in Redis's order and with Redis's field names where they apply; the
        replication section also carries each other region's applied seq and lag."""
        keys = sum(1 for _ in self.region.state.existing_keys())
        rss = info_command.rss_bytes()
        peak = max(rss, info_command.peak_rss_bytes())
        cpu = os.times()
        vector = self.region.vector
        now = self.now_ms()
        replication: dict[str, object] = {
            "role": "master",
            "connected_slaves": 0,
            "master_failover_state": "no-failover",
            "master_replid": self._run_id,
            "master_replid2": "0" * 40,
            "master_repl_offset": vector.get(self.region.id, 0),
            "second_repl_offset": -1,
            "repl_backlog_active": 0,
            "crdt_region": self.name,
            "crdt_region_id": self.region.id,
            "crdt_id_mode": self.region.mode.value,
            "crdt_vector": " ".join(
                f"{self.region_names.get(o, f'r{o}')}={s}" for o, s in sorted(vector.items())
            ),
            "crdt_waiting_ops": self.region.causal.waiting,
            "crdt_write_fault": self.write_fault or self.fatal or "",
        }
        peers = [r for r in sorted(self.region_names) if r != self.region.id]
        replication["crdt_peers"] = len(peers)
        for i, origin in enumerate(peers):
            seen = self.last_ts.get(origin)
            replication[f"crdt_peer{i}"] = (
                f"region={self.region_names[origin]},id={origin},"
                f"applied_seq={vector.get(origin, 0)},"
                f"ms_since_last_op={-1 if seen is None else max(0, now - seen)}"
            )
        return {
            "server": info_command.server_section(
                self.config.resp_port, self._started, self._run_id
            ),
            "clients": {
                "connected_clients": len(self.clients.live()),
                "cluster_connections": 0,
                "maxclients": 10000,
                "client_recent_max_input_buffer": 0,
                "client_recent_max_output_buffer": 0,
                "blocked_clients": len(self.waiters),
                "tracking_clients": 0,
                "clients_in_timeout_table": 0,
            },
            "memory": {
                "used_memory": rss,
                "used_memory_human": info_command.human_bytes(rss),
                "used_memory_rss": rss,
                "used_memory_rss_human": info_command.human_bytes(rss),
                "used_memory_peak": peak,
                "used_memory_peak_human": info_command.human_bytes(peak),
                "maxmemory": 0,
                "maxmemory_human": "0B",
                "maxmemory_policy": "noeviction",
                "mem_allocator": "libc",
            },
            "persistence": {
                "loading": int(self.loading is not None),
                "async_loading": 0,
                "rdb_changes_since_last_save": 0,
                "rdb_bgsave_in_progress": 0,
                "rdb_last_save_time": int(self._started),
                "rdb_last_bgsave_status": "ok",
                "aof_enabled": 0,
                "aof_rewrite_in_progress": 0,
                "aof_last_write_status": "err" if self._write_refusal() else "ok",
                "crdt_oplog": self.oplog,
                "crdt_local_log": self.local,
                "crdt_write_batches": self.writepath.batches,
                "crdt_write_batch_ops": self.writepath.ops,
            },
            "stats": {
                "total_connections_received": self.stats.connections,
                "total_commands_processed": self.stats.commands,
                "instantaneous_ops_per_sec": 0,
                "rejected_connections": 0,
                "expired_keys": 0,
                "evicted_keys": 0,
                "keyspace_hits": 0,
                "keyspace_misses": 0,
                "pubsub_channels": 0,
                "pubsub_patterns": 0,
                "unexpected_error_replies": 0,
                "total_error_replies": sum(self.stats.errors.values()),
            },
            "replication": replication,
            "cpu": {
                "used_cpu_sys": f"{cpu.system:.6f}",
                "used_cpu_user": f"{cpu.user:.6f}",
                "used_cpu_sys_children": f"{cpu.children_system:.6f}",
                "used_cpu_user_children": f"{cpu.children_user:.6f}",
            },
            "modules": {},
            "errorstats": {
                f"errorstat_{code}": f"count={n}" for code, n in sorted(self.stats.errors.items())
            },
            "cluster": {"cluster_enabled": 0},
            "keyspace": {"db0": f"keys={keys},expires=0,avg_ttl=0"} if keys else {},
        }


def _reply_value(value: object) -> Reply:
    if isinstance(value, int):
        return value
    return str(value).encode()
