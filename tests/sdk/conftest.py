"""Fixtures of the SDK tests: one real single-region topology per module (embedded Tansu broker,
a region node subprocess), unique stream names so tests of a module do not meet, and `drain`,
which runs a consumer's steps until it is idle."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator

import pytest

from streams.sdk import GroupConsumer
from topology.local import LocalTopology

_names = itertools.count()


@pytest.fixture(scope="module")
def region() -> Iterator[LocalTopology]:
    with LocalTopology(regions=1) as topo:
        yield topo


@pytest.fixture
def url(region: LocalTopology) -> str:
    return f"redis://127.0.0.1:{region.ports[1]}"


@pytest.fixture
def stream(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name[:40]}-{next(_names)}"


def _drain(consumer: GroupConsumer, idle_steps: int = 3, until: float = 60.0) -> None:
    """Run steps until `idle_steps` steps in a row handled nothing (or the deadline: a test that
    hangs fails on what it asserts next, not on time)."""
    deadline = time.monotonic() + until
    idle = 0
    while idle < idle_steps and time.monotonic() < deadline:
        idle = idle + 1 if consumer.run_once() == 0 else 0


@pytest.fixture
def drain() -> Callable[..., None]:
    return _drain
