"""Shared fixtures.

`redis_server`: one real `redis-server` (the Debian package) per test session, on a free loopback
port, killed at teardown. Without the binary the tests that use it are skipped, except under CI
(the `CI` environment variable set), where a missing server fails them: CI must really run the
differential test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from differential.redis_server import RedisServer, require_redis_server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    require_redis_server()
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _redis_server_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that made redis-server crash fails (its connection dies); the next one gets a
    fresh server on the same port, and the crash report goes to the log."""
    if "redis_server" not in request.fixturenames:
        yield
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    report = server.restart_if_dead()
    if report is not None:
        import warnings

        warnings.warn(f"redis-server had crashed and was restarted: {report}", stacklevel=1)
    yield


SLOW_DIRS = {"integration", "faults", "sdk", "pipeline", "bench"}
"""Directories whose tests start brokers, nodes or Spark: out of the fast loop (`-m "not slow"`)."""
KAFKA_DIRS = {"integration", "faults", "sdk"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Test tiers in one place: tests under the directories above are `slow` (and `kafka`
    where they start brokers); tests that use a real redis-server are `redis`. A test file may
    add its own markers too."""
    for item in items:
        parts = Path(str(item.fspath)).parts
        folder = parts[parts.index("tests") + 1] if "tests" in parts else ""
        if folder in SLOW_DIRS:
            item.add_marker(pytest.mark.slow)
        if folder in KAFKA_DIRS:
            item.add_marker(pytest.mark.kafka)
        if folder == "differential" or "redis_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)
        if item.get_closest_marker("kafka") is not None:
            item.add_marker(pytest.mark.slow)
