"""The RESP Protocol driven with a fake transport, fed bytes: order, errors, backpressure,
disconnects. No sockets, no node: the handler is a stub, so each behaviour of the front door is
seen on its own."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest

from streams.errors import CommandError
from streams.node.runtime.waiters import Waiters
from streams.reply import NULL_ARRAY, OK, Reply, Status
from streams.resp import server
from streams.resp.server import RespProtocol, Session


class FakeTransport(asyncio.Transport):
    """Collects what is written; records pause/resume; close() reports the loss like asyncio."""

    def __init__(self, protocol: RespProtocol) -> None:
        super().__init__()
        self.protocol = protocol
        self.out = bytearray()
        self.closed = False
        self.reading = True
        self.pauses = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "write after close"
        self.out += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5555), "sockname": ("127.0.0.1", 6379)}.get(name, default)


Handler = Callable[[Session, list[bytes]], Awaitable[Reply]]


async def echo_handler(session: Session, args: list[bytes]) -> Reply:
    name = args[0].lower()
    if name == b"ping":
        return Status("PONG")
    if name == b"quit":
        session.closing = True
        return OK
    if name == b"boom":
        raise RuntimeError("a bug")
    if name == b"sleep":
        await asyncio.sleep(float(args[1]))
        return args[1]
    return list[Reply](args[1:])


def connect(handler: Handler = echo_handler) -> tuple[RespProtocol, FakeTransport]:
    protocol = RespProtocol(handler)
    transport = FakeTransport(protocol)
    protocol.connection_made(transport)
    return protocol, transport


async def settle(until: Callable[[], bool] | None = None, timeout: float = 2.0) -> None:
    """Let the serve loop run until `until()` holds, or (without `until`) for a while."""
    if until is None:
        for _ in range(200):
            await asyncio.sleep(0)
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not until():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.001)


def run_async(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test on a fresh event loop (no pytest-asyncio here)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def frame(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


@run_async
async def test_pipelined_requests_are_answered_in_order_even_when_slow_ones_come_first() -> None:
    protocol, transport = connect()
    protocol.data_received(frame(b"SLEEP", b"0.05") + frame(b"PING") + b"ECHO hello\r\n")
    await settle(lambda: transport.out.count(b"\r\n") >= 5)
    assert bytes(transport.out) == b"$4\r\n0.05\r\n+PONG\r\n*1\r\n$5\r\nhello\r\n"


@run_async
async def test_thousands_of_requests_in_one_packet() -> None:
    protocol, transport = connect()
    count = 5000
    protocol.data_received(b"".join(frame(b"ECHO", b"%d" % i) for i in range(count)))
    expected = b"".join(b"*1\r\n$%d\r\n%d\r\n" % (len(b"%d" % i), i) for i in range(count))
    await settle(lambda: len(transport.out) >= len(expected))
    assert bytes(transport.out) == expected
    assert transport.pauses >= 1 and transport.reading  # paused past MAX_QUEUED, then resumed


@run_async
async def test_protocol_error_answers_earlier_requests_then_the_error_then_closes() -> None:
    protocol, transport = connect()
    protocol.data_received(b"PING\r\n*1\r\nx\r\nPING\r\n")
    await settle(lambda: transport.closed)
    assert bytes(transport.out) == b"+PONG\r\n-ERR Protocol error: expected '$', got 'x'\r\n"
    assert not transport.reading


@pytest.mark.parametrize(
    "data,text",
    [
        (b"*-0\r\n", b"invalid multibulk length"),
        (b"*1\r\n$-1\r\n", b"invalid bulk length"),
        (b"*1\r\n$536870913\r\n", b"invalid bulk length"),
        (b'PING "x\r\n', b"unbalanced quotes in request"),
        (b"*1\r\n\r\n", b"expected '$', got ' '"),  # CR on the wire becomes a space, as Redis
    ],
)
@run_async
async def test_protocol_error_texts(data: bytes, text: bytes) -> None:
    protocol, transport = connect()
    protocol.data_received(data)
    await settle(lambda: transport.closed)
    assert bytes(transport.out) == b"-ERR Protocol error: " + text + b"\r\n"


@run_async
async def test_a_10_mb_value_in_64k_reads() -> None:
    got: list[list[bytes]] = []

    async def handler(session: Session, args: list[bytes]) -> Reply:
        got.append(args)
        return b"1-1"

    protocol, transport = connect(handler)
    value = b"v\r\n" * (10 * 1024 * 1024 // 3)
    data = frame(b"XADD", b"s", b"*", b"f", value)
    for i in range(0, len(data), 65536):
        protocol.data_received(data[i : i + 65536])
    await settle(lambda: bool(transport.out))
    assert got == [[b"XADD", b"s", b"*", b"f", value]]
    assert bytes(transport.out) == b"$3\r\n1-1\r\n"


@run_async
async def test_a_client_that_never_reads_stops_the_server_from_running_more_requests() -> None:
    """While the write buffer is over its high-water mark (the transport calls pause_writing),
    no further request runs and reading is paused; resume_writing lets it go on."""
    ran: list[bytes] = []

    async def handler(session: Session, args: list[bytes]) -> Reply:
        ran.append(args[1])
        return b"x" * 1000

    protocol, transport = connect(handler)
    protocol.data_received(b"".join(frame(b"GET", b"%d" % i) for i in range(10)))
    await settle(lambda: len(ran) >= 1)
    protocol.pause_writing()
    before = len(ran)
    await settle()
    assert len(ran) <= before + 1 and not transport.reading
    protocol.resume_writing()
    await settle(lambda: len(ran) == 10)
    assert transport.reading


@run_async
async def test_reading_pauses_while_too_many_requests_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "MAX_QUEUED", 4)
    release = asyncio.Event()

    async def handler(session: Session, args: list[bytes]) -> Reply:
        await release.wait()
        return OK

    protocol, transport = connect(handler)
    protocol.data_received(frame(b"A") * 3)
    assert transport.reading
    protocol.data_received(frame(b"A") * 3)
    assert not transport.reading
    release.set()
    await settle(lambda: transport.out.count(b"+OK") == 6)
    assert transport.reading


@run_async
async def test_disconnect_mid_command_lets_it_finish_and_writes_nothing() -> None:
    """A write half-appended to Kafka must not be cancelled: the command completes, its reply
    goes nowhere, the serve task ends."""
    finished = asyncio.Event()

    async def handler(session: Session, args: list[bytes]) -> Reply:
        await asyncio.sleep(0.02)
        finished.set()
        return OK

    protocol, transport = connect(handler)
    protocol.data_received(frame(b"XADD") + frame(b"XADD"))
    await asyncio.sleep(0)
    transport.closed = True
    protocol.connection_lost(None)
    assert protocol.session.lost is not None and protocol.session.lost.done()
    await asyncio.wait_for(finished.wait(), 1)
    await settle()
    assert transport.out == b""
    assert protocol._task is not None and protocol._task.done()


@run_async
async def test_disconnect_while_blocked_unregisters_the_waiter() -> None:
    waiters = Waiters()

    async def handler(session: Session, args: list[bytes]) -> Reply:
        woken = await waiters.wait([b"k"], float("inf"), session.lost)
        return b"woken" if woken else NULL_ARRAY

    protocols = [connect(handler) for _ in range(3)]
    for protocol, _ in protocols:
        protocol.data_received(b"XREAD BLOCK 0 STREAMS k $\r\n")
    await settle(lambda: len(waiters) == 3)
    gone, gone_transport = protocols[0]
    gone_transport.closed = True
    gone.connection_lost(None)
    await settle(lambda: len(waiters) == 2)
    waiters.wake([b"k"])  # the others all wake
    await settle(lambda: all(t.out == b"$5\r\nwoken\r\n" for _, t in protocols[1:]))
    assert len(waiters) == 0 and gone_transport.out == b""


@run_async
async def test_end_of_input_while_blocked_ends_the_wait() -> None:
    """A client that closes its socket is seen as end of input first (eof_received): a blocked
    read must end then, not wait for an entry that may never come."""
    waiters = Waiters()

    async def handler(session: Session, args: list[bytes]) -> Reply:
        woken = await waiters.wait([b"k"], float("inf"), session.lost)
        return b"woken" if woken else NULL_ARRAY

    protocol, transport = connect(handler)
    protocol.data_received(b"XREAD BLOCK 0 STREAMS k $\r\n")
    await settle(lambda: len(waiters) == 1)
    protocol.eof_received()
    await settle(lambda: transport.closed)
    assert len(waiters) == 0 and bytes(transport.out) == b"*-1\r\n"


@run_async
async def test_half_closed_client_gets_its_replies_then_the_close() -> None:
    protocol, transport = connect()
    protocol.data_received(b"PING\r\nPING\r\n")
    assert protocol.eof_received() is True
    await settle(lambda: transport.closed)
    assert bytes(transport.out) == b"+PONG\r\n+PONG\r\n"


@run_async
async def test_quit_closes_after_its_reply_and_a_bug_is_an_error_reply() -> None:
    protocol, transport = connect()
    protocol.data_received(b"BOOM\r\nPING\r\nQUIT\r\nPING\r\n")
    await settle(lambda: transport.closed)
    assert bytes(transport.out) == (b"-ERR internal error, see the node's log\r\n+PONG\r\n+OK\r\n")


@run_async
async def test_other_connections_are_unaffected_by_a_bad_one() -> None:
    bad, bad_transport = connect()
    good, good_transport = connect()
    bad.data_received(b"*1\r\n$x\r\n")
    good.data_received(b"PING\r\n")
    await settle(lambda: bad_transport.closed and bool(good_transport.out))
    good.data_received(b"ECHO still\r\n")
    await settle(lambda: good_transport.out.endswith(b"still\r\n"))
    assert not good_transport.closed


@run_async
async def test_session_knows_its_addresses_and_resp3_nulls() -> None:
    async def handler(session: Session, args: list[bytes]) -> Reply:
        session.proto = 3
        return NULL_ARRAY

    protocol, transport = connect(handler)
    assert protocol.session.addr == "127.0.0.1:5555"
    assert protocol.session.laddr == "127.0.0.1:6379"
    protocol.data_received(b"XREAD\r\n")
    await settle(lambda: bool(transport.out))
    assert bytes(transport.out) == b"_\r\n"


def test_resp2_null_array_on_timeout_is_star_minus_one() -> None:
    from streams.resp.encode import encode

    assert encode(NULL_ARRAY, 2) == b"*-1\r\n"
    assert encode(NULL_ARRAY, 3) == b"_\r\n"
    assert encode(CommandError("ERR x\r\ny"), 2) == b"-ERR x  y\r\n"


# --- held replies (group commit) ---------------------------------------------------------------


def held_handler(commits: dict[bytes, asyncio.Future[CommandError | None]]) -> Handler:
    """`HOLD name value`: reply `value`, held until the commit named `name` resolves; anything
    else is answered at once."""

    async def handler(session: Session, args: list[bytes]) -> Reply | server.Held:
        if args[0] == b"HOLD":
            future = commits.setdefault(args[1], asyncio.get_running_loop().create_future())
            return server.Held(args[2], future)
        return await echo_handler(session, args)

    return handler  # type: ignore[return-value]


@run_async
async def test_held_replies_leave_in_request_order_once_their_commit_is_done() -> None:
    """A reply that needs no commit waits behind an earlier held one; replies ready together go
    in one write."""
    commits: dict[bytes, asyncio.Future[CommandError | None]] = {}
    protocol, transport = connect(held_handler(commits))
    protocol.data_received(
        frame(b"HOLD", b"b1", b"a") + frame(b"PING") + frame(b"HOLD", b"b2", b"c")
    )
    await settle(lambda: len(commits) == 2)
    assert bytes(transport.out) == b""
    commits[b"b2"].set_result(None)  # the later batch committed first: nothing may go yet
    await settle()
    assert bytes(transport.out) == b""
    commits[b"b1"].set_result(None)
    await settle(lambda: len(transport.out) > 0)
    assert bytes(transport.out) == b"$1\r\na\r\n+PONG\r\n$1\r\nc\r\n"


@run_async
async def test_a_failed_commit_replaces_the_held_reply_with_its_error() -> None:
    commits: dict[bytes, asyncio.Future[CommandError | None]] = {}
    protocol, transport = connect(held_handler(commits))
    protocol.data_received(frame(b"HOLD", b"b1", b"a") + frame(b"HOLD", b"b1", b"b"))
    await settle(lambda: b"b1" in commits)
    commits[b"b1"].set_result(CommandError("ERR the op log did not confirm the write"))
    await settle(lambda: transport.out.count(b"\r\n") >= 2)
    assert bytes(transport.out) == b"-ERR the op log did not confirm the write\r\n" * 2


@run_async
async def test_held_replies_of_a_client_that_never_reads_are_bounded_in_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While held replies of one connection reach MAX_HELD_BYTES it runs no further request;
    once they leave it goes on."""
    monkeypatch.setattr(server, "MAX_HELD_BYTES", 3000)
    commits: dict[bytes, asyncio.Future[CommandError | None]] = {}
    ran: list[bytes] = []
    inner = held_handler(commits)

    async def handler(session: Session, args: list[bytes]) -> Reply | server.Held:
        ran.append(args[1])
        return await inner(session, args)  # type: ignore[misc]

    protocol, transport = connect(handler)  # type: ignore[arg-type]
    big = b"x" * 1000
    protocol.data_received(b"".join(frame(b"HOLD", b"b1", big) for _ in range(10)))
    await settle(lambda: len(ran) >= 3)
    await settle()
    assert len(ran) == 3  # 3 x 1000+ bytes held: no fourth request runs
    commits[b"b1"].set_result(None)
    await settle(lambda: len(ran) == 10 and len(transport.out) >= 10 * 1000)
