"""The seed documents' tables as data: one TOML file per table, loaded into frozen dataclasses.

Every table in seeds 000 and 004 is an executable scenario. The tables are copied into this
package (rather than parsed out of the seed text at run time) so the product does not depend on
the seed files, and so every adaptation a table needed to run against Redis 7 is written down
next to it (`notes`, `seed_cmd`) instead of being hidden in a parser.

The loader validates strictly and names the file and the step in every error: a typo in a
scenario must fail at load time, not show up later as a puzzling divergence in a replication test.
It uses only the standard library (`tomllib`, `importlib.resources`) so it works from an
installed wheel as well as from a checkout.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

__all__ = [
    "ID_MODES",
    "CommandStep",
    "Scenario",
    "Step",
    "SyncStep",
    "load",
    "load_all",
    "loads",
]

ID_MODES: Final = ("strict", "semi-strict", "liberal")
"""The XADD ID modes of seed 000, spelled as `crdt_xadd_id_uniqueness_mode` spells them."""

_SCENARIO_KEYS: Final = frozenset({"name", "source", "regions", "id_mode", "notes"})
_COMMAND_KEYS: Final = frozenset(
    {"t", "region", "cmd", "clock_ms", "expect", "expect_error", "seed_cmd", "field"}
)
_SYNC_KEYS: Final = frozenset({"t", "sync"})


@dataclass(frozen=True)
class CommandStep:
    """One table cell: a single Redis command run in one region at time `t`.

    `args` is the command split on whitespace and encoded, ready for a client or our own
    dispatcher. `clock_ms` pins the region's wall clock so IDs generated from '*' are the exact
    ones the seed prints. `expect` is the seed's bold result in its abbreviated notation (a list
    of IDs or names, or an integer, compared through `projection.project`); None means the seed
    shows no result for this cell, so nothing is compared. `expect_error` is a prefix of an
    expected error reply. `seed_cmd` keeps the seed's original text when `args` had to be
    adapted to run, so the adaptation stays visible. `field` names the XINFO field to project
    (default `name`), e.g. `last-delivered-id` to observe the consecutive-XACK effect.
    """

    t: str
    region: int
    args: tuple[bytes, ...]
    clock_ms: int | None
    expect: tuple[str, ...] | int | None
    expect_error: str | None
    seed_cmd: str | None
    field: str | None = None

    @property
    def command(self) -> str:
        """The command name in upper case, e.g. 'XADD' (what the projection dispatches on)."""
        return self.args[0].decode().upper()

    @property
    def cmd(self) -> str:
        """The command as written in the scenario file (space separated)."""
        return b" ".join(self.args).decode()


@dataclass(frozen=True)
class SyncStep:
    """A '— Sync —' row: the listed regions receive and apply every operation of each other.

    `regions` is None for a full sync (every region, as the seeds' README defines it); a tuple
    names a partial sync, needed where the seed leaves a region's column blank on a sync row.
    """

    t: str
    regions: tuple[int, ...] | None


Step = CommandStep | SyncStep


@dataclass(frozen=True)
class Scenario:
    """One seed table (or one rule of the seed's prose), with where it comes from and why."""

    slug: str
    name: str
    source: str
    regions: int
    id_mode: str
    notes: str
    steps: tuple[Step, ...]

    @property
    def region_ids(self) -> tuple[int, ...]:
        """Region ids are 1..regions, matching the seed's column numbers."""
        return tuple(range(1, self.regions + 1))

    def sync_regions(self, step: SyncStep) -> tuple[int, ...]:
        """The regions a sync step covers, with None (all) made explicit."""
        return self.region_ids if step.regions is None else step.regions

    @property
    def expectations(self) -> int:
        """How many steps check something: a scenario that checks nothing proves nothing."""
        return sum(
            1
            for s in self.steps
            if isinstance(s, CommandStep) and (s.expect is not None or s.expect_error is not None)
        )


class _Invalid(ValueError):
    """Raised inside the parser; `loads` re-raises it as a ValueError naming the file."""


def load_all() -> list[Scenario]:
    """Every `*.toml` scenario shipped beside this module, sorted by file name.

    Read through `importlib.resources` so the packaged data is found wherever the package is
    installed, not only in a source checkout.
    """
    found = [
        entry
        for entry in resources.files(__name__).iterdir()
        if entry.is_file() and entry.name.endswith(".toml")
    ]
    found.sort(key=lambda entry: entry.name)
    return [loads(entry.read_text(encoding="utf-8"), entry.name) for entry in found]


def load(path: str | os.PathLike[str]) -> Scenario:
    """One scenario file; the slug is the file name without '.toml'."""
    file = Path(path)
    return loads(file.read_text(encoding="utf-8"), file.name)


def loads(text: str, filename: str) -> Scenario:
    """Parse and validate a scenario from TOML text; `filename` names it in errors and the slug.

    Raises ValueError('<filename>: ...') for TOML syntax errors and for every rule the file
    breaks, naming the step by its 1-based position among the [[step]] tables.
    """
    slug = filename.removesuffix(".toml")
    try:
        data = tomllib.loads(text)
        return _scenario(data, slug)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{filename}: not valid TOML: {exc}") from exc
    except _Invalid as exc:
        raise ValueError(f"{filename}: {exc}") from None


def _scenario(data: Mapping[str, object], slug: str) -> Scenario:
    _no_unknown(data, frozenset({"scenario", "step"}), "top level")
    head = data.get("scenario")
    if not isinstance(head, dict):
        raise _Invalid("missing [scenario] table")
    _no_unknown(head, _SCENARIO_KEYS, "[scenario]")
    name = _text(head, "name", "[scenario]")
    source = _text(head, "source", "[scenario]")
    notes = _text(head, "notes", "[scenario]").strip()
    regions = _integer(head, "regions", "[scenario]")
    if regions < 1:
        raise _Invalid(f"[scenario]: regions must be at least 1, got {regions}")
    id_mode = _text(head, "id_mode", "[scenario]")
    if id_mode not in ID_MODES:
        raise _Invalid(f"[scenario]: id_mode {id_mode!r} is not one of {', '.join(ID_MODES)}")

    raw_steps = data.get("step")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise _Invalid("no [[step]] tables")
    steps: list[Step] = []
    for index, raw in enumerate(raw_steps, start=1):
        where = f"step {index}"
        if not isinstance(raw, dict):
            raise _Invalid(f"{where}: not a table")
        steps.append(_step(raw, regions, where))
    _check_rows(steps)
    return Scenario(
        slug=slug,
        name=name,
        source=source,
        regions=regions,
        id_mode=id_mode,
        notes=notes,
        steps=tuple(steps),
    )


def _step(raw: Mapping[str, object], regions: int, where: str) -> Step:
    t = _text(raw, "t", where)
    where = f"{where} (t={t!r})"
    has_cmd, has_sync = "cmd" in raw, "sync" in raw
    if has_cmd == has_sync:
        raise _Invalid(f"{where}: needs exactly one of 'cmd' and 'sync'")
    if has_sync:
        _no_unknown(raw, _SYNC_KEYS, where)
        return SyncStep(t=t, regions=_sync_regions(raw["sync"], regions, where))

    _no_unknown(raw, _COMMAND_KEYS, where)
    region = _integer(raw, "region", where)
    if not 1 <= region <= regions:
        raise _Invalid(f"{where}: region {region} is outside 1..{regions}")
    cmd = _text(raw, "cmd", where)
    args = tuple(word.encode() for word in cmd.split())
    if not args:
        raise _Invalid(f"{where}: cmd is empty")
    clock_ms = _integer(raw, "clock_ms", where) if "clock_ms" in raw else None
    if clock_ms is not None and clock_ms < 0:
        raise _Invalid(f"{where}: clock_ms must not be negative")
    expect = _expect(raw["expect"], where) if "expect" in raw else None
    expect_error = _text(raw, "expect_error", where) if "expect_error" in raw else None
    if expect is not None and expect_error is not None:
        raise _Invalid(f"{where}: a step cannot expect both a result and an error")
    seed_cmd = _text(raw, "seed_cmd", where) if "seed_cmd" in raw else None
    return CommandStep(
        t=t,
        region=region,
        args=args,
        clock_ms=clock_ms,
        expect=expect,
        expect_error=expect_error,
        seed_cmd=seed_cmd,
        field=_text(raw, "field", where) if "field" in raw else None,
    )


def _sync_regions(value: object, regions: int, where: str) -> tuple[int, ...] | None:
    if value == "all":
        return None
    if not isinstance(value, list) or not value:
        raise _Invalid(f'{where}: sync must be "all" or a non-empty list of region ids')
    ids: list[int] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise _Invalid(f"{where}: sync lists region ids, got {item!r}")
        if not 1 <= item <= regions:
            raise _Invalid(f"{where}: sync region {item} is outside 1..{regions}")
        if item in ids:
            raise _Invalid(f"{where}: sync names region {item} twice")
        ids.append(item)
    return tuple(ids)


def _expect(value: object, where: str) -> tuple[str, ...] | int:
    if isinstance(value, bool):
        raise _Invalid(f"{where}: expect must be a list of strings or an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(str(item) for item in value)
    raise _Invalid(f"{where}: expect must be a list of strings or an integer, got {value!r}")


def _check_rows(steps: list[Step]) -> None:
    """A table row is one run of steps sharing `t`: cells in region order, a sync row alone.

    Concurrency is expressed only by the absence of a sync between steps, so the order within a
    row is fixed by convention (region order) to keep files comparable with the seed's columns.
    """
    seen: set[str] = set()
    for index, step in enumerate(steps, start=1):
        prev = steps[index - 2] if index > 1 else None
        where = f"step {index} (t={step.t!r})"
        if prev is not None and prev.t == step.t:
            if isinstance(step, SyncStep) or isinstance(prev, SyncStep):
                raise _Invalid(f"{where}: a sync row must be the only step with its time")
            if step.region <= prev.region:
                raise _Invalid(
                    f"{where}: cells of one row must be in increasing region order "
                    f"(region {step.region} after region {prev.region})"
                )
            continue
        if step.t in seen:
            raise _Invalid(f"{where}: time {step.t!r} already used by an earlier row")
        seen.add(step.t)


def _no_unknown(table: Mapping[str, object], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise _Invalid(f"{where}: unknown key(s) {', '.join(unknown)}")


def _text(table: Mapping[str, object], key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"{where}: '{key}' must be a non-empty string")
    return value


def _integer(table: Mapping[str, object], key: str, where: str) -> int:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"{where}: '{key}' must be an integer")
    return value
