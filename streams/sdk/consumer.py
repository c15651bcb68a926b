"""The asyncio consumer-group loop: at-least-once handling that survives a region going away.

One loop step (`run_once`), in this order:

1. every `metrics_interval_s`: report lag and pending (XINFO GROUPS, XPENDING summary);
2. when due, on a server without `XREADGROUP ... CLAIM`: one page of the reclaim sweep,
   `XAUTOCLAIM ... <cursor> COUNT n JUSTID` for entries idle longer than `claim_idle_ms` in any
   consumer (dead or stuck ones). The cursor is kept between steps and the sweep restarts only
   after a full pass and `claim_idle_ms / 2`, so a large PEL is walked a page at a time instead
   of rescanned (no hot loop, no duplicate claims of the same page). JUSTID moves ownership
   without counting a delivery: the count goes up when step 3 actually hands the entry to the
   handler again. With CLAIM (Redis 8.4, every region here) step 4 reads with `CLAIM
   claim_idle_ms`: idle and handed-back entries first, then new ones, in one round trip;
3. when due: this consumer's own pending entries (its PEL: what `XREADGROUP ... 0` returns). Each
   is either dead-lettered (delivered `max_deliveries` times already) or claimed again with
   XCLAIM, which counts the delivery, and handled. Entries that failed here wait `retry_ms` (or
   the `Retry(after_ms)` the handler raised) first;
4. otherwise new entries: `XREADGROUP ... BLOCK block_ms [CLAIM claim_idle_ms] ... >`.

On stop, entries read but not handled go back by XNACK SILENT, else XCLAIM ... IDLE (sweeping).

Acks: an entry is acked only after its handler returned; a batch's acks go out as one `XACK
stream group id...` pipelined with the next `XREADGROUP` (one round trip, one group commit of the
node; one XACK per entry, each waiting for its commit, held a consumer to ~360 entries/s). They
are consecutive IDs, so the consecutive-XACK effect (seed 000) replicates as before. Acks owed are
sent first when the step would read the PEL otherwise, on `stop()` and on `close()`; a failover
drops them (`streams.sdk.acks`). Handlers run one after the other or up to `concurrency` at once
within a batch (`streams.sdk.handling`); while they run, a lease renews the batch's claims every
`claim_idle_ms / 3`, so a slow batch is not reclaimed and handled twice (`streams.sdk.lease`).

Regions: consumer groups exist in every region but each region's PEL is its own (seed 000), and
only consecutive acks replicate. When the serving endpoint fails, the consumer moves to the next
one and goes on; there `>` returns everything above the replicated acks: entries read but not
acked (or whose acks had not replicated) come again, none is skipped. The consumer remembers the
IDs and idempotency keys it handled recently (`dedupe_size`) and acks such a re-delivery without
calling the handler again; a re-delivery to another consumer of the group is a duplicate the
handler sees (at-least-once).

Sharded regions: every command about the stream goes to the node serving its slot, found by
following MOVED from the node named (`streams.sdk.endpoints`); when that node fails, the region
fails as a whole for this consumer and it moves on as above. The dead-letter stream may live on
another node: see `streams.sdk.deadletter`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from streams.sdk.acks import AckBuffer
from streams.sdk.capabilities import REDIS7, Capabilities, Features
from streams.sdk.deadletter import DeadLetters, parse_fields
from streams.sdk.endpoints import Endpoint, Endpoints, EndpointSet
from streams.sdk.errors import DeadLetter, Retry, SdkError, is_transient
from streams.sdk.handling import BatchRunner, Handler, Outcome
from streams.sdk.lease import renew
from streams.sdk.lease import text as _text
from streams.sdk.lru import BoundedSet
from streams.sdk.metrics import Metrics
from streams.sdk.producer import IDK_FIELD
from streams.sdk.sweeping import ensure_group, hand_back, report, sweep_page

log = logging.getLogger("streams.sdk.consumer")

__all__ = ["GroupConsumer", "Handler"]

Entry = tuple[str, dict[bytes, bytes], int]
"""An entry about to be handled: ID, fields, and which delivery this is (1 = the first)."""


class GroupConsumer:
    """Consumes `stream` as `consumer` of `group` (see the module docstring for the loop)."""

    def __init__(
        self,
        endpoints: Endpoints,
        stream: str,
        group: str,
        consumer: str,
        handler: Handler,
        *,
        count: int = 10,
        block_ms: int = 2000,
        claim_idle_ms: int = 30000,
        max_deliveries: int | None = 5,
        dead_letter: str | None = None,
        retry_ms: int = 1000,
        start_id: str = "0",
        metrics: Metrics | None = None,
        metrics_interval_s: float = 5.0,
        dedupe_size: int = 100_000,
        timeout_s: float = 5.0,
        down_s: float = 1.0,
        concurrency: int = 1,
    ) -> None:
        for name, value in (("stream", stream), ("group", group), ("consumer", consumer)):
            if not isinstance(value, str) or not value:
                raise SdkError(f"{name} must be a non-empty string")
        if not callable(handler):
            raise SdkError("handler must be callable as handler(entry_id, fields)")
        if count < 1:
            raise SdkError("count must be >= 1")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise SdkError("concurrency must be an integer >= 1 (1: handlers one after the other)")
        if block_ms < 1:
            raise SdkError("block_ms must be >= 1 (0 would block forever and never see stop())")
        if claim_idle_ms < 1:
            raise SdkError("claim_idle_ms must be >= 1")
        if max_deliveries is not None and max_deliveries < 1:
            raise SdkError("max_deliveries must be >= 1, or None to retry forever")
        if dead_letter == stream:
            raise SdkError("the dead-letter stream must differ from the consumed stream")
        self.endpoints = EndpointSet(
            endpoints, timeout_s=timeout_s + block_ms / 1000, down_s=down_s
        )
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self.handler = handler
        self.count = count
        self.block_ms = block_ms
        self.claim_idle_ms = claim_idle_ms
        self.max_deliveries = max_deliveries
        self.dead_letter = dead_letter
        self._dead_letters = DeadLetters(self.endpoints, stream, group, consumer, dead_letter)
        self.retry_ms = retry_ms
        self.start_id = start_id
        self.metrics = metrics or Metrics()
        self.metrics_interval_s = metrics_interval_s
        self.lease_s = claim_idle_ms / 3000
        self.concurrency = concurrency
        self._runner = BatchRunner(handler, concurrency)
        self._ep = self.endpoints.endpoints[0]
        self._ready: set[str] = set()  # endpoint URLs where the group is known to exist
        self._cursor = "0-0"
        self._next_sweep = 0.0
        self._pending_due = 0.0
        self._next_metrics = 0.0
        self._not_before: dict[str, float] = {}
        self._errors: dict[str, str] = {}
        self._done: BoundedSet[bytes] = BoundedSet(dedupe_size)
        self._seen: BoundedSet[str] = BoundedSet(dedupe_size)
        self._stop_requested = False
        self._stop_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handled = 0
        self._lock = threading.Lock()
        self._acks = AckBuffer(stream, group, self.metrics)
        self.capabilities = Capabilities()
        self._features: Features = REDIS7

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The URL of the endpoint the consumer reads from now."""
        return self._ep.url

    def stop(self) -> None:
        """Ask `run()` to return after the entry in hand; safe from any thread or a signal
        handler. Entries read but not handled yet are handed back (made reclaimable now)."""
        self._stop_requested = True
        loop, event = self._loop, self._stop_event
        if loop is not None and event is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop closed meanwhile: nothing to wake
                pass

    @property
    def stopping(self) -> bool:
        return self._stop_requested

    def _bind_loop(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._stop_event is None:
            self._loop = loop
            self._stop_event = asyncio.Event()
        if self._stop_requested:
            self._stop_event.set()
        return self._stop_event

    async def run(self) -> None:
        """Handle entries until `stop()`; then return (the current entry is finished)."""
        self._bind_loop()
        log.info(
            "consumer %s/%s/%s starts on %s", self.stream, self.group, self.consumer, self._ep.url
        )
        while not self._stop_requested:
            await self.run_once()
        log.info("consumer %s/%s/%s stopped", self.stream, self.group, self.consumer)

    async def run_once(self) -> int:
        """One step of the loop (module docstring); returns how many entries it handled.

        A transient failure of the endpoint moves the consumer to the next one; the step then
        returns what it had handled so far."""
        self._bind_loop()
        self._handled = 0
        ep = self._ep
        try:
            await self._ensure_group(ep)
            await self._step(ep)
            if self._stop_requested:
                await self._acks.flush(ep)  # graceful stop: ack what was handled
        except Exception as exc:
            if not is_transient(exc):
                raise
            await self._fail_over(ep, exc)
        return self._handled

    async def close(self) -> None:
        """Send the acks still buffered (best effort: unsent ones are re-delivered), then close
        the connections."""
        try:
            await self._acks.flush(self._ep)
        except Exception as exc:
            log.warning("%s: %d acks not sent at close (%s)", self.consumer, len(self._acks), exc)
        self._runner.close()
        await self.endpoints.close()

    async def __aenter__(self) -> GroupConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the step ----------------------------------------------------------------------------

    async def _step(self, ep: Endpoint) -> None:
        now = time.monotonic()
        if self._acks and (
            self._stop_requested
            or now >= min(self._next_metrics, self._next_sweep, self._pending_due)
        ):
            await self._acks.flush(ep)  # what follows reads the PEL: let it see the acks
        if now >= self._next_metrics:
            await self._report(ep)
        if now >= self._next_sweep:
            await self._sweep(ep)
        if time.monotonic() >= self._pending_due:
            await self._own_pending(ep)
            if self._handled:
                return
        if not self._stop_requested:
            await self._read_new(ep)

    async def _ensure_group(self, ep: Endpoint) -> None:
        if ep.url in self._ready:
            return
        self._features = await self.capabilities.of(ep, self.stream)
        self._next_sweep = float("inf") if self._features.claim else 0.0  # CLAIM: no sweep
        await ensure_group(ep, self.stream, self.group, self.start_id)
        self._ready.add(ep.url)

    async def _fail_over(self, ep: Endpoint, exc: BaseException) -> None:
        self.endpoints.mark_down(ep, exc)
        self._ready.discard(ep.url)
        self.capabilities.forget(ep.url)
        nxt = self.endpoints.next_after(ep)
        if nxt is ep:
            await asyncio.sleep(min(self.endpoints.down_s, 0.5))  # nowhere else to go
            return
        log.warning("consumer %s moves from %s to %s (%s)", self.consumer, ep.url, nxt.url, exc)
        self.metrics.failover(ep.url, nxt.url)
        self._ep = nxt
        self._acks.drop()  # owed to the old region's PEL; the new one re-delivers, dedupe acks
        # The new region has its own PEL and its own sweep position.
        self._cursor = "0-0"
        self._next_sweep = 0.0
        self._pending_due = 0.0

    async def _report(self, ep: Endpoint) -> None:
        self._next_metrics = time.monotonic() + self.metrics_interval_s
        await report(ep, self.stream, self.group, self.metrics)

    async def _sweep(self, ep: Endpoint) -> None:
        self._cursor, claimed = await sweep_page(
            ep, self.stream, self.group, self.consumer, self.claim_idle_ms, self._cursor, self.count
        )
        for entry_id in claimed:
            self._not_before.pop(entry_id, None)
        if claimed:
            self._pending_due = 0.0
        if self._cursor in ("0-0", "0"):
            self._cursor = "0-0"
            self._next_sweep = time.monotonic() + self.claim_idle_ms / 2000  # else: next page

    async def _own_pending(self, ep: Endpoint) -> None:
        page = self.count * 10
        rows = await ep.cmd(
            self.stream, "XPENDING", self.stream, self.group, "-", "+", page, self.consumer
        )
        now = time.monotonic()
        waiting = [
            self._not_before[i]
            for i in (_text(r[0]) for r in rows)
            if self._not_before.get(i, 0.0) > now
        ]
        due = [r for r in rows if self._not_before.get(_text(r[0]), 0.0) <= now][: self.count]
        if not due:
            self._pending_due = min(waiting) if waiting else now + self.claim_idle_ms / 1000
            return
        again: dict[str, int] = {}
        for row in due:
            entry_id, deliveries = _text(row[0]), int(row[3])
            if self.max_deliveries is not None and deliveries >= self.max_deliveries:
                error = self._errors.get(entry_id, "unknown (the consumer holding it stopped)")
                await self._dead_letter(ep, entry_id, None, deliveries, error)
                self._handled += 1
            else:
                again[entry_id] = deliveries
        if again:
            entries = await self._claim(ep, *again)
            batch: list[Entry] = []
            for raw_id, flat in entries:
                entry_id = _text(raw_id)
                attempt = again[entry_id] + 1
                self.metrics.redelivered(entry_id, attempt)
                self._seen.add(entry_id)
                batch.append((entry_id, parse_fields(flat), attempt))
            await self._handle_batch(ep, batch)  # not started on stop(): stay in our PEL
            for entry_id in again:
                if entry_id not in {_text(e[0]) for e in entries}:
                    self._not_before.pop(entry_id, None)  # deleted: XCLAIM dropped it
        if len(rows) >= page:
            self._pending_due = now  # more than a page pending: look again next step
            return
        mine = {_text(r[0]) for r in rows}
        for entry_id in [i for i in self._not_before if i not in mine]:
            del self._not_before[entry_id]  # acked, reclaimed by another consumer, or deleted
        self._pending_due = min(
            self._not_before.values(), default=time.monotonic() + self.claim_idle_ms / 1000
        )

    async def _read_new(self, ep: Endpoint) -> None:
        now = time.monotonic()
        wake = min(self._pending_due, self._next_sweep, self._next_metrics)
        block = max(1, min(self.block_ms, int((wake - now) * 1000)))
        stop = self._bind_loop()
        acks = self._acks.take(ep)
        xreadgroup = (
            "XREADGROUP",
            "GROUP",
            self.group,
            self.consumer,
            "COUNT",
            self.count,
            "BLOCK",
            block,
            *(("CLAIM", self.claim_idle_ms) if self._features.claim else ()),
            "STREAMS",
            self.stream,
            ">",
        )

        async def ack_and_read(client: Any) -> Any:
            # Endpoint.call repeats this after a MOVED: both commands then did not run.
            if not acks:
                return await client.execute_command(*xreadgroup)
            pipe = client.pipeline(transaction=False)
            pipe.execute_command(*self._acks.command(acks))
            pipe.execute_command(*xreadgroup)
            return (await pipe.execute())[1]

        read = asyncio.ensure_future(ep.call(self.stream, ack_and_read))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            done, _ = await asyncio.wait({read, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if read not in done:
            read.cancel()  # stop(): entries this read may have been given stay in our PEL
            try:
                await read
            except (asyncio.CancelledError, Exception):
                pass
            self._acks.put_back(ep, acks)  # sent or not: XACK again is harmless
            return
        try:
            reply = read.result()
        except BaseException:
            self._acks.put_back(ep, acks)  # not known to be sent; a failover drops them anyway
            raise
        self._acks.sent(acks)
        if not reply:
            return
        batch: list[Entry] = []
        for row in reply[0][1]:
            entry_id, fields = _text(row[0]), parse_fields(row[1])
            delivered = int(row[3]) if len(row) == 4 else 0  # CLAIM: deliveries before this one
            attempt = delivered + 1
            if not delivered and entry_id in self._seen:  # read before a failover: it came again
                attempt = 2
            if attempt > 1:
                self.metrics.redelivered(entry_id, attempt)
            self._seen.add(entry_id)
            if delivered and self.max_deliveries is not None and delivered >= self.max_deliveries:
                error = self._errors.get(entry_id, "unknown (the consumer holding it stopped)")
                await self._dead_letter(ep, entry_id, fields, delivered, error)
                self._handled += 1
                continue
            batch.append((entry_id, fields, attempt))
        await self._hand_back(ep, await self._handle_batch(ep, batch))

    async def _claim(self, ep: Endpoint, *ids_and_options: str | int) -> Any:
        """`XCLAIM stream group <this consumer> 0 IDS... [OPTIONS]`: take entries whatever
        their idle time (claiming again, handing back and lease renewal all do)."""
        return await ep.cmd(
            self.stream, "XCLAIM", self.stream, self.group, self.consumer, 0, *ids_and_options
        )

    async def _hand_back(self, ep: Endpoint, ids: list[str]) -> None:  # read, not handled
        features, idle = self._features, self.claim_idle_ms
        await hand_back(ep, self.stream, self.group, self.consumer, ids, features.nack, idle)

    # --- a batch of entries --------------------------------------------------------------------

    async def _handle_batch(self, ep: Endpoint, batch: list[Entry]) -> list[str]:
        """Handle a batch; entries whose handler returned join the ack buffer (sent by the next
        step, `AckBuffer.flush` or pipelined with the next read). Returns the IDs not started
        because `stop()` was asked."""
        todo: list[Entry] = []
        for entry_id, fields, attempt in batch:
            idk = fields.get(IDK_FIELD)
            if b"id:" + entry_id.encode() in self._done or (idk and b"idk:" + idk in self._done):
                self._acks.add(ep, entry_id, None)  # handled before a failover: ack only
                self.metrics.duplicate_skipped(entry_id)
                self._handled += 1
            else:
                todo.append((entry_id, fields, attempt))
        if not todo:
            return []
        ids = [e[0] for e in todo]
        page = len(ids) + len(self._not_before) + self.count * 10
        lease = asyncio.ensure_future(
            renew(ep, self.stream, self.group, self.consumer, ids, self.lease_s, page)
        )
        try:
            outcomes = await self._runner.run(
                [(entry_id, fields) for entry_id, fields, _ in todo], lambda: self._stop_requested
            )
        finally:
            lease.cancel()
        by_id = {e[0]: e for e in todo}
        # Successes first: they need no I/O, so a dead letter failing with the node cannot keep
        # them from being remembered as handled (the next region would run them again).
        for outcome in sorted(outcomes, key=lambda o: o.error is not None):
            _, fields, attempt = by_id[outcome.entry_id]
            self._handled += 1
            await self._settle(ep, outcome, fields, attempt)
        started = {o.entry_id for o in outcomes}
        return [e[0] for e in todo if e[0] not in started]

    async def _settle(
        self, ep: Endpoint, outcome: Outcome, fields: dict[bytes, bytes], attempt: int
    ) -> None:
        """Act on one handler's outcome: buffer the ack, schedule a retry, or dead-letter."""
        entry_id, exc = outcome.entry_id, outcome.error
        if exc is None:
            self._done.add(b"id:" + entry_id.encode())
            idk = fields.get(IDK_FIELD)
            if idk:
                self._done.add(b"idk:" + idk)
            self._acks.add(ep, entry_id, outcome.seconds)
            self._not_before.pop(entry_id, None)
            self._errors.pop(entry_id, None)
        elif isinstance(exc, Retry):
            self._failed(entry_id, exc, exc.after_ms)
        elif isinstance(exc, DeadLetter):
            await self._dead_letter(ep, entry_id, fields, attempt, f"DeadLetter: {exc}")
        else:
            self._failed(entry_id, exc, self.retry_ms)
            if self.max_deliveries is not None and attempt >= self.max_deliveries:
                await self._dead_letter(ep, entry_id, fields, attempt, self._errors[entry_id])

    def _failed(self, entry_id: str, exc: BaseException, delay_ms: int) -> None:
        self._errors[entry_id] = f"{type(exc).__name__}: {exc}"
        due = time.monotonic() + delay_ms / 1000
        self._not_before[entry_id] = due
        self._pending_due = min(self._pending_due, due)
        log.debug("handler failed on %s: %r", entry_id, exc)
        self.metrics.failed(entry_id, exc)

    async def _dead_letter(
        self,
        ep: Endpoint,
        entry_id: str,
        fields: dict[bytes, bytes] | None,
        attempts: int,
        error: str,
    ) -> None:
        await self._dead_letters.move(ep, entry_id, fields, attempts, error)
        self._not_before.pop(entry_id, None)
        self._errors.pop(entry_id, None)
        self.metrics.dead_lettered(entry_id, attempts, error)
