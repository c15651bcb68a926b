"""The RESP front door: the sans-I/O request parser (`parser.RequestParser`) inside an asyncio
Protocol.

Requests of one connection are answered strictly in order (pipelining of any depth); each request
goes to the `Handler`, which owns all command semantics. A handler may answer with a `Held` reply:
computed now, sent once its write batch is committed to the op log (group commit). The connection
goes on dispatching the requests behind it meanwhile, so a pipeline's writes share transactions,
and the outbox writes replies strictly in request order as they become sendable. A protocol error
is answered with Redis's text after the replies of the requests before it, then the connection
closes; other connections never notice.

Backpressure lives in one place, `_Flow`: reading pauses while too many requests wait, and while
the transport's write buffer is above its high-water mark no further request is run (and reading
pauses), so a client that never reads its replies holds at most one read's worth of requests and
one write buffer; requests queued plus replies held count together against `MAX_QUEUED`, and
replies held (encoded at once, in the protocol of their moment) also against `MAX_HELD_BYTES`.

The server's limits (`streams.resp.limits`): a connection over `maxclients` is answered Redis's
error and closed; before AUTH the parser is `gated` (Redis's unauthenticated request limits);
a client whose unsent replies pass the output limit is dropped, as Redis drops it; an idle one
is closed after `timeout`.

A disconnect never cancels a running command (a write half-appended to Kafka must finish and be
committed to the state); it (or the client's end of input) resolves `Session.lost`, which ends a
blocked XREAD at once, and the connection's task stops after the command in flight.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, cast

from mypy_extensions import mypyc_attr

from streams.errors import CommandError
from streams.reply import Reply
from streams.resp.encode import encode
from streams.resp.limits import MAX_CLIENTS_TEXT, Connections, Limits, quiet_accept_errors
from streams.resp.parser import RequestParser
from streams.resp.wire import Wire

log = logging.getLogger(__name__)

MAX_QUEUED = 1024
MAX_HELD_BYTES = 16 * 1024 * 1024
"""Encoded replies a connection may have waiting for their batch's commit before it runs no
further request: without it a client that pipelines large reads behind a write (and never reads)
made the node compute and keep every reply."""


@mypyc_attr(native_class=False)  # weakly referenced (streams.node.pipeline.clients)
@dataclass(eq=False)
class Session:
    """What the wire needs to know about a connection. The handler may set `proto` (HELLO) and
    `closing` (QUIT); what commands keep per connection (user, transaction, name ...) is the
    handler's own business (the node's `streams.node.pipeline.clients.Client`)."""

    id: int
    proto: int = 2
    closing: bool = False
    addr: str = ""
    """The peer's `host:port` (CLIENT LIST's addr=), once connected."""
    laddr: str = ""
    """The local `host:port` the client connected to (CLIENT LIST's laddr=)."""
    lost: asyncio.Future[None] | None = None
    """Resolved when the client disconnects: a blocked command waits on it too."""
    tls: bool = False
    """Whether the client came over TLS (a cluster node then announces its TLS ports)."""
    authenticated: bool = True
    """Whether the connection may run commands (the handler's AUTH sets it): until then the
    parser applies Redis's unauthenticated limits."""
    attached: Any = None
    """The handler's own record of this connection (the node's `Client`), kept here so that
    finding it for every request is an attribute read, not a lookup."""


@dataclass(slots=True)
class Traffic:
    """Bytes and socket reads / writes over every connection of a server: INFO stats'
    total_net_input_bytes, total_net_output_bytes, total_reads_processed and
    total_writes_processed. Counted here, the one place that sees the bytes; the node reports
    and resets them (`streams.node.pipeline.stats`)."""

    bytes_in: int = 0
    bytes_out: int = 0
    reads: int = 0
    writes: int = 0

    def reset(self) -> None:
        self.bytes_in = self.bytes_out = self.reads = self.writes = 0


class Instead(NamedTuple):
    """What a held reply's `until` resolves to when another reply must be sent in its place (a
    read run again after the batch it waited for failed, `streams.node.pipeline.dispatch`)."""

    reply: Reply


Until = asyncio.Future[CommandError | None] | asyncio.Future[Instead | None]


class Held(NamedTuple):
    """A reply that must not be sent before `until` resolves: to None (send `reply`), to an
    error that replaces it (the batch holding the command's ops failed), or to `Instead`. What
    to send once it resolved is `released(held)`, the one reading of its outcomes."""

    reply: Reply
    until: Until


ABANDONED = CommandError("ERR the write was abandoned (the node is stopping)")


def released(reply: Reply, until: Until) -> Reply:
    """What goes out for a held `reply` once `until` is done: the reply as computed (None), the
    error that replaces it, the reply sent `Instead`, or, when the wait was cancelled (the node
    stops), that the write was abandoned."""
    if until.cancelled():
        return ABANDONED
    outcome = until.result()
    if outcome is None:
        return reply
    return outcome.reply if isinstance(outcome, Instead) else outcome


async def final(reply: Reply | Held) -> Reply:
    """The reply a client gets for what a handler answered: a held one once released (for
    tools and tests that call a handler directly)."""
    if not isinstance(reply, Held):
        return reply
    try:
        await asyncio.shield(reply.until)
    except asyncio.CancelledError:
        if not reply.until.cancelled():
            raise
    return released(reply.reply, reply.until)


Handler = Callable[[Session, list[bytes]], Awaitable[Reply | Held]]


class _Flow:
    """Pause reading while requests pile up or replies are not being drained.

    `drained` is clear while the transport's write buffer is over its high-water mark; the serve
    loop waits on it before running the next request.
    """

    def __init__(self, transport: Wire) -> None:
        self.transport = transport
        self.queued = 0
        self.write_paused = False
        self.read_paused = False
        self.stopped = False  # no more reading at all (protocol error or closing)
        self.stalled = False  # the gated parser holds bytes behind the request in hand
        self.drained = asyncio.Event()
        self.drained.set()

    def update(self) -> None:
        should_pause = (
            self.stopped or self.stalled or self.queued >= MAX_QUEUED or self.write_paused
        )
        if should_pause and not self.read_paused:
            self.transport.pause_reading()
            self.read_paused = True
        elif not should_pause and self.read_paused:
            self.transport.resume_reading()
            self.read_paused = False

    def pause_writing(self) -> None:
        self.write_paused = True
        self.drained.clear()
        self.update()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.drained.set()
        self.update()


class RespProtocol(asyncio.Protocol):
    _next_id: ClassVar[int] = 0

    def __init__(
        self,
        handler: Handler,
        traffic: Traffic | None = None,
        connections: Connections | None = None,
    ) -> None:
        self._handler = handler
        self._traffic = traffic if traffic is not None else Traffic()
        self._connections = connections if connections is not None else Connections(Limits())
        self._limits = self._connections.limits
        self._parser = RequestParser()
        self._active = time.monotonic()
        """When the client last sent bytes or was answered (`timeout`)."""
        self._busy = False  # a request is being run (a blocked read included)
        self._eof = False  # the client closed while the gated parser held bytes
        self._soft_since: float | None = None  # over the soft output limit since then
        self._requests: deque[list[bytes]] = deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._transport: Wire | None = None
        self._flow: _Flow | None = None
        self._lost = False
        self._outbox: deque[tuple[bytes, Until | None]] = deque()
        """Encoded replies in request order, each with the commit it waits for (None: none)."""
        self._outbox_bytes = 0
        self._outbox_empty = asyncio.Event()
        self._outbox_empty.set()
        self._watched: Until | None = None
        RespProtocol._next_id += 1
        self.session = Session(RespProtocol._next_id)

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        wire = cast(Wire, transport)  # a stream transport: asyncio's or uvloop's
        self._transport = wire
        if not self._connections.admit(self):
            self._lost = True
            wire.write(MAX_CLIENTS_TEXT)
            wire.close()
            return
        self.session.authenticated = not self._limits.auth_required
        self._parser.gated = not self.session.authenticated
        self._flow = _Flow(wire)
        self.session.addr = _host_port(wire.get_extra_info("peername"))
        self.session.laddr = _host_port(wire.get_extra_info("sockname"))
        self.session.tls = wire.get_extra_info("sslcontext") is not None
        loop = asyncio.get_running_loop()
        self.session.lost = loop.create_future()
        self._task = loop.create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        if self._flow is None:  # refused (maxclients): closing
            return
        traffic = self._traffic
        traffic.reads += 1
        traffic.bytes_in += len(data)
        self._active = time.monotonic()
        parser = self._parser
        parser.max_bulk = self._limits.max_bulk
        parser.max_kept = self._limits.max_arg
        self._take(parser.feed(data))

    def _take(self, requests: list[list[bytes]]) -> None:
        """Queue what the parser gave, and let reading follow (`_Flow`)."""
        assert self._flow is not None
        if requests:
            self._requests.extend(requests)
        parser = self._parser
        if parser.error is not None:
            self._flow.stopped = True  # nothing after the bad bytes is read
        self._flow.stalled = parser.stalled
        if self._eof and not parser.stalled:
            self._eof = False
            self._requests.append([])
        self._flow.queued = len(self._requests)
        self._flow.update()
        self._wakeup.set()

    def eof_received(self) -> bool:
        """The client closed (or half-closed) its side. Like Redis, it is gone: a blocked read
        ends now (`Session.lost`). Unlike an abort, the requests that arrived before the end are
        still answered (`printf 'PING\\r\\n' | nc -N` gets its PONG), then the transport
        closes."""
        if self._flow is None:
            return False
        self._resolve_lost()
        if self._parser.stalled:  # the marker goes behind the requests still held
            self._eof = True
        else:
            self._requests.append([])  # the marker: close once everything before it is answered
        self._wakeup.set()
        return True

    def pause_writing(self) -> None:
        assert self._flow is not None
        self._flow.pause_writing()

    def resume_writing(self) -> None:
        assert self._flow is not None
        self._flow.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.gone(self)
        self._lost = True
        self.session.closing = True
        self._resolve_lost()
        self._wakeup.set()
        if self._flow is not None:
            self._flow.drained.set()

    def _resolve_lost(self) -> None:
        if self.session.lost is not None and not self.session.lost.done():
            self.session.lost.set_result(None)

    # --- serving ---------------------------------------------------------------------------------

    async def _serve(self) -> None:
        assert self._transport is not None and self._flow is not None
        flow = self._flow
        requests = self._requests
        while not self._lost:
            if not requests:
                if self._parser.error is not None:
                    await self._outbox_empty.wait()
                    self._write(CommandError(self._parser.error))
                    self._transport.close()
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if flow.write_paused:
                await flow.drained.wait()
                continue
            if len(self._outbox) >= MAX_QUEUED or self._outbox_bytes >= MAX_HELD_BYTES:
                await self._outbox_empty.wait()
                continue
            request = requests.popleft()
            if flow.read_paused:
                flow.queued = len(requests) + len(self._outbox)
                flow.update()
            if not request:  # end of input: everything before it has been answered
                await self._outbox_empty.wait()
                if self._parser.error is not None:
                    self._write(CommandError(self._parser.error))
                self._transport.close()
                return
            self._busy = True
            try:
                reply = await self._handler(self.session, request)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not kill the connection or the node
                log.exception("command %r failed", request[:1])
                reply = CommandError("ERR internal error, see the node's log")
            finally:
                self._busy = False
                self._active = time.monotonic()
            self._send(reply)
            parser = self._parser
            parser.gated = not self.session.authenticated  # AUTH, or RESET back to before it
            if parser.stalled and not self._lost:
                self._take(parser.resume())
            if self.session.closing:
                await self._outbox_empty.wait()
                self._transport.close()
                return

    def _send(self, reply: Reply | Held) -> None:
        """Queue a reply behind the held ones, then write every reply that may go."""
        proto = self.session.proto
        if isinstance(reply, Held):
            data, until = encode(reply.reply, proto), reply.until
        else:
            data, until = encode(reply, proto), None
        self._outbox.append((data, until))
        self._outbox_bytes += len(data)
        self._outbox_empty.clear()
        if self._limits.output.hard:  # as Redis counts a reply before writing any of it
            self.check_output(time.monotonic())
            if self._transport is None or self._transport.is_closing():
                return
        self._pump_outbox()

    def _pump_outbox(self, _done: object = None) -> None:
        """Write, in one transport write, every reply at the head of the outbox that may go."""
        outbox = self._outbox
        ready: list[bytes] = []
        try:
            while outbox:
                data, until = outbox[0]
                if until is not None:
                    if not until.done():
                        if self._watched is not until:
                            self._watched = until
                            until.add_done_callback(self._pump_outbox)
                        return
                    if not until.cancelled() and until.result() is None:
                        ready.append(data)  # as computed and encoded when it was held
                    else:
                        ready.append(encode(released(None, until), self.session.proto))
                else:
                    ready.append(data)
                outbox.popleft()
                self._outbox_bytes -= len(data)
        finally:
            if ready:
                self._write_bytes(ready)
        self._watched = None
        self._outbox_empty.set()
        limit = self._limits.output
        if limit.hard or limit.soft:
            self.check_output(time.monotonic())
        if self._flow is not None and self._flow.read_paused:
            self._flow.queued = len(self._requests)
            self._flow.update()

    # --- limits (`streams.resp.limits`) ---------------------------------------------------------

    def idle_for(self, now: float) -> float | None:
        return None if self._busy else now - self._active

    def close_idle(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            log.info(
                "closing client %s idle for over %ss", self.session.addr, self._limits.timeout_s
            )
            self._transport.close()

    def check_output(self, now: float) -> None:
        """Redis's checkClientOutputBufferLimits: replies waiting (held or unsent) at or over the
        hard limit, or over the soft one for longer than its seconds, drop the client (it gets
        no reply: it is not reading them)."""
        limit = self._limits.output
        transport = self._transport
        if transport is None or (not limit.hard and not limit.soft) or transport.is_closing():
            return
        used = transport.get_write_buffer_size() + self._outbox_bytes
        over = bool(limit.hard) and used >= limit.hard
        if limit.soft and used >= limit.soft:
            if self._soft_since is None:
                self._soft_since = now
            elif now - self._soft_since > limit.soft_seconds:
                over = True
        else:
            self._soft_since = None
        if over:
            log.warning(
                "client %s closed for overcoming of output buffer limits (%d bytes waiting)",
                self.session.addr,
                used,
            )
            self._outbox.clear()
            self._outbox_bytes = 0
            self._outbox_empty.set()
            transport.abort()

    def _write(self, reply: Reply) -> None:
        self._write_bytes([encode(reply, self.session.proto)])

    def _write_bytes(self, pieces: list[bytes]) -> None:
        assert self._transport is not None
        if not self._transport.is_closing():
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)  # a large reply: no copy
            traffic = self._traffic
            traffic.writes += 1
            traffic.bytes_out += len(data)
            self._transport.write(data)


def _host_port(where: object) -> str:
    if isinstance(where, tuple) and len(where) >= 2:
        return f"{where[0]}:{where[1]}"
    return ""


async def serve(
    handler: Handler,
    host: str,
    port: int,
    traffic: Traffic | None = None,
    limits: Limits | None = None,
    tls: ssl.SSLContext | None = None,
    connections: Connections | None = None,
) -> asyncio.Server:
    """Serve RESP on host:port; `traffic` (if given) counts every connection's bytes; `limits`
    (if given) are the server's limits, which the caller may change while it serves; `tls`: a
    server context (`streams.resp.tls`) makes it a TLS port; `connections`: shared between a
    node's plaintext and TLS ports, so maxclients counts both."""
    loop = asyncio.get_running_loop()
    quiet_accept_errors(loop)
    if connections is None:
        connections = Connections(limits if limits is not None else Limits())
    shared = connections
    return await loop.create_server(
        lambda: RespProtocol(handler, traffic, shared),
        host,
        port,
        ssl=tls,
        ssl_handshake_timeout=10.0 if tls is not None else None,
    )
