"""Run a scenario against any set of regions: simulated pure regions, or real nodes over RESP.

A driver executes one command in one region and performs syncs; the runner walks the steps,
projects each reply into the seed's notation and records whether it matched. The same runner
serves the core's tests, the integration tests and `streams demo`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from streams.scenarios import CommandStep, Scenario, Step, SyncStep
from streams.scenarios.projection import (
    Projection,
    ProjectionError,
    format_projection,
    matches,
    project,
)


class Driver(Protocol):
    def execute(self, region: int, args: tuple[bytes, ...], clock_ms: int | None) -> object:
        """The RESP2 reply in raw Python form (an Exception instance for an error reply)."""

    def sync(self, regions: tuple[int, ...] | None) -> None:
        """Every listed region (all when None) applies every op of the others."""


@dataclass(frozen=True)
class Outcome:
    step: Step
    ok: bool
    actual: str
    expected: str


def run(scenario: Scenario, driver: Driver) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for step in scenario.steps:
        if isinstance(step, SyncStep):
            driver.sync(step.regions)
            outcomes.append(Outcome(step, True, "", ""))
        else:
            outcomes.append(_command(step, driver))
    return outcomes


def _command(step: CommandStep, driver: Driver) -> Outcome:
    reply = driver.execute(step.region, step.args, step.clock_ms)
    if step.expect_error is not None:
        text = _error_text(reply)
        ok = text is not None and text.startswith(step.expect_error)
        return Outcome(step, ok, text or repr(reply), f"error {step.expect_error}...")
    if isinstance(reply, Exception) and not _projects_errors(step.args):
        return Outcome(step, False, f"error {reply}", _expected(step))
    try:
        projected: Projection = project(step.args, reply, step.field)
    except ProjectionError as exc:
        return Outcome(step, False, str(exc), _expected(step))
    ok = step.expect is None or matches(step.expect, projected)
    return Outcome(step, ok, format_projection(projected), _expected(step))


def _projects_errors(args: tuple[bytes, ...]) -> bool:
    return len(args) >= 2 and args[0].upper() == b"XINFO" and args[1].upper() == b"GROUPS"


def _expected(step: CommandStep) -> str:
    return "" if step.expect is None else format_projection(step.expect)


def _error_text(reply: object) -> str | None:
    if not isinstance(reply, Exception):
        return None
    text = getattr(reply, "text", None)
    return text if isinstance(text, str) else str(reply)


def failures(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if not o.ok]
