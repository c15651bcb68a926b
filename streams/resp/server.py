"""The RESP front door: a sans-I/O request parser (hiredis Reader) inside an asyncio Protocol.

Requests of one connection are answered strictly in order (pipelining of any depth); each request
goes to the `Handler`, which owns all command semantics. Backpressure lives in one place,
`_Flow`: reading pauses while too many requests wait or while the transport's write buffer is
full, so a client that never reads its replies cannot make the server buffer without bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import hiredis

from streams.commands.reply import Reply
from streams.errors import CommandError
from streams.resp.encode import encode

log = logging.getLogger(__name__)

MAX_QUEUED = 1024


@dataclass
class Session:
    """Per-connection state the handler may read and change (protocol version, name, ...)."""

    id: int
    proto: int = 2
    name: bytes | None = None
    authenticated: bool = True
    closing: bool = False
    extra: dict[str, object] = field(default_factory=dict)


Handler = Callable[[Session, list[bytes]], Awaitable[Reply]]


class _Flow:
    """Pause reading while replies are not being drained."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.queued = 0
        self.write_paused = False
        self.read_paused = False
        self.drained = asyncio.Event()
        self.drained.set()

    def update(self) -> None:
        should_pause = self.queued >= MAX_QUEUED or self.write_paused
        if should_pause and not self.read_paused:
            self.transport.pause_reading()
            self.read_paused = True
        elif not should_pause and self.read_paused:
            self.transport.resume_reading()
            self.read_paused = False


class RespProtocol(asyncio.Protocol):
    _next_id = 0

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._reader = hiredis.Reader()
        self._requests: deque[list[bytes]] = deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._flow: _Flow | None = None
        RespProtocol._next_id += 1
        self.session = Session(RespProtocol._next_id)

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._flow = _Flow(transport)
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        try:
            while (request := self._reader.gets()) is not False:
                if not isinstance(request, list) or not request or not all(
                    isinstance(a, bytes) for a in request
                ):
                    raise hiredis.ProtocolError("expected an array of bulk strings")
                self._requests.append(request)
        except hiredis.ProtocolError as exc:
            self._requests.append([b"\x00protocol-error", str(exc).encode()])
        assert self._flow is not None
        self._flow.queued = len(self._requests)
        self._flow.update()
        self._wakeup.set()

    def pause_writing(self) -> None:
        assert self._flow is not None
        self._flow.write_paused = True
        self._flow.update()

    def resume_writing(self) -> None:
        assert self._flow is not None
        self._flow.write_paused = False
        self._flow.update()

    def connection_lost(self, exc: Exception | None) -> None:
        self.session.closing = True
        if self._task is not None:
            self._task.cancel()

    # --- serving ---------------------------------------------------------------------------------

    async def _serve(self) -> None:
        assert self._transport is not None and self._flow is not None
        try:
            while not self.session.closing:
                if not self._requests:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                request = self._requests.popleft()
                self._flow.queued = len(self._requests)
                self._flow.update()
                if request[0] == b"\x00protocol-error":
                    self._write(CommandError(f"ERR Protocol error: {request[1].decode()}"))
                    self._transport.close()
                    return
                try:
                    reply = await self._handler(self.session, request)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a bug must not kill the connection or the node
                    log.exception("command %r failed", request[:1])
                    reply = CommandError("ERR internal error, see the node's log")
                self._write(reply)
                if self.session.closing:
                    self._transport.close()
                    return
        except asyncio.CancelledError:
            pass

    def _write(self, reply: Reply) -> None:
        assert self._transport is not None
        if not self._transport.is_closing():
            self._transport.write(encode(reply, self.session.proto))


async def serve(handler: Handler, host: str, port: int) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: RespProtocol(handler), host, port)
