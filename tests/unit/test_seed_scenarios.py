"""Every table of seeds 000 and 004, run over simulated regions with explicit sync."""

from __future__ import annotations

import pytest

from streams.ids import IdMode
from streams.scenarios import Scenario, load_all
from streams.scenarios.runner import failures, run
from streams.scenarios.sim import SimulatedRegions

SCENARIOS = load_all()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.slug for s in SCENARIOS])
def test_seed_table_holds_on_simulated_regions(scenario: Scenario) -> None:
    sim = SimulatedRegions(scenario.regions, IdMode.parse(scenario.id_mode))
    bad = failures(run(scenario, sim))
    assert not bad, "\n".join(
        f"{o.step.t} r{getattr(o.step, 'region', '?')} {getattr(o.step, 'args', '')}: "
        f"got {o.actual}, expected {o.expected}"
        for o in bad
    )


def test_every_seed_table_is_covered() -> None:
    seeds = {s.slug.split("_", 1)[0] for s in SCENARIOS}
    assert {"000", "004"} <= seeds
    assert len(SCENARIOS) >= 20
