"""Every seed table, end to end over RESP, on three Apache Kafka clusters replicated by
MirrorMaker 2 (the stack users deploy), as on the embedded stack
(tests/integration/test_seed_tables_e2e.py)."""

from __future__ import annotations

import pytest
from keyspace_driver import check_table_on_own_keys

from apache_kafka.conftest import Topologies
from streams.scenarios import Scenario, load_all

SCENARIOS = sorted(load_all(), key=lambda s: s.id_mode)
"""Grouped by ID mode: one topology for all, its nodes restarted in the next mode between groups."""


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.slug for s in SCENARIOS])
def test_seed_table_holds_on_apache_kafka_with_mirrormaker(
    scenario: Scenario, kafka_topologies: Topologies
) -> None:
    check_table_on_own_keys(kafka_topologies.get(scenario.id_mode), scenario)
