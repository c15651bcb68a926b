"""A throw-away real `redis-server` for differential tests.

`RedisServer` starts the Debian `redis-server` on a free loopback port in a temporary directory
(no persistence), waits until PING answers and always kills the process on exit; `connect` gives
a `support.RawClient`, whose `call` returns the exact bytes of one reply, so the test can compare
them byte for byte with `streams.resp.encode.encode(reply, 2)`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from types import TracebackType

import pytest
from support import RawClient, free_port

START_TIMEOUT_S = 10.0


def find_redis_server() -> str | None:
    return shutil.which("redis-server")


def require_redis_server() -> None:
    """Skip the calling test or fixture when redis-server is missing, except under CI (the `CI`
    environment variable set), where that fails it: CI must really run the differential tests."""
    if find_redis_server() is not None:
        return
    reason = "redis-server is not on PATH (install the Debian package redis-server)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so the differential test must run", pytrace=False)
    pytest.skip(reason)


class RedisServer:
    """`with RedisServer() as server:` a fresh redis-server on `server.port`."""

    def __init__(self, executable: str | None = None) -> None:
        found = executable or find_redis_server()
        if found is None:
            raise FileNotFoundError("redis-server is not on PATH")
        self.executable = found
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def start(self, port: int | None = None) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="redis-diff-")
        self.port = port or free_port()
        log = os.path.join(self._dir.name, "redis.log")
        self.process = subprocess.Popen(
            [
                self.executable,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir.name,
                "--logfile",
                log,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            self._wait_ready(log)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, log: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.process.returncode}: {_tail(log)}"
                )
            try:
                conn = RawClient(self.port, timeout_s=1.0)
            except OSError:
                time.sleep(0.05)
                continue
            try:
                if conn.call([b"PING"]) == b"+PONG\r\n":
                    return
            except OSError:
                pass
            finally:
                conn.close()
            time.sleep(0.05)
        raise TimeoutError(f"redis-server did not answer PING within {START_TIMEOUT_S}s")

    def version(self) -> str:
        conn = self.connect()
        try:
            info = conn.call([b"INFO", b"server"]).decode()
        finally:
            conn.close()
        for line in info.splitlines():
            if line.startswith("redis_version:"):
                return line.split(":", 1)[1].strip()
        return "unknown"

    def connect(self) -> RawClient:
        return RawClient(self.port)

    def restart_if_dead(self) -> str | None:
        """The crash report of a server that died (redis-server 7.0.15 has assertion crashes of
        its own), after starting a fresh one on the same port; None while it runs. One crash
        must fail the test that caused it, not every later test of the session."""
        if self.process is None or self.process.poll() is None:
            return None
        log = os.path.join(self._dir.name, "redis.log") if self._dir is not None else ""
        report = _tail(log) if log else "(no log)"
        port = self.port
        self.stop()
        self.start(port)
        return report

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=10)
            self.process = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-2000:]
    except OSError:
        return "(no log)"
