"""Every seed table, replayed end to end over RESP against real region nodes on real brokers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from keyspace_driver import check_table_on_own_keys

from streams.scenarios import Scenario, load_all
from topology.local import LocalTopology

SHAPES = {"4-shards": (4, 1), "4-shards-2-nodes": (4, 2)}
"""Regions as (shards, node processes): every seed rule is per key, so a sharded region, in one
process or over two speaking the cluster protocol, must hold every table as one shard does.
One shard per region runs every table in `streams demo` (tests/integration/test_demo_main_job.py)
and on Apache Kafka with MirrorMaker 2 (tests/apache_kafka/test_seed_tables_on_kafka.py): not
again here, for CI's time."""

REGIONS = max(s.regions for s in load_all())

CASES = sorted(
    ((shape, s) for shape in SHAPES for s in load_all()), key=lambda c: (c[0], c[1].id_mode)
)
"""Grouped by shape and ID mode: one topology for each, started once and stopped before the next;
each table runs on keys of its own (`KeyspaceDriver`)."""


class Shared:
    """The topology of the current (shape, ID mode): one at a time."""

    def __init__(self) -> None:
        self.key: tuple[str, str] | None = None
        self.topo: LocalTopology | None = None

    def get(self, shape: str, id_mode: str) -> LocalTopology:
        if self.key != (shape, id_mode) or self.topo is None:
            self.close()
            shards, nodes = SHAPES[shape]
            topo = LocalTopology(
                regions=REGIONS,
                manual_sync=True,
                id_mode=id_mode,
                debug_clock=True,
                shards=shards,
                nodes=nodes,
            )
            try:
                topo.start()
            except BaseException:
                topo.close()
                raise
            self.key, self.topo = (shape, id_mode), topo
        return self.topo

    def close(self) -> None:
        if self.topo is not None:
            self.topo.close()
        self.key, self.topo = None, None


@pytest.fixture(scope="module")
def shared() -> Iterator[Shared]:
    topologies = Shared()
    try:
        yield topologies
    finally:
        topologies.close()


@pytest.mark.parametrize(
    ("shape", "scenario"), CASES, ids=[f"{s.slug}-{shape}" for shape, s in CASES]
)
def test_seed_table_holds_on_real_nodes(scenario: Scenario, shape: str, shared: Shared) -> None:
    check_table_on_own_keys(shared.get(shape, scenario.id_mode), scenario)
