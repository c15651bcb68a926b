"""The Redis 8 stream commands across three simulated regions (`streams.scenarios.sim`): each
rule of docs/architecture.md, "Redis 8 across regions", shown on the pure core, with the sync
the node does (held-back XACK effects logged first)."""

from __future__ import annotations

from streams.crdt import ops
from streams.ids import IdMode
from streams.scenarios.sim import SimulatedRegions


def sim() -> SimulatedRegions:
    return SimulatedRegions(3, IdMode.SEMI_STRICT)


def x(s: SimulatedRegions, region: int, *words: str | int, at: int | None = None) -> object:
    return s.execute(region, tuple(str(w).encode() for w in words), at)


def ids(s: SimulatedRegions, region: int, key: str = "s") -> list[bytes]:
    reply = x(s, region, "XRANGE", key, "-", "+")
    assert isinstance(reply, list)
    return [entry[0] for entry in reply]


def converged(s: SimulatedRegions) -> None:
    s.sync()
    assert len(set(s.digests().values())) == 1


def group_read_everywhere(s: SimulatedRegions) -> None:
    """Two entries from r1, a group created in r1; synced; r2's consumer reads both."""
    x(s, 1, "XADD", "s", "1-1", "f", "v")
    x(s, 1, "XADD", "s", "2-1", "f", "v")
    x(s, 1, "XGROUP", "CREATE", "s", "g", "0")
    s.sync()
    x(s, 2, "XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">")


# --- ACKED ------------------------------------------------------------------------------------


def test_an_entry_pending_in_r2_survives_xtrim_acked_and_xackdel_acked_in_r1() -> None:
    s = sim()
    group_read_everywhere(s)
    x(s, 1, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    assert x(s, 1, "XACKDEL", "s", "g", "ACKED", "IDS", 2, "1-1", "2-1") == [2, 2]
    assert x(s, 1, "XTRIM", "s", "MAXLEN", "=", 0, "ACKED") == 0
    assert x(s, 1, "XDELEX", "s", "ACKED", "IDS", 1, "1-1") == [2]
    converged(s)
    for region in (1, 2, 3):
        assert ids(s, region) == [b"1-1", b"2-1"]
    assert x(s, 2, "XPENDING", "s", "g")[0] == 2  # type: ignore[index]


def test_acked_deletes_once_every_region_announced_its_frontier_past_the_entry() -> None:
    s = sim()
    group_read_everywhere(s)
    x(s, 2, "XACK", "s", "g", "1-1")
    s.sync()  # r2's consecutive-XACK effect reaches r1 and r3, whose cursors move
    s.sync()  # r3's own frontier (its echo, logged at its next flush) reaches r1
    assert x(s, 1, "XDELEX", "s", "ACKED", "IDS", 2, "1-1", "2-1") == [1, 2]
    converged(s)
    for region in (1, 2, 3):
        assert ids(s, region) == [b"2-1"]


def test_acked_waits_for_a_region_that_has_not_announced_yet() -> None:
    """r3 never heard of the ack: until it announces (it echoes on the next sync), r1 may not
    know that r3 holds nothing pending, so nothing is deleted."""
    s = sim()
    group_read_everywhere(s)
    x(s, 2, "XACK", "s", "g", "1-1", "2-1")
    s.sync((1, 2))
    assert x(s, 1, "XDELEX", "s", "ACKED", "IDS", 1, "1-1") == [2]
    s.sync()
    s.sync()
    assert x(s, 1, "XDELEX", "s", "ACKED", "IDS", 1, "1-1") == [1]
    converged(s)


# --- KEEPREF / DELREF --------------------------------------------------------------------------


def test_delref_in_r1_removes_the_references_of_every_region() -> None:
    s = sim()
    group_read_everywhere(s)
    x(s, 1, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    assert x(s, 1, "XDELEX", "s", "DELREF", "IDS", 1, "1-1") == [1]
    assert x(s, 1, "XPENDING", "s", "g")[0] == 1  # type: ignore[index]
    converged(s)
    assert x(s, 2, "XPENDING", "s", "g", "-", "+", 10) == [[b"2-1", b"c2", 0, 1]]


def test_keepref_in_r1_leaves_the_references_of_r2_to_its_claims() -> None:
    s = sim()
    group_read_everywhere(s)
    assert x(s, 1, "XDELEX", "s", "KEEPREF", "IDS", 1, "1-1") == [1]
    converged(s)
    assert x(s, 2, "XPENDING", "s", "g")[0] == 2  # type: ignore[index]
    assert x(s, 2, "XAUTOCLAIM", "s", "g", "c3", 0, "0-0") == [
        b"0-0",
        [[b"2-1", [b"f", b"v"]]],
        [b"1-1"],
    ]


def test_a_trim_with_delref_replicates_the_references_it_drops() -> None:
    s = sim()
    group_read_everywhere(s)
    assert x(s, 3, "XTRIM", "s", "MAXLEN", "=", 1, "DELREF") == 1
    converged(s)
    assert x(s, 2, "XPENDING", "s", "g", "-", "+", 10) == [[b"2-1", b"c2", 0, 1]]


# --- IDMP -----------------------------------------------------------------------------------------


def test_an_idmp_retry_in_r2_after_sync_returns_r1s_id_and_adds_nothing() -> None:
    s = sim()
    first = x(s, 1, "XADD", "s", "IDMP", "p", "order-7", "*", "amount", 10)
    s.sync()
    assert x(s, 2, "XADD", "s", "IDMP", "p", "order-7", "*", "amount", 10) == first
    converged(s)
    for region in (1, 2, 3):
        assert ids(s, region) == [first]


def test_concurrent_idmp_duplicates_converge_to_the_lowest_entry_everywhere() -> None:
    s = sim()
    one = x(s, 1, "XADD", "s", "IDMP", "p", "order-7", "*", "from", "r1", at=2_000)
    two = x(s, 2, "XADD", "s", "IDMP", "p", "order-7", "*", "from", "r2", at=1_000)
    assert one != two
    converged(s)
    for region in (1, 2, 3):
        assert ids(s, region) == [two]  # 1000-2 is below 2000-1
        assert x(s, region, "XADD", "s", "IDMP", "p", "order-7", "*", "n", 1, at=3_000) == two
    converged(s)


def test_the_idmp_window_replicates_with_the_stream() -> None:
    s = sim()
    x(s, 1, "XADD", "s", "IDMP", "p", "a", "*", "f", "v")
    x(s, 1, "XCFGSET", "s", "IDMP-DURATION", 5, "IDMP-MAXSIZE", 7)
    s.sync()
    info = x(s, 3, "XINFO", "STREAM", "s")
    assert isinstance(info, list)
    fields = dict(zip(info[::2], info[1::2], strict=True))
    assert (fields[b"idmp-duration"], fields[b"idmp-maxsize"]) == (5, 7)


def test_concurrent_xcfgset_settle_on_the_later_setting_in_every_region() -> None:
    s = sim()
    x(s, 1, "XADD", "s", "*", "f", "v")
    s.sync()
    x(s, 1, "XCFGSET", "s", "IDMP-DURATION", 11, at=5_000)
    x(s, 2, "XCFGSET", "s", "IDMP-DURATION", 22, at=6_000)
    s.sync()
    for region in (1, 2, 3):
        state = s.regions[region].state.get(b"s")
        assert state is not None and state.idmp is not None
        assert state.idmp.window() == (22, 100)


def test_a_retry_after_the_window_in_another_region_adds_one_entry_everywhere() -> None:
    s = sim()
    first = x(s, 1, "XADD", "s", "IDMP", "p", "i", "*", "f", "v", at=10_000)
    s.sync()
    again = x(s, 2, "XADD", "s", "IDMP", "p", "i", "*", "f", "v", at=10_000 + 101_000)
    assert again != first
    converged(s)
    for region in (1, 2, 3):
        assert ids(s, region) == [first, again]


# --- XNACK and CLAIM: local -----------------------------------------------------------------------


def test_xnack_and_xreadgroup_claim_change_only_the_local_pel() -> None:
    s = sim()
    group_read_everywhere(s)
    x(s, 1, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    vector = dict(s.regions[1].vector)
    assert x(s, 2, "XNACK", "s", "g", "FAIL", "IDS", 1, "1-1") == 1
    claimed = x(s, 2, "XREADGROUP", "GROUP", "g", "c9", "CLAIM", 0, "STREAMS", "s", ">")
    nacked_first = [[b"1-1", [b"f", b"v"], 1_000_000, 1], [b"2-1", [b"f", b"v"], 0, 1]]
    assert claimed == [[b"s", nacked_first]]
    s.sync()
    assert s.regions[1].vector.get(2, 0) == vector.get(2, 0)  # nothing of it replicated
    assert x(s, 1, "XPENDING", "s", "g", "-", "+", 10) == [
        [b"1-1", b"c1", 0, 1],
        [b"2-1", b"c1", 0, 1],
    ]


def test_no_op_of_the_new_commands_is_left_waiting_after_a_sync() -> None:
    s = sim()
    group_read_everywhere(s)
    x(s, 1, "XADD", "s", "IDMP", "p", "i", "*", "f", "v")
    x(s, 2, "XDELEX", "s", "DELREF", "IDS", 1, "1-1")
    x(s, 3, "XCFGSET", "s", "IDMP-MAXSIZE", 3)
    converged(s)
    assert all(r.causal.waiting == 0 for r in s.regions.values())
    assert any(isinstance(op.body, ops.DropRefs) for op in s.logs[2])
