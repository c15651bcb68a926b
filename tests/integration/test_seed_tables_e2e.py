"""Every seed table, replayed end to end over RESP against real region nodes on real brokers."""

from __future__ import annotations

import pytest

from streams.scenarios import Scenario, load_all
from streams.scenarios.resp_driver import RespDriver
from streams.scenarios.runner import failures, run
from topology.local import LocalTopology

SCENARIOS = load_all()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.slug for s in SCENARIOS])
def test_seed_table_holds_on_real_nodes(scenario: Scenario) -> None:
    with LocalTopology(
        regions=scenario.regions, manual_sync=True, id_mode=scenario.id_mode, debug_clock=True
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
