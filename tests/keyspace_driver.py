"""Seed tables on keys of their own (`streams.scenarios.keyspace.KeyspaceDriver`), checked step by
step: the sharded and Apache Kafka seed-table tests share one topology per ID mode this way."""

from __future__ import annotations

from streams.scenarios import Scenario
from streams.scenarios.keyspace import KeyspaceDriver
from streams.scenarios.resp_driver import Topology
from streams.scenarios.runner import failures, run


def check_table_on_own_keys(topology: Topology, scenario: Scenario) -> None:
    """Run `scenario` on `topology` under keys of its own; every step must give what the seed
    table says (the failing steps listed otherwise)."""
    driver = KeyspaceDriver.for_table(topology, scenario)
    try:
        bad = failures(run(scenario, driver))
    finally:
        driver.close()
    assert not bad, "\n".join(
        f"{o.step.t} r{getattr(o.step, 'region', '?')} {getattr(o.step, 'args', '')}: "
        f"got {o.actual}, expected {o.expected}"
        for o in bad
    )
