"""Every seed table, replayed end to end over RESP against real region nodes on real brokers."""

from __future__ import annotations

import pytest

from streams.scenarios import Scenario, load_all
from streams.scenarios.resp_driver import RespDriver
from streams.scenarios.runner import failures, run
from topology.local import LocalTopology

SCENARIOS = load_all()


SHAPES = {"4-shards": (4, 1), "4-shards-2-nodes": (4, 2)}
"""Regions as (shards, node processes): every seed rule is per key, so a sharded region, in one
process or over two speaking the cluster protocol, must hold every table as one shard does.
One shard per region runs every table in `streams demo` (tests/integration/test_demo_main_job.py)
and on Apache Kafka with MirrorMaker 2 (tests/apache_kafka/test_seed_tables_on_kafka.py): not
again here, for CI's time."""


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.slug for s in SCENARIOS])
def test_seed_table_holds_on_real_nodes(scenario: Scenario, shape: str) -> None:
    shards, nodes = SHAPES[shape]
    with LocalTopology(
        regions=scenario.regions,
        manual_sync=True,
        id_mode=scenario.id_mode,
        debug_clock=True,
        shards=shards,
        nodes=nodes,
    ) as topo:
        driver = RespDriver(topo)
        try:
            bad = failures(run(scenario, driver))
        finally:
            driver.close()
        assert not bad, "\n".join(
            f"{o.step.t} r{getattr(o.step, 'region', '?')} {getattr(o.step, 'args', '')}: "
            f"got {o.actual}, expected {o.expected}"
            for o in bad
        )
