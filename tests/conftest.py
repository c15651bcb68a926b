"""Shared fixtures.

`redis_server`: one real `redis-server` (the Debian package) per test session, on a free loopback
port, killed at teardown. Without the binary the tests that use it are skipped, except under CI
(the `CI` environment variable set), where a missing server fails them: CI must really run the
differential test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from differential.redis_server import RedisServer, require_redis_server

from topology.ports import RANGE_VARIABLE, worker_range


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (`-n N`, as scripts/test.sh runs the tiers that mostly wait), each
    worker and every process it starts hands out loopback ports from a slice of its own
    (`STREAMS_PORT_RANGE`): two workers never pick one port for two listeners."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... in xdist's workers
    if worker.startswith("gw") and RANGE_VARIABLE not in os.environ:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        os.environ[RANGE_VARIABLE] = worker_range(int(worker[2:]), count)


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


FOLDER_MARKS: dict[str, tuple[str, ...]] = {
    "integration": ("kafka", "slow"),
    "faults": ("kafka", "slow"),
    "sdk": ("kafka", "slow"),
    "pipeline": ("spark", "kafka", "slow"),
    "bench": ("kafka", "redis", "slow"),
    "differential": ("redis",),
    "apache_kafka": ("apache_kafka", "slow"),
}
"""The test tiers, in one place: a test's folder says what it starts."""
REDIS_FIXTURES = {"redis_server", "auth_server"}
"""Fixtures that start a real redis-server: a test using one is `redis` wherever it is."""
KAFKA_FILE_SUFFIX = "_kafka.py"
"""A test file elsewhere (tests/replay) that starts brokers says so in its name."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers from the folder (`FOLDER_MARKS`) and the file name (`KAFKA_FILE_SUFFIX`); a test
    that uses a real redis-server (`REDIS_FIXTURES`) is `redis` wherever it is. The fast loop is
    `pytest -m "not slow"`."""
    for item in items:
        path = Path(str(item.fspath))
        parts = path.parts
        folder = parts[parts.index("tests") + 1] if "tests" in parts else ""
        marks = set(FOLDER_MARKS.get(folder, ()))
        if path.name.endswith(KAFKA_FILE_SUFFIX):
            marks |= {"kafka", "slow"}
        if REDIS_FIXTURES & set(getattr(item, "fixturenames", ())):
            marks.add("redis")
        for mark in sorted(marks):
            item.add_marker(getattr(pytest.mark, mark))
        if item.get_closest_marker("compose") and not _compose_asked(config):
            item.add_marker(pytest.mark.skip(reason=COMPOSE_OPT_IN))


COMPOSE_OPT_IN = (
    "the compose demo (tests/compose_demo/) builds images and starts 3 Kafka brokers, "
    "MirrorMaker 2 and 5 nodes in containers (about 3 min with the images built by an earlier "
    "run, 5-6 cold): it needs podman (scripts/compose-local.sh install) and runs when asked "
    "for, as .ci/run does after the rest: `python3 -m pytest -m compose tests/compose_demo` or "
    "STREAMS_COMPOSE_TESTS=1"
)


def _compose_asked(config: pytest.Config) -> bool:
    """The compose demo runs when asked for by marker expression or the environment only."""
    markexpr = str(config.getoption("markexpr", "") or "")
    return "compose" in markexpr.replace("not compose", "") or bool(
        os.environ.get("STREAMS_COMPOSE_TESTS")
    )


TIMES_FILE = os.environ.get("STREAMS_TEST_TIMES")
"""Where each test's wall time goes as it finishes (set by whoever trims CI's time): the
durations pytest prints come only at the end of a run, which may not end."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if TIMES_FILE and report.when in ("setup", "call", "teardown"):
        with open(TIMES_FILE, "a") as out:
            out.write(f"{report.duration:.2f}\t{report.when}\t{report.outcome}\t{report.nodeid}\n")
