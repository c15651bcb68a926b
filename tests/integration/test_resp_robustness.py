"""The RESP front door of a live node, over sockets: inline commands, deep pipelines, big values,
garbage, clients that never read or leave mid-command, and fuzzed frames and commands.

Protocol errors are compared byte for byte with a real redis-server 7.0.15 (the session fixture
`redis_server`) on the same input. After every batch of abuse the node must still answer PING and
a real command, and a bystander connection opened before it must never notice.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import hiredis
import pytest
import redis
from fuzz_words import OPTION_WORDS
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import wait_until

from streams.commands.table import TABLE
from streams.resp.parser import RequestParser
from topology.local import LocalTopology

_MORE = object()
PE = b"-ERR Protocol error: "


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    with LocalTopology(regions=1, manual_sync=True, id_mode="liberal") as topology:
        yield topology


@pytest.fixture(scope="module")
def bystander(topo: LocalTopology) -> Iterator[redis.Redis]:
    """A connection opened before the abuse starts, checked after each test."""
    client = redis.Redis(port=topo.ports[1], protocol=2)
    client.ping()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def node_still_serves(topo: LocalTopology, bystander: redis.Redis) -> Iterator[None]:
    yield
    assert bystander.ping()
    fresh = redis.Redis(port=topo.ports[1], protocol=2)
    sid = fresh.xadd("alive", {"f": "v"})
    assert fresh.xrange("alive", sid, sid) == [(sid, {b"f": b"v"})]
    fresh.close()


class Exchange:
    """What a server answered to some bytes: the replies, their raw bytes, whether it closed."""

    def __init__(self, replies: list[object], raw: bytes, closed: bool) -> None:
        self.replies = replies
        self.raw = raw
        self.closed = closed

    def kinds(self) -> list[str]:
        return ["error" if isinstance(r, hiredis.ReplyError) else "reply" for r in self.replies]


def expected_of(data: bytes) -> tuple[int, bool]:
    """How many replies `data` must get, and whether the server must then close (the parser's
    verdict: tests/unit/test_resp_parser.py proves it equal to Redis's rules)."""
    parser = RequestParser()
    return len(parser.feed(data)), parser.error is not None


def exchange(port: int, data: bytes, timeout: float = 10.0) -> Exchange:
    count, closes = expected_of(data)
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    reader = hiredis.Reader(notEnoughData=_MORE)
    raw = bytearray()
    replies: list[object] = []
    closed = False
    try:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may close before it read everything we sent
        while len(replies) < count or (closes and not closed):
            reply = reader.gets()
            if reply is not _MORE:
                replies.append(reply)
                continue
            try:
                chunk = sock.recv(1 << 20)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                closed = True
                break
            raw += chunk
            reader.feed(chunk)
        while (reply := reader.gets()) is not _MORE:
            replies.append(reply)
    finally:
        sock.close()
    return Exchange(replies, bytes(raw), closed)


def frame(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


# --- protocol errors, byte for byte as redis-server 7.0.15 --------------------------------------

ERROR_CASES = [
    (b"*abc\r\n", b"invalid multibulk length"),
    (b"*2147483648\r\n", b"invalid multibulk length"),
    (b"*-0\r\n", b"invalid multibulk length"),
    (b"*01\r\n$4\r\nPING\r\n", b"invalid multibulk length"),
    (b"*1\r\nx\r\n", b"expected '$', got 'x'"),
    (b"*1\r\n:1\r\n", b"expected '$', got ':'"),
    (b"*2\r\n+A\r\n=5\r\ntxt:B\r\n", b"expected '$', got '+'"),
    (b"*1\r\n\r\n", b"expected '$', got ' '"),
    (b"*1\r\n\xff\r\n", b"expected '$', got '\xff'"),
    (b"*1\r\n$-1\r\n", b"invalid bulk length"),
    (b"*1\r\n$536870913\r\n", b"invalid bulk length"),
    (b"*1\r\n$+4\r\nPING\r\n", b"invalid bulk length"),
    (b'PING "a\r\n', b"unbalanced quotes in request"),
    (b"ECHO 'a\r\n", b"unbalanced quotes in request"),
    (b'ECHO "a"b\r\n', b"unbalanced quotes in request"),
    (b"x" * 70000, b"too big inline request"),
    (b"*1\r\n$" + b"1" * 70000, b"too big bulk count string"),
    (b"*" + b"1" * 70000, b"too big mbulk count string"),
    (b"PING\r\n*1\r\n$4\r\nPING\r\nECHO x\r\n*1\r\nx\r\nPING\r\n", b"expected '$', got 'x'"),
]


@pytest.mark.parametrize("data,text", ERROR_CASES, ids=lambda v: repr(v)[:30])
def test_protocol_errors_are_redis_texts_then_the_connection_closes(
    topo: LocalTopology, data: bytes, text: bytes
) -> None:
    got = exchange(topo.ports[1], data)
    assert got.closed
    assert got.raw.endswith(PE + text + b"\r\n")
    assert got.kinds()[:-1] == ["reply"] * (len(got.replies) - 1)


@pytest.mark.parametrize("data,text", ERROR_CASES, ids=lambda v: repr(v)[:30])
def test_protocol_errors_equal_redis_server(
    topo: LocalTopology, redis_server: object, data: bytes, text: bytes
) -> None:
    port = redis_server.port  # type: ignore[attr-defined]
    theirs = exchange(port, data)
    ours = exchange(topo.ports[1], data)
    assert (ours.raw, ours.closed) == (theirs.raw, theirs.closed)


def test_lenient_frames_redis_accepts(topo: LocalTopology) -> None:
    """Redis skips the two bytes after a value and the byte after a header's CR unchecked;
    empty and negative multibulks and blank lines are no requests at all."""
    data = (
        b"*1\r\n$4\r\nPINGxx"
        + b"*1\rX$4\r\nPING\r\n"
        + b"*0\r\n*-1\r\n\r\n   \n"
        + b"*2\r\n$4\r\nECHO\r\n$2\r\nok\r\n"
    )
    got = exchange(topo.ports[1], data)
    assert got.raw == b"+PONG\r\n+PONG\r\n$2\r\nok\r\n" and not got.closed


# --- inline commands, pipelines, big values ------------------------------------------------------


def test_inline_commands_as_telnet_sends_them(topo: LocalTopology) -> None:
    data = (
        b"PING\r\n"
        b"DEL inline\r\n"
        b"XADD inline 1-1 f v\r\n"
        b"XADD inline 2-1 \"my field\" 'it\\'s'\n"  # quotes, a bare LF
        b'XADD inline 3-1 bin "\\x00\\xff\\r\\n"\r\n'
        b"XLEN inline\r\n"
        b"XRANGE inline - +\r\n"
    )
    got = exchange(topo.ports[1], data)
    assert got.replies[:6] == [b"PONG", 0, b"1-1", b"2-1", b"3-1", 3]
    assert got.replies[6] == [
        [b"1-1", [b"f", b"v"]],
        [b"2-1", [b"my field", b"it's"]],
        [b"3-1", [b"bin", b"\x00\xff\r\n"]],
    ]


def test_thousands_of_pipelined_requests_in_one_packet_answered_in_order(
    topo: LocalTopology,
) -> None:
    parts: list[bytes] = [frame(b"DEL", b"deep")]
    expected: list[object] = [0]
    for i in range(5000):
        if i % 250 == 0:
            parts.append(frame(b"XADD", b"deep", b"%d-1" % (i + 1), b"n", b"%d" % i))
            expected.append(b"%d-1" % (i + 1))
        elif i % 3:
            parts.append(frame(b"ECHO", b"%d" % i))
            expected.append(b"%d" % i)
        else:
            parts.append(b"ECHO %d\r\n" % i)  # inline ones mixed in
            expected.append(b"%d" % i)
    parts.append(frame(b"XLEN", b"deep"))
    expected.append(20)
    data = b"".join(parts)
    assert len(data) > 64 * 1024
    got = exchange(topo.ports[1], data)
    assert got.replies == expected


def test_a_10_mb_value_goes_through_the_protocol_both_ways(topo: LocalTopology) -> None:
    value = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    got = exchange(topo.ports[1], frame(b"ECHO", value) + b"PING\r\n")
    assert got.replies == [value, b"PONG"]


def test_a_900_kb_field_xadd_and_xrange_back(topo: LocalTopology) -> None:
    client = redis.Redis(port=topo.ports[1], protocol=2)
    value = b"\r\n*1\r\n$4\r\n" + bytes(range(256)) * (900 * 1024 // 256)
    sid = client.xadd("big", {"f": value})
    assert client.xrange("big", sid, sid) == [(sid, {b"f": value})]
    client.close()


def test_a_10_mb_field_xadd_and_xrange_back() -> None:
    """On a topology of its own: a 10 MB op record must fit the writer's and the broker's limits."""
    with LocalTopology(regions=1, manual_sync=True) as own:
        client = own.client(1)
        value = bytes(range(256)) * (10 * 1024 * 1024 // 256)
        sid = client.xadd("big", {"f": value})
        assert client.xrange("big", sid, sid) == [(sid, {b"f": value})]


# --- garbage, clients that never read, clients that leave ---------------------------------------


def test_a_garbage_client_is_closed_and_the_others_do_not_notice(
    topo: LocalTopology, bystander: redis.Redis
) -> None:
    good = redis.Redis(port=topo.ports[1], protocol=2)
    good.xadd("calm", {"f": "v"})
    for garbage in (b"*1\r\n$x\r\n", b"*1\r\n" + bytes(range(1, 256)) * 20):
        got = exchange(topo.ports[1], garbage)
        assert got.closed and got.raw.startswith(PE)
        assert good.xlen("calm") == 1 and bystander.ping()
    http = exchange(topo.ports[1], b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert http.kinds() == ["error", "error"]  # unknown commands, as Redis answers them
    good.close()


def test_a_client_that_never_reads_its_replies_is_held_back(topo: LocalTopology) -> None:
    """Each XRANGE answers ~200 KB; the client sends them without ever reading. The node must
    stop reading (so our sends block) after a bounded amount, not buffer gigabytes of replies,
    and keep serving everyone else meanwhile."""
    client = redis.Redis(port=topo.ports[1], protocol=2)
    client.delete("wide")
    pipe = client.pipeline(transaction=False)
    for i in range(100):
        pipe.xadd("wide", {"f": b"x" * 2000}, id=f"{i + 1}-1")
    pipe.execute()
    rss_before = _rss(client)
    greedy = socket.create_connection(("127.0.0.1", topo.ports[1]))
    greedy.setblocking(False)
    request = frame(b"XRANGE", b"wide", b"-", b"+") * 100
    sent = 0
    stalled_since: float | None = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            sent += greedy.send(request)
            stalled_since = None
        except BlockingIOError:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 1.0:
                break
            assert client.ping()  # everyone else is still served
            time.sleep(0.01)
    requests_sent = sent // len(frame(b"XRANGE", b"wide", b"-", b"+"))
    assert stalled_since is not None, "the node kept reading from a client that never reads"
    # without backpressure the node would now hold requests_sent * 200 KB of replies
    assert _rss(client) - rss_before < 150 * 1024 * 1024, requests_sent
    greedy.close()
    assert client.xlen("wide") == 100
    client.close()


def _rss(client: redis.Redis) -> int:
    used = client.info("memory").get("used_memory", 0)
    return int(used)


def test_disconnects_mid_request_and_mid_command_clean_up(topo: LocalTopology) -> None:
    client = redis.Redis(port=topo.ports[1], protocol=2)
    client.delete("leave")
    for partial in (b"*3\r\n$4\r\nXADD\r\n$5\r\nle", b"XADD leave * f", b"*2\r\n"):
        sock = socket.create_connection(("127.0.0.1", topo.ports[1]))
        sock.sendall(partial)
        sock.close()
    for _ in range(5):  # a write whose client is gone before the reply: still applied once
        sock = socket.create_connection(("127.0.0.1", topo.ports[1]))
        sock.sendall(frame(b"XADD", b"leave", b"*", b"f", b"v"))
        sock.close()
    # Each of the five writes runs once (its connection is gone, its command is not): five
    # entries, and once everything dispatched is committed (CRDT.FLUSH waits for it) still five.
    wait_until(lambda: client.xlen("leave") == 5)
    client.execute_command("CRDT.FLUSH")  # type: ignore[no-untyped-call]
    assert client.xlen("leave") == 5
    info = client.execute_command("CRDT.INFO")  # type: ignore[no-untyped-call]
    fields = dict(zip(info[::2], info[1::2], strict=True))
    assert fields[b"blocked_clients"] == 0 and fields[b"write_fault"] == b""
    client.close()


# --- fuzzing over sockets -------------------------------------------------------------------------

safe_arg = st.binary(max_size=8).map(lambda b: b.replace(b"\x00", b"\x01"))
valid_frame = st.one_of(
    st.lists(safe_arg, max_size=3).map(lambda a: frame(b"ECHO", *a[:1]) if a else frame(b"PING")),
    st.sampled_from([b"PING\r\n", b"ECHO hi\r\n", b'ECHO "a b"\r\n', b"PING x y\r\n"]),
)
bad_frame = st.one_of(
    st.binary(max_size=24),
    st.sampled_from(
        [
            b"*1\r\n$536870913\r\n",
            b"*2147483648\r\n",
            b"*-0\r\n",
            b"*1\r\n:1\r\n",
            b"'x\r\n",
            b"*1\r\n$3\r\nab",
            b"*3\r\n",
            b"$4\r\nPING\r\n",
            b"*1\r\n$99999999999999999999\r\n",
            b"*1\r\n$-1\r\n",
            b"*\r\n",
            b"\r\n",
        ]
    ),
    st.tuples(st.sampled_from([b"*", b"$", b"*1\r\n$"]), st.binary(max_size=6)).map(b"".join),
)
fuzz_input = st.lists(st.one_of(valid_frame, bad_frame), min_size=1, max_size=6).map(
    lambda frames: b"".join(frames).replace(b"\x00", b"\x01")  # NUL: the documented difference
)


def _clock(reply: object) -> bool:
    """A TIME reply (seconds, microseconds): two clocks never agree on its value."""
    return (
        isinstance(reply, list)
        and len(reply) == 2
        and all(isinstance(part, bytes) and part.isdigit() for part in reply)
    )


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=fuzz_input)
@example(data=b"\x01*2\r\n$4\r\nECHO\r\n$4\r\ntime\r\n")  # TIME was unsupported (CI, 2026-11-25)
def test_fuzzed_frames_get_the_replies_and_close_redis_would_give(
    topo: LocalTopology, redis_server: object, data: bytes
) -> None:
    theirs = exchange(redis_server.port, data)  # type: ignore[attr-defined]
    ours = exchange(topo.ports[1], data)
    assert ours.closed == theirs.closed
    assert ours.kinds() == theirs.kinds()
    if theirs.closed and theirs.replies:  # the protocol error itself, byte for byte
        assert str(ours.replies[-1]) == str(theirs.replies[-1])
    for mine, real in zip(ours.replies, theirs.replies, strict=True):
        if not isinstance(real, hiredis.ReplyError) and not (_clock(mine) and _clock(real)):
            assert mine == real


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.lists(st.one_of(valid_frame, bad_frame, st.binary(max_size=64)), max_size=8))
def test_fuzzed_bytes_never_hurt_the_node(
    topo: LocalTopology, bystander: redis.Redis, data: list[bytes]
) -> None:
    payload = b"".join(data)
    count, closes = expected_of(payload)
    got = exchange(topo.ports[1], payload)
    assert len(got.replies) == count + closes and got.closed == closes
    assert bystander.ping()


# BLOCK is left out: a block forever would hang the connection.
WORDS = [w for w in OPTION_WORDS if w != b"BLOCK"] + [
    b"0",
    b"0-0",
    b"1-1",
    b"-1",
    b"10",
    b"fz",
    b"fz2",
    b"g",
    b"c",
]
fuzz_command = st.tuples(
    st.sampled_from(sorted(TABLE)),
    st.lists(st.one_of(st.sampled_from(WORDS), st.binary(max_size=8)), max_size=8),
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(commands=st.lists(fuzz_command, min_size=1, max_size=5))
def test_fuzzed_arguments_for_every_stream_command_get_replies(
    topo: LocalTopology, commands: list[tuple[str, list[bytes]]]
) -> None:
    """Random arguments to every command of the table, pipelined on one connection: one reply
    each, never a dropped connection. BLOCK is left out (a block forever would hang the test;
    tests/integration/test_blocking.py covers it) and so are the flushes (they would wipe the
    other tests' keys)."""
    requests = []
    for name, args in commands:
        if name in ("flushall", "flushdb"):
            name = "dbsize"
        args = [b"COUNT" if a.lower() == b"block" else a for a in args]
        requests.append(frame(name.encode(), *args))
    got = exchange(topo.ports[1], b"".join(requests) + b"PING\r\n")
    assert len(got.replies) == len(requests) + 1 and got.replies[-1] == b"PONG"
    assert not got.closed
    assert all(b"internal error" not in str(r).encode() for r in got.replies)
