"""Fixtures of the SDK tests: one real single-region topology per module (embedded Tansu broker,
a region node subprocess), and unique stream names so tests of a module do not meet."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

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
