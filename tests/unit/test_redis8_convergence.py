"""Convergence properties of the Redis 8 stream commands over three simulated regions: any
history of them, synced in any pattern, ends with the same replicated state everywhere (digest
and IDMP records), and concurrent IDMP duplicates leave exactly one entry per IID."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.crdt.state import State
from streams.ids import IdMode
from streams.scenarios.sim import SimulatedRegions

REGIONS = (1, 2, 3)
region = st.sampled_from(REGIONS)
pid = st.sampled_from(["p1", "p2"])
iid = st.sampled_from(["i1", "i2", "i3"])
policy = st.sampled_from(["KEEPREF", "DELREF", "ACKED"])
pick = st.integers(0, 8)
syncs = st.lists(region, min_size=1, max_size=3).map(lambda rs: tuple(sorted(set(rs))))

action = st.one_of(
    st.tuples(st.just("idmp"), region, pid, iid),
    st.tuples(st.just("auto"), region, pid, st.sampled_from(["a", "b"])),
    st.tuples(st.just("xadd"), region),
    st.tuples(st.just("create"), region),
    st.tuples(st.just("read"), region, st.sampled_from(["c1", "c2"])),
    st.tuples(st.just("claim"), region, st.sampled_from(["c1", "c2"]), st.integers(0, 2)),
    st.tuples(st.just("ack"), region, pick),
    st.tuples(st.just("nack"), region, pick, st.sampled_from(["SILENT", "FAIL", "FATAL"])),
    st.tuples(st.just("delex"), region, pick, policy),
    st.tuples(st.just("ackdel"), region, pick, policy),
    st.tuples(st.just("trim"), region, st.integers(0, 3), policy),
    st.tuples(st.just("cfg"), region, st.integers(1, 3)),
    st.tuples(st.just("tick"), st.integers(1, 3)),
    st.tuples(st.just("sync"), syncs),
    st.tuples(st.just("gc"), region),
)


class History:
    def __init__(self) -> None:
        self.s = SimulatedRegions(3, IdMode.STRICT)
        self.clock = 1_000_000

    def x(self, r: int, *words: str | int) -> object:
        return self.s.execute(r, tuple(str(w).encode() for w in words), self.clock)

    def ids(self, r: int) -> list[str]:
        ks = self.s.regions[r].state.get(b"a")
        return (
            []
            if ks is None
            else [
                f"{sid[0]}-{sid[1]}"
                for sid, _o, _f in ks.entries.range((0, 0), (2**64 - 1, 2**64 - 1))
            ]
        )

    def nth(self, r: int, n: int) -> str:
        found = self.ids(r)
        return found[n % len(found)] if found else "1-1"

    def step(self, act: tuple[object, ...]) -> None:
        kind = act[0]
        if kind == "tick":
            self.clock += int(act[1])  # type: ignore[call-overload]
            return
        if kind == "sync":
            self.s.sync(act[1])  # type: ignore[arg-type]
            return
        r = int(act[1])  # type: ignore[call-overload]
        if kind == "gc":  # tombstones and stable IDMP records out of the window
            self.s.regions[r].collect_tombstones(list(REGIONS))
        elif kind == "idmp":
            self.x(r, "XADD", "a", "IDMP", act[2], act[3], "*", "f", "v")  # type: ignore[arg-type]
        elif kind == "auto":
            self.x(r, "XADD", "a", "IDMPAUTO", act[2], "*", "f", act[3])  # type: ignore[arg-type]
        elif kind == "xadd":
            self.x(r, "XADD", "a", "*", "f", "v")
        elif kind == "create":
            self.x(r, "XGROUP", "CREATE", "a", "g", "0", "MKSTREAM")
        elif kind == "read":
            self.x(r, "XREADGROUP", "GROUP", "g", act[2], "COUNT", 2, "STREAMS", "a", ">")  # type: ignore[arg-type]
        elif kind == "claim":
            self.x(r, "XREADGROUP", "GROUP", "g", act[2], "CLAIM", act[3], "STREAMS", "a", ">")  # type: ignore[arg-type]
        elif kind == "ack":
            self.x(r, "XACK", "a", "g", self.nth(r, act[2]))  # type: ignore[arg-type]
        elif kind == "nack":
            self.x(r, "XNACK", "a", "g", act[3], "IDS", 1, self.nth(r, act[2]), "FORCE")  # type: ignore[arg-type]
        elif kind == "delex":
            self.x(r, "XDELEX", "a", act[3], "IDS", 1, self.nth(r, act[2]))  # type: ignore[arg-type]
        elif kind == "ackdel":
            self.x(r, "XACKDEL", "a", "g", act[3], "IDS", 1, self.nth(r, act[2]))  # type: ignore[arg-type]
        elif kind == "trim":
            self.x(r, "XTRIM", "a", "MAXLEN", "=", act[2], act[3])  # type: ignore[arg-type]
        elif kind == "cfg":
            self.x(r, "XCFGSET", "a", "IDMP-MAXSIZE", act[2])  # type: ignore[arg-type]

    def settle(self) -> None:
        self.s.sync()
        self.s.sync()  # the echoes of the last XACK effects


def idmp_records(
    state: State, now_ms: int
) -> dict[tuple[bytes, bytes], tuple[int, tuple[int, int]]]:
    """What a retry would find, per (pid, iid): the records in the window (what a collection
    drops is out of it, and may go earlier in one region than in another)."""
    ks = state.raw(b"a")
    if ks is None or ks.idmp is None:
        return {}
    idmp = ks.idmp
    return {
        (p, i): (rec.origin, rec.id)
        for p, i, rec in idmp.records()
        if idmp.alive(idmp.producers[p], rec, now_ms)
    }


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(action, min_size=5, max_size=60))
def test_any_history_of_the_redis8_commands_converges(history: list[tuple[object, ...]]) -> None:
    h = History()
    for act in history:
        h.step(act)
    h.settle()
    assert len(set(h.s.digests().values())) == 1
    for r in REGIONS:  # a collection changes nothing a retry finds
        h.s.regions[r].collect_tombstones(list(REGIONS))
    records = [idmp_records(h.s.regions[r].state, h.clock) for r in REGIONS]
    assert records[0] == records[1] == records[2]
    assert all(r.causal.waiting == 0 for r in h.s.regions.values())


idmp_only = st.one_of(
    st.tuples(st.just("idmp"), region, pid, iid),
    st.tuples(st.just("gc"), region),
    st.tuples(st.just("tick"), st.integers(1, 3)),
    st.tuples(st.just("sync"), syncs),
)


@settings(max_examples=150, deadline=None)
@given(history=st.lists(idmp_only, min_size=3, max_size=40))
def test_concurrent_idmp_duplicates_leave_one_entry_per_iid(
    history: list[tuple[object, ...]],
) -> None:
    """Whatever the regions accepted concurrently, each (pid, iid) names exactly one entry in
    every region once synced, and it is the one its record names."""
    h = History()
    for act in history:
        h.step(act)
    h.settle()
    used = {(str(a[2]), str(a[3])) for a in history if a[0] == "idmp"}
    for r in REGIONS:
        ks = h.s.regions[r].state.get(b"a")
        assert (0 if ks is None else ks.entries.length) == len(used)
        named = {
            f"{sid[0]}-{sid[1]}" for _o, sid in idmp_records(h.s.regions[r].state, h.clock).values()
        }
        assert named == set(h.ids(r))
    assert len(set(h.s.digests().values())) == 1
