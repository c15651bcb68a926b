"""DEL / XGROUP DESTROY tombstones are collected once causally stable, and never earlier.

Three simulated regions (pure `Region`s, explicit sync): a region learns from every op it applies
how far that op's origin had applied every region (`Region.progress`), and drops a tombstone
when every region of the topology is known to have applied it (`Region.collect_tombstones`).
A region partitioned for a while keeps everyone's tombstones alive until it has caught up and
said so with an op of its own; a create concurrent with a destroy loses everywhere, collected or
not; and collecting at any moment never changes a reply or the converged state.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.scenarios.sim import SimulatedRegions

ALL = [1, 2, 3]


def _cmd(sim: SimulatedRegions, region: int, *words: str) -> object:
    return sim.execute(region, tuple(w.encode() for w in words), None)


def _groups(sim: SimulatedRegions, region: int, key: str) -> list[bytes]:
    ks = sim.regions[region].state.get(key.encode())
    return [] if ks is None else sorted(ks.groups)


def _collect(sim: SimulatedRegions) -> dict[int, int]:
    return {r: sim.regions[r].collect_tombstones(ALL) for r in ALL}


def _tombstones(sim: SimulatedRegions) -> dict[int, int]:
    return {r: sim.regions[r].state.tombstone_count() for r in ALL}


def test_a_partitioned_region_keeps_tombstones_until_it_catches_up() -> None:
    sim = SimulatedRegions(3)
    _cmd(sim, 1, "XADD", "k", "*", "f", "v")
    _cmd(sim, 1, "XGROUP", "CREATE", "k", "g", "0")
    sim.sync()
    # Region 3 is cut off. Region 1 destroys g; region 3 destroys and re-creates it, so its
    # create is concurrent with region 1's destroy.
    _cmd(sim, 1, "XGROUP", "DESTROY", "k", "g")
    _cmd(sim, 3, "XGROUP", "DESTROY", "k", "g")
    _cmd(sim, 3, "XGROUP", "CREATE", "k", "g", "0")
    _cmd(sim, 3, "DEL", "other")  # nothing to delete: no op, no tombstone
    _cmd(sim, 3, "XADD", "gone", "*", "f", "v")
    _cmd(sim, 3, "DEL", "gone")  # a tombstone of the partitioned region itself
    sim.sync((1, 2))
    _cmd(sim, 2, "XADD", "k", "*", "f", "w")  # tells region 1 that region 2 applied the destroy
    sim.sync((1, 2))
    assert sim.regions[1].stable_vector(ALL) == {1: 0, 2: 0, 3: 0}  # nothing heard from 3
    assert _collect(sim) == {1: 0, 2: 0, 3: 0}
    assert _tombstones(sim) == {1: 1, 2: 1, 3: 2}
    assert _groups(sim, 1, "k") == [] and _groups(sim, 3, "k") == [b"g"]

    sim.sync()  # the partition heals: region 3's create meets region 1's destroy
    assert [_groups(sim, r, "k") for r in ALL] == [[], [], []]
    # Regions 1 and 2 have not heard that region 3 applied region 1's destroy: all stays.
    assert _collect(sim)[1] == 0 and _collect(sim)[2] == 0
    for r in ALL:  # every region says how far it got
        _cmd(sim, r, "XADD", "k", "*", "f", f"r{r}")
        sim.sync()
    assert sum(_collect(sim).values()) > 0
    assert _tombstones(sim) == {1: 0, 2: 0, 3: 0}
    assert [_groups(sim, r, "k") for r in ALL] == [[], [], []]
    assert len(set(sim.digests().values())) == 1

    # The beaten create delivered again is a duplicate; a create made now wins everywhere.
    for r in (1, 2):
        for op in sim.logs[3]:
            assert sim.regions[r].receive(op) == []
    _cmd(sim, 2, "XGROUP", "CREATE", "k", "g", "0")
    sim.sync()
    assert [_groups(sim, r, "k") for r in ALL] == [[b"g"], [b"g"], [b"g"]]


def test_progress_is_learned_from_the_ops_context() -> None:
    sim = SimulatedRegions(3)
    _cmd(sim, 1, "XADD", "k", "*", "f", "v")
    _cmd(sim, 1, "XADD", "k", "*", "f", "v")
    sim.sync((1, 2))
    _cmd(sim, 2, "XADD", "k", "*", "f", "v")
    sim.sync((1, 2))
    known = sim.regions[1].progress()
    assert known[1] == {1: 2, 2: 1}
    assert known[2] == {1: 2, 2: 1}
    assert 3 not in known
    assert sim.regions[1].stable_vector([1, 2]) == {1: 2, 2: 1}
    assert sim.regions[1].stable_vector(ALL) == {1: 0, 2: 0, 3: 0}


step = st.one_of(
    st.tuples(
        st.sampled_from(ALL),
        st.sampled_from(["XADD", "DEL", "CREATE", "DESTROY"]),
        st.sampled_from(["a", "a", "a", "b"]),
        st.sampled_from(["g", "g", "g", "h"]),
    ),
    st.tuples(
        st.just(0), st.sampled_from([(1, 2), (2, 3), (1, 3), (1, 2, 3)]), st.just(""), st.just("")
    ),
    st.tuples(st.just(-1), st.sampled_from(ALL), st.just(""), st.just("")),
)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(step, max_size=60))
def test_collecting_at_any_time_changes_no_reply_and_no_outcome(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    plain, collected = SimulatedRegions(3), SimulatedRegions(3)
    for who, what, key, group in steps:
        if who == 0:
            plain.sync(what)
            collected.sync(what)
            continue
        if who == -1:
            collected.regions[what].collect_tombstones(ALL)
            continue
        words = {
            "XADD": ("XADD", key, "*", "f", "v"),
            "DEL": ("DEL", key),
            "CREATE": ("XGROUP", "CREATE", key, group, "0", "MKSTREAM"),
            "DESTROY": ("XGROUP", "DESTROY", key, group),
        }[what]
        assert _cmd(plain, who, *words) == _cmd(collected, who, *words)
    for sim in (plain, collected):
        sim.sync()
    for r in ALL:
        collected.regions[r].collect_tombstones(ALL)
    assert plain.digests() == collected.digests()
    assert len(set(plain.digests().values())) == 1
    for r in ALL:
        for key in ("a", "b"):
            assert _groups(plain, r, key) == _groups(collected, r, key)
