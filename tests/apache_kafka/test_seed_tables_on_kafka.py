"""Every seed table, end to end over RESP, on three Apache Kafka clusters replicated by
MirrorMaker 2 (the stack users deploy), as on the embedded stack
(tests/integration/test_seed_tables_e2e.py)."""

from __future__ import annotations

import pytest
from keyspace_driver import KeyspaceDriver

from apache_kafka.conftest import Topologies
from streams.scenarios import Scenario, load_all
from streams.scenarios.runner import failures, run

SCENARIOS = sorted(load_all(), key=lambda s: s.id_mode)
"""Grouped by ID mode: one topology per mode, each started once and stopped before the next."""


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.slug for s in SCENARIOS])
def test_seed_table_holds_on_apache_kafka_with_mirrormaker(
    scenario: Scenario, kafka_topologies: Topologies
) -> None:
    topo = kafka_topologies.get(scenario.id_mode)
    driver = KeyspaceDriver(topo, scenario.slug.encode() + b":", scenario.regions)
    try:
        bad = failures(run(scenario, driver))
    finally:
        driver.close()
    assert not bad, "\n".join(
        f"{o.step.t} r{getattr(o.step, 'region', '?')} {getattr(o.step, 'args', '')}: "
        f"got {o.actual}, expected {o.expected}"
        for o in bad
    )
