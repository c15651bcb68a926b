"""Shared fixtures.

`redis_server`: one real `redis-server` (the Debian package) per test session, on a free loopback
port, killed at teardown. Without the binary the tests that use it are skipped, except under CI
(the `CI` environment variable set), where a missing server fails them: CI must really run the
differential test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from differential.redis_server import RedisServer, find_redis_server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if find_redis_server() is None:
        reason = "redis-server is not on PATH (install the Debian package redis-server)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so the differential test must run", pytrace=False)
        pytest.skip(reason)
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
