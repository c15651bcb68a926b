"""Checkpointing consumers (seed 002, "the unified log"): no consumer group, a stored position.

`CheckpointConsumer` reads `XRANGE stream (<checkpoint> + COUNT n` batches and, for each batch,
opens one store transaction in which it calls `handler(entry_id, fields, tx)` per entry, records
the entries' idempotency keys and moves the checkpoint to the batch's last ID. The handler writes
its effects through `tx` (for `SQLiteStore`, `tx.conn` is the open sqlite3 connection), so the
effects and the checkpoint commit together or not at all: a crash re-reads the batch, and the
entries whose idempotency key (`_idk`) the store already holds (double sends, seed 002's 10 %)
are skipped. At-least-once delivery, exactly-once effects.

Regions: XRANGE by ID may skip entries that arrive late from another region with a lower ID
(seed 000, XREAD skipping). A checkpoint consumer therefore suits streams written in one region
(or read where every writer's entries have arrived); use `GroupConsumer`, whose `>` never skips,
for streams written in several regions. Reads fail over between the given endpoints.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

from streams.sdk.deadletter import parse_fields
from streams.sdk.endpoints import Endpoint, Endpoints, EndpointSet
from streams.sdk.errors import SdkError, is_transient
from streams.sdk.producer import IDK_FIELD

log = logging.getLogger("streams.sdk.checkpoint")


class CheckpointTx(Protocol):
    """One open store transaction of one consumer."""

    @property
    def checkpoint(self) -> str | None:
        """The last consumed entry ID (None: start from the beginning of the stream)."""

    def seen(self, key: bytes) -> bool:
        """Whether an entry with this idempotency key was consumed already."""

    def mark(self, key: bytes) -> None: ...

    def set_checkpoint(self, entry_id: str) -> None: ...


class CheckpointStore(Protocol):
    """Where checkpoints (and the handler's effects) live; commit all or nothing."""

    def checkpoint(self, name: str) -> str | None: ...

    def transaction(self, name: str) -> AbstractContextManager[CheckpointTx]: ...


CheckpointHandler = Callable[[str, dict[bytes, bytes], CheckpointTx], None]


class SQLiteTx:
    def __init__(self, conn: sqlite3.Connection, name: str) -> None:
        self.conn = conn
        self.name = name
        row = conn.execute("SELECT last_id FROM sdk_checkpoints WHERE name = ?", (name,)).fetchone()
        self._checkpoint: str | None = row[0] if row else None

    @property
    def checkpoint(self) -> str | None:
        return self._checkpoint

    def seen(self, key: bytes) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM sdk_consumed_keys WHERE name = ? AND key = ?", (self.name, key)
        ).fetchone()
        return row is not None

    def mark(self, key: bytes) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO sdk_consumed_keys (name, key) VALUES (?, ?)", (self.name, key)
        )

    def set_checkpoint(self, entry_id: str) -> None:
        self.conn.execute(
            "INSERT INTO sdk_checkpoints (name, last_id) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET last_id = excluded.last_id",
            (self.name, entry_id),
        )
        self._checkpoint = entry_id


class SQLiteStore:
    """Checkpoints and consumed idempotency keys in SQLite, next to the handler's own tables.

    One connection, used under a lock (the async consumer runs transactions in worker threads).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.RLock()
        with self._lock:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS sdk_checkpoints (name TEXT PRIMARY KEY, last_id TEXT)"
            )
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS sdk_consumed_keys "
                "(name TEXT NOT NULL, key BLOB NOT NULL, PRIMARY KEY (name, key))"
            )

    def checkpoint(self, name: str) -> str | None:
        with self._lock:
            row = self.conn.execute(
                "SELECT last_id FROM sdk_checkpoints WHERE name = ?", (name,)
            ).fetchone()
            return str(row[0]) if row else None

    @contextmanager
    def transaction(self, name: str) -> Iterator[SQLiteTx]:
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield SQLiteTx(self.conn, name)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self.conn.close()


class CheckpointConsumer:
    """Seed 002's checkpointing consumer (module docstring); asyncio core."""

    def __init__(
        self,
        endpoint: Endpoints,
        stream: str,
        name: str,
        handler: CheckpointHandler,
        store: CheckpointStore | None = None,
        *,
        batch_size: int = 100,
        poll_ms: int = 200,
        timeout_s: float = 5.0,
    ) -> None:
        if not stream or not name:
            raise SdkError("stream and name must be non-empty")
        if not callable(handler):
            raise SdkError("handler must be callable as handler(entry_id, fields, tx)")
        if batch_size < 1:
            raise SdkError("batch_size must be >= 1")
        self.endpoints = EndpointSet(endpoint, timeout_s=timeout_s)
        self.stream = stream
        self.name = name
        self.handler = handler
        self.store: CheckpointStore = store or SQLiteStore(f"{name}.checkpoints.sqlite3")
        self.batch_size = batch_size
        self.poll_ms = poll_ms
        self.skipped = 0
        """Entries skipped because their idempotency key was consumed already."""
        self._ep = self.endpoints.endpoints[0]
        self._stop_requested = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None

    @property
    def checkpoint(self) -> str | None:
        return self.store.checkpoint(self.name)

    def stop(self) -> None:
        """Ask `run()` to return after the batch in hand (any thread, or a signal handler)."""
        self._stop_requested = True
        if self._loop is not None and self._stop_event is not None:
            try:
                self._loop.call_soon_threadsafe(self._stop_event.set)
            except RuntimeError:
                pass

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._stop_event is None:
            self._loop, self._stop_event = loop, asyncio.Event()
        if self._stop_requested:
            return
        while not self._stop_requested:
            if await self.run_once() == 0:
                try:
                    await asyncio.wait_for(self._stop_event.wait(), self.poll_ms / 1000)
                except TimeoutError:
                    pass

    async def run_once(self) -> int:
        """Read one batch after the checkpoint and consume it in one store transaction; returns
        how many entries the handler consumed (skipped double sends not counted)."""
        start = self.store.checkpoint(self.name)
        low = "-" if start is None else f"({start}"
        entries = await self._read(low)
        if not entries:
            return 0
        return await asyncio.to_thread(self._apply, entries)

    async def _read(self, low: str) -> list[tuple[str, dict[bytes, bytes]]]:
        for _ in range(len(self.endpoints) * 3):
            ep: Endpoint = self._ep
            try:
                rows = await ep.cmd(
                    self.stream, "XRANGE", self.stream, low, "+", "COUNT", self.batch_size
                )
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self.endpoints.mark_down(ep, exc)
                self._ep = self.endpoints.next_after(ep)
                await asyncio.sleep(0.05)
                continue
            return [(r[0].decode(), parse_fields(r[1])) for r in rows]
        raise SdkError(f"no endpoint of {self.stream} answered XRANGE")

    def _apply(self, entries: list[tuple[str, dict[bytes, bytes]]]) -> int:
        consumed = skipped = 0
        with self.store.transaction(self.name) as tx:
            for entry_id, fields in entries:
                key = fields.get(IDK_FIELD)
                if key is not None and tx.seen(key):
                    skipped += 1
                    log.debug("%s skips %s: key %r consumed already", self.name, entry_id, key)
                else:
                    self.handler(entry_id, fields, tx)
                    if key is not None:
                        tx.mark(key)
                    consumed += 1
            tx.set_checkpoint(entries[-1][0])
        self.skipped += skipped
        return consumed

    async def close(self) -> None:
        await self.endpoints.close()
