"""Issue 27, item 2: before AUTH, Redis's limits. A client that has not authenticated (the node
started with a password) and sends a multibulk of more than 10 arguments, or an argument longer
than 16384 bytes, gets Redis's protocol error and the connection closes, before the node reads
(and holds) the value: on main before this, a 512 MB ECHO was read in full. Compared byte for
byte with redis-server 7.0.15 configured alike. `proto-max-bulk-len` is settable and enforced
with Redis's text."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from differential.redis_server import RedisServer, require_redis_server

from security.served import ServedNode, command, exchange

PASSWORD = "pw"


@pytest.fixture(scope="module")
def node() -> Iterator[ServedNode]:
    with ServedNode(requirepass=PASSWORD) as served:
        yield served


@pytest.fixture(scope="module")
def auth_server() -> Iterator[RedisServer]:
    require_redis_server()
    server = RedisServer()
    server.start()
    try:
        conn = server.connect()
        conn.call([b"CONFIG", b"SET", b"requirepass", PASSWORD.encode()])
        conn.close()
        yield server
    finally:
        server.stop()


AUTH = command("AUTH", PASSWORD)
CASES = {
    "11 arguments": command("PING", *["a"] * 10),
    "a 16385-byte argument (header only)": b"*2\r\n$4\r\nECHO\r\n$16385\r\n",
    "a 512 MB argument (header only)": b"*2\r\n$4\r\nECHO\r\n$536870912\r\n",
    "10 arguments: NOAUTH, connection kept": command("PING", *["a"] * 9),
    "a 16384-byte argument: NOAUTH": command("ECHO", "x" * 16384),
    "inline commands have no such limit": b"PING" + b" a" * 20 + b"\r\n",
    "AUTH, then 11 arguments pipelined: read as authenticated": AUTH + command("XLEN", *"a" * 10),
    "AUTH, then a 20000-byte value pipelined": AUTH + command("ECHO", "v" * 20000),
    "PING, then 11 arguments pipelined": command("PING") + command("PING", *["a"] * 10),
    "wrong AUTH, then 11 arguments": command("AUTH", "nope") + command("PING", *["a"] * 10),
}


@pytest.mark.parametrize("case", list(CASES))
def test_unauthenticated_requests_are_limited_as_redis_limits_them(
    case: str, node: ServedNode, auth_server: RedisServer
) -> None:
    data = CASES[case]
    assert exchange(node.port, data) == exchange(auth_server.port, data)


def test_an_unauthenticated_oversized_request_is_refused_and_the_connection_closed(
    node: ServedNode,
) -> None:
    got = exchange(node.port, b"*2\r\n$4\r\nECHO\r\n$536870912\r\n" + b"x" * 65536)
    assert got == b"-ERR Protocol error: unauthenticated bulk length\r\n<closed>"


def test_proto_max_bulk_len_is_settable_and_enforced_with_redis_text(
    node: ServedNode, auth_server: RedisServer
) -> None:
    too_long = AUTH + b"*2\r\n$4\r\nECHO\r\n$1048577\r\n"
    for port in (node.port, auth_server.port):
        assert exchange(port, AUTH + command("CONFIG", "SET", "proto-max-bulk-len", "1mb")) == (
            b"+OK\r\n+OK\r\n"
        )
    try:
        assert exchange(node.port, too_long) == exchange(auth_server.port, too_long)
        assert exchange(node.port, too_long).endswith(b"invalid bulk length\r\n<closed>")
        refused = AUTH + command("CONFIG", "SET", "proto-max-bulk-len", "1000")
        assert exchange(node.port, refused) == exchange(auth_server.port, refused)
    finally:
        reset = AUTH + command("CONFIG", "SET", "proto-max-bulk-len", "512mb")
        for port in (node.port, auth_server.port):
            exchange(port, reset)
