"""Issue 27, items 5, 6 and 7: `maxclients`, `timeout` and `client-output-buffer-limit` are
enforced as Redis enforces them and settable with CONFIG SET (on main before this, CONFIG SET
refused maxclients and client-output-buffer-limit, and accepted `timeout` without effect), and a
server out of file descriptors does not flood its log (asyncio logged ~3,500 tracebacks a
second). Real sockets against an in-process node; maxclients byte for byte with redis-server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest
from differential.redis_server import RedisServer
from support import RawClient

import streams
from security.served import CLOSED, ServedNode, command, exchange, receive


@pytest.fixture(scope="module")
def node() -> Iterator[ServedNode]:
    with ServedNode() as served:
        yield served


OK = b"+OK\r\n"


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _call(sock: socket.socket, *args: str | bytes) -> bytes:
    sock.sendall(command(*args))
    return receive(sock, quiet_s=0.2)


def _maxclients_story(port: int) -> list[bytes]:
    """maxclients 2 with the control connection open: one more is served, the next refused."""
    control = _connect(port)
    seen = [_call(control, "CONFIG", "SET", "maxclients", "2")]
    second = _connect(port)
    seen.append(_call(second, "PING"))
    third = _connect(port)
    seen.append(receive(third, quiet_s=0.3))
    second.close()
    time.sleep(0.2)
    fourth = _connect(port)
    seen.append(_call(fourth, "PING"))
    seen.append(_call(control, "CONFIG", "SET", "maxclients", "0"))
    seen.append(_call(control, "CONFIG", "SET", "maxclients", "10000"))
    for sock in (control, third, fourth):
        sock.close()
    return seen


def test_maxclients_refuses_the_client_over_it_with_redis_error(
    node: ServedNode, redis_server: RedisServer
) -> None:
    expected = _maxclients_story(redis_server.port)
    got = _maxclients_story(node.port)
    assert got == expected
    assert got[2] == b"-ERR max number of clients reached\r\n" + CLOSED
    info = RawClient(node.port).call([b"INFO"])
    assert b"rejected_connections:1\r\n" in info and b"maxclients:10000\r\n" in info


def test_timeout_closes_idle_clients_but_not_blocked_readers(node: ServedNode) -> None:
    assert exchange(node.port, command("CONFIG", "SET", "timeout", "1")) == b"+OK\r\n"
    try:
        idle = _connect(node.port)
        assert _call(idle, "PING") == b"+PONG\r\n"
        blocked = _connect(node.port)
        blocked.sendall(command("XREAD", "BLOCK", "0", "STREAMS", "timeout-key", "$"))
        assert receive(idle, quiet_s=4.0, limit_s=4.0) == CLOSED  # closed after 1-2 s idle
        writer = _connect(node.port)
        assert _call(writer, "XADD", "timeout-key", "*", "f", "v").startswith(b"$")
        assert receive(blocked, quiet_s=1.0).startswith(b"*1\r\n")  # still there: answered
        writer.close()
        blocked.close()
    finally:
        exchange(node.port, command("CONFIG", "SET", "timeout", "0"))


def _unread_range(port: int) -> socket.socket:
    """A client that asks for a large XRANGE and reads nothing (a small receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(command("CLIENT", "SETNAME", "reads-nothing") + command("XRANGE", "big", "-", "+"))
    return sock


@pytest.mark.parametrize("limit", ["normal 1mb 512kb 60", "normal 0 1mb 1"])
def test_a_client_not_reading_its_replies_is_dropped_over_the_output_limit(
    node: ServedNode, limit: str, caplog: pytest.LogCaptureFixture
) -> None:
    control = RawClient(node.port)
    value = b"v" * 10_000
    if control.call([b"XLEN", b"big"]) != b":1000\r\n":  # a 10 MB stream, built once
        for _ in range(10):
            control.sock.sendall(command("XADD", "big", "*", "f", value) * 100)
            control.replies(100)
    assert control.call([b"CONFIG", b"SET", b"client-output-buffer-limit", limit.encode()]) == OK
    try:
        sock = _unread_range(node.port)
        host, port = sock.getsockname()
        dropped = f"client {host}:{port} closed for overcoming of output buffer limits"
        deadline = time.monotonic() + 10
        while not any(dropped in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "the client that reads nothing is still served"
            time.sleep(0.1)
        assert b"name=reads-nothing" not in control.call([b"CLIENT", b"LIST"])
        assert receive(sock, quiet_s=2.0, limit_s=30).endswith(CLOSED)
        sock.close()
        assert control.call([b"PING"]) == b"+PONG\r\n"
    finally:
        control.call([b"CONFIG", b"SET", b"client-output-buffer-limit", b"normal 0 0 0"])
        control.close()


def test_without_an_output_limit_a_slow_reader_gets_its_whole_reply(node: ServedNode) -> None:
    """Redis's default (normal 0 0 0): a client reading late is not dropped."""
    control = _connect(node.port)
    control.sendall(command("XADD", "small", "*", "f", "v" * 100_000))
    receive(control, quiet_s=0.3)
    sock = _unread_range(node.port)
    time.sleep(0.5)
    sock.sendall(command("PING"))
    got = receive(sock, quiet_s=1.0)
    assert got.startswith(b"+OK\r\n*0\r\n") or got.startswith(b"+OK\r\n*")
    sock.close()
    control.close()


def test_config_set_client_output_buffer_limit_parses_as_redis(
    node: ServedNode, redis_server: RedisServer
) -> None:
    values = [
        "foo",
        "normal 1 2",
        "normal 1x 2 3",
        "normal 1 2 -1",
        "master 1 2 3",
        "normal 10mb 5mb 10 pubsub 1 1 1",
        "replica 64mb 16mb 30",
    ]
    limit = b"client-output-buffer-limit"
    requests = [[b"CONFIG", b"SET", limit, v.encode()] for v in values]
    requests += [[b"CONFIG", b"GET", limit]]
    requests += [[b"CONFIG", b"SET", b"timeout", b"-1"], [b"CONFIG", b"SET", b"timeout", b"5"]]
    requests += [[b"CONFIG", b"SET", b"maxclients", b"5000000000"]]
    requests += [[b"CONFIG", b"SET", b"timeout", b"0"]]
    reset = b"normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    requests += [[b"CONFIG", b"SET", limit, reset]]
    replies = []
    for port in (redis_server.port, node.port):
        conn = RawClient(port)
        replies.append([conn.call(r) for r in requests])
        conn.close()
    assert replies[1] == replies[0]


FD_EXHAUSTION = textwrap.dedent(
    """
    import asyncio, logging, os, resource, sys
    from streams.resp.server import serve

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    async def handler(session, args):
        return b"x"

    async def main():
        server = await serve(handler, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        hog = []
        try:
            while True:
                hog.append(os.dup(0))
        except OSError:
            pass
        await asyncio.sleep(2.5)
        for fd in hog:
            os.close(fd)

    asyncio.run(main())
    """
)


def test_running_out_of_file_descriptors_does_not_flood_the_log() -> None:
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(streams.__file__))}
    child = subprocess.Popen(
        [sys.executable, "-c", FD_EXHAUSTION],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        time.sleep(0.3)  # the child holds every descriptor by now
        clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]
        _, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    for sock in clients:
        sock.close()
    log = err.decode()
    assert log.count("cannot accept new connections") == 1, log[:2000]
    assert len(log.splitlines()) < 10, f"{len(log.splitlines())} lines: {log[:2000]}"
