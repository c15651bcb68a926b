"""The scenario files load and validate, and the reply projection speaks the seeds' notation."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.scenarios import CommandStep, Scenario, SyncStep, load, load_all, loads
from streams.scenarios.projection import (
    ProjectionError,
    format_projection,
    matches,
    project,
)

SCENARIOS = load_all()


def _args(cmd: str) -> tuple[bytes, ...]:
    return tuple(word.encode() for word in cmd.split())


# --- the shipped files -------------------------------------------------------------------------


def test_every_seed_table_has_a_file() -> None:
    slugs = {s.slug for s in SCENARIOS}
    seed_000 = {f"000_{n:02d}" for n in range(1, 10)}
    seed_004 = {f"004_{n:02d}" for n in range(1, 13)}
    prefixes = {slug[:6] for slug in slugs if slug[4:6].isdigit()}
    assert prefixes == seed_000 | seed_004
    extras = {"000_ids_strict", "000_ids_semi_strict", "000_ids_liberal", "004_xread_console"}
    assert extras <= slugs


def test_load_all_is_sorted_by_file_name() -> None:
    slugs = [s.slug for s in SCENARIOS]
    assert slugs == sorted(slugs)
    assert len(slugs) == len(set(slugs)) == 25


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.slug)
def test_scenario_is_well_formed(scenario: Scenario) -> None:
    assert scenario.expectations >= 1
    assert scenario.source.startswith(f"seed {scenario.slug[:3]}, section '")
    assert "Adaptations" in scenario.notes or "Not a seed table" in scenario.notes
    for step in scenario.steps:
        if isinstance(step, CommandStep):
            assert 1 <= step.region <= scenario.regions
            if step.seed_cmd is not None:
                assert step.seed_cmd != step.cmd
                assert "seed_cmd" in scenario.notes
        else:
            assert set(scenario.sync_regions(step)) <= set(scenario.region_ids)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.slug)
def test_file_loads_the_same_by_path(scenario: Scenario) -> None:
    path = Path(__file__).parents[2] / "streams" / "scenarios" / f"{scenario.slug}.toml"
    assert load(path) == scenario


def test_transcription_details() -> None:
    by_slug = {s.slug: s for s in SCENARIOS}

    first = by_slug["000_01_concurrent_xadd"]
    assert first.id_mode == "strict" and first.regions == 2
    t1 = [s for s in first.steps if s.t == "t1"]
    assert [(s.region, s.clock_ms) for s in t1 if isinstance(s, CommandStep)] == [
        (1, 1589929244828),
        (2, 1589929246795),
    ]
    last = first.steps[-1]
    assert isinstance(last, CommandStep)
    assert last.expect == ("1589929244828-1", "1589929246795-2")

    destroy = by_slug["000_07_del_wins_destroy"]
    syncs = [s for s in destroy.steps if isinstance(s, SyncStep)]
    assert [s.regions for s in syncs] == [(1, 2), None]
    assert destroy.sync_regions(syncs[1]) == (1, 2, 3)

    xack = by_slug["004_12_consecutive_xack"]
    t10 = next(s for s in xack.steps if s.t == "t10")
    assert isinstance(t10, CommandStep)
    assert t10.args == _args("XACK x g1 120-0") and t10.seed_cmd == "XACK g1 130-0"

    exists = next(s for s in by_slug["000_06_del_wins_del"].steps if s.t == "t6")
    assert isinstance(exists, CommandStep) and exists.expect == 0

    strict_error = [
        s
        for s in by_slug["000_ids_strict"].steps
        if isinstance(s, CommandStep) and s.expect_error is not None
    ]
    assert [s.cmd for s in strict_error] == ["XADD x 300-5 f v"]

    assert by_slug["004_xread_console"].regions == 1
    assert by_slug["004_06_xread_skip"].id_mode == "liberal"
    assert by_slug["000_03_duplicate_ids"].id_mode == "liberal"


# --- the loader rejects bad files --------------------------------------------------------------

GOOD = """
[scenario]
name = "n"
source = "seed 000, section 's', table 1"
regions = 2
id_mode = "strict"
notes = "Adaptations: none."

[[step]]
t = "t1"
region = 1
cmd = "XADD x * f v"
expect = ["1-1"]

[[step]]
t = "t2"
sync = "all"
"""


def test_good_text_loads() -> None:
    scenario = loads(GOOD, "999_01_good.toml")
    assert scenario.slug == "999_01_good"
    assert scenario.steps == (
        CommandStep("t1", 1, _args("XADD x * f v"), None, ("1-1",), None, None),
        SyncStep("t2", None),
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("region = 1", "region = 3", "step 1 (t='t1'): region 3 is outside 1..2"),
        ('sync = "all"', "sync = [1, 4]", "step 2 (t='t2'): sync region 4 is outside 1..2"),
        ('sync = "all"', "sync = []", "step 2 (t='t2'): sync must be"),
        ('id_mode = "strict"', 'id_mode = "lax"', "id_mode 'lax' is not one of"),
        ('sync = "all"', 'sync = "all"\ncmd = "DEL x"', "exactly one of 'cmd' and 'sync'"),
        ('t = "t2"\nsync = "all"', 't = "t2"', "exactly one of 'cmd' and 'sync'"),
        ('expect = ["1-1"]', 'expect = "1-1"', "expect must be a list of strings or an integer"),
        ('expect = ["1-1"]', 'expect = ["1-1"]\nexpected = 0', "unknown key(s) expected"),
        ('t = "t2"', 't = "t1"', "a sync row must be the only step with its time"),
        ("regions = 2", "regions = 0", "regions must be at least 1"),
        ("[[step]]", "[[stepp]]", "unknown key(s) stepp"),
    ],
)
def test_loader_rejects_bad_file(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in GOOD
    bad = tmp_path / "999_99_bad.toml"
    bad.write_text(GOOD.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load(bad)
    assert str(info.value).startswith("999_99_bad.toml: ")
    assert message in str(info.value)


def test_loader_rejects_invalid_toml(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text("[scenario\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^broken\.toml: not valid TOML"):
        load(bad)


def test_loader_rejects_rows_out_of_order() -> None:
    text = GOOD.replace(
        '[[step]]\nt = "t2"',
        '[[step]]\nt = "t1"\nregion = 1\ncmd = "XLEN x"\n\n[[step]]\nt = "t2"',
    )
    with pytest.raises(ValueError, match=r"increasing region order"):
        loads(text, "x.toml")
    text = GOOD + '\n[[step]]\nt = "t1"\nregion = 2\ncmd = "XLEN x"\n'
    with pytest.raises(ValueError, match=r"step 3 \(t='t1'\): time 't1' already used"):
        loads(text, "x.toml")


# --- projection ---------------------------------------------------------------------------------

FIELDS = [b"f", b"v"]


@pytest.mark.parametrize(
    ("cmd", "reply", "expected"),
    [
        ("XADD x * f v", b"100-1", ["100-1"]),
        ("xadd x NOMKSTREAM * f v", None, []),
        ("XRANGE x - +", [[b"100-1", FIELDS], [b"100-1", FIELDS]], ["100-1", "100-1"]),
        ("XRANGE x - +", [], []),
        ("XREVRANGE x + -", [[b"2-0", FIELDS], [b"1-0", FIELDS]], ["2-0", "1-0"]),
        (
            "XREAD COUNT 2 STREAMS x y 0 0",
            [[b"x", [[b"110-1", FIELDS], [b"120-1", FIELDS]]], [b"y", [[b"5-0", FIELDS]]]],
            ["110-1", "120-1", "5-0"],
        ),
        ("XREAD STREAMS x 0", None, []),
        ("XREAD STREAMS x 0", {b"x": [[b"1-0", FIELDS]]}, ["1-0"]),
        (
            "XREADGROUP GROUP g Alice STREAMS x 0",
            [[b"x", [[b"110-0", None], [b"120-0", FIELDS]]]],
            ["110-0", "120-0"],
        ),
        ("XREADGROUP GROUP g Alice STREAMS x >", None, []),
        (
            "XINFO GROUPS x",
            [
                [b"name", b"group1", b"consumers", 1, b"pending", 1, b"last-delivered-id", b"1-1"],
                [b"name", b"group2", b"consumers", 0, b"pending", 0, b"last-delivered-id", b"0-0"],
            ],
            ["group1", "group2"],
        ),
        ("XINFO GROUPS x", [], []),
        ("XINFO GROUPS x", Exception("ERR no such key"), []),
        ("XINFO GROUPS x", [{"name": "g1", "consumers": 0}], ["g1"]),
        (
            "XINFO CONSUMERS x group1",
            [[b"name", b"Alice", b"pending", 1, b"idle", 9, b"inactive", 9]],
            ["Alice"],
        ),
        ("XINFO CONSUMERS x group1", [], []),
        ("XPENDING x g - + 1", [[b"110-1", b"Alice", 7, 1]], ["110-1"]),
        ("XPENDING x g IDLE 5 - + 10 Alice", [[b"1-0", b"Alice", 7, 2]], ["1-0"]),
        ("XPENDING x g - + 1", [], []),
        ("XPENDING x g", [1, b"1-0", b"1-0", [[b"Alice", b"1"]]], None),
        ("EXISTS x", 0, 0),
        ("XLEN x", 3, 3),
        ("XACK x g 1-0", 1, 1),
        ("XDEL x 1-0", 0, 0),
        ("DEL x", 1, 1),
        ("XGROUP CREATE x g 0", b"OK", None),
        ("XGROUP CREATE x g 0", Exception("BUSYGROUP Consumer Group name already exists"), None),
        ("XINFO STREAM x", [b"length", 1], None),
    ],
)
def test_project(cmd: str, reply: object, expected: list[str] | int | None) -> None:
    assert project(_args(cmd), reply) == expected


@pytest.mark.parametrize(
    ("cmd", "reply"),
    [
        ("XRANGE x - +", Exception("WRONGTYPE Operation against a key")),
        ("XINFO CONSUMERS x g", Exception("NOGROUP No such consumer group 'g' for key name 'x'")),
        ("XINFO GROUPS x", Exception("WRONGTYPE Operation against a key")),
        ("EXISTS x", b"0"),
        ("EXISTS x", True),
        ("XRANGE x - +", b"oops"),
        ("XINFO GROUPS x", [[b"consumers", 0]]),
    ],
)
def test_project_refuses_what_it_cannot_read(cmd: str, reply: object) -> None:
    with pytest.raises(ProjectionError):
        project(_args(cmd), reply)


def test_matches() -> None:
    assert matches(("110-1", "120-1"), ["110-1", "120-1"])
    assert not matches(("120-1", "110-1"), ["110-1", "120-1"])
    assert not matches(("100-1",), ["100-1", "100-1"])
    assert matches((), [])
    assert matches(0, 0)
    assert not matches(0, [])
    assert not matches((), 0)
    assert not matches(0, None)
    assert not matches(("1-0",), None)
    assert matches(None, None) and matches(None, ["anything"])


def test_format_projection() -> None:
    assert format_projection(["110-1", "115-2"]) == "[110-1, 115-2]"
    assert format_projection(("group1",)) == "[group1]"
    assert format_projection([]) == "[]"
    assert format_projection(0) == "0"
    assert format_projection(None) == "(not projected)"


def _raw_reply(step: CommandStep) -> object:
    """A raw reply that the seed's expectation abbreviates, built the way Redis would send it."""
    expect = step.expect
    if isinstance(expect, int) or expect is None:
        return expect
    items = [e.encode() for e in expect]
    name = step.command
    if name == "XADD":
        return items[0]
    if name in ("XRANGE", "XREVRANGE"):
        return [[i, FIELDS] for i in items]
    if name in ("XREAD", "XREADGROUP"):
        return [[step.args[-2], [[i, FIELDS] for i in items]]] if items else None
    if name == "XINFO":
        return [[b"name", i, b"pending", 0] for i in items]
    if name == "XPENDING":
        return [[i, b"Alice", 10, 1] for i in items]
    raise AssertionError(f"no reply shape for {step.cmd}")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.slug)
def test_every_expectation_round_trips(scenario: Scenario) -> None:
    """Each expected result is what the projection makes of a reply Redis would send for it."""
    for step in scenario.steps:
        if isinstance(step, CommandStep) and step.expect is not None:
            projected = project(step.args, _raw_reply(step))
            assert projected is not None, step
            assert matches(step.expect, projected), step
