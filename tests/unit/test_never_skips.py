"""Property: XREADGROUP `>` in a region never skips an entry that stays in the stream, whatever
the other regions write and in whatever order their ops arrive
(docs/architecture.md, "Replicated state")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.commands.execute import run
from streams.crdt import ops
from streams.crdt.region import Region
from streams.ids import IdMode

REGIONS = (1, 2, 3)

action = st.one_of(
    st.tuples(st.just("xadd"), st.sampled_from(REGIONS), st.integers(1, 60)),
    st.tuples(st.just("deliver"), st.sampled_from(REGIONS), st.integers(0, 10_000)),
    st.tuples(st.just("read"), st.just(1), st.integers(1, 4)),
    st.tuples(st.just("xdel"), st.sampled_from(REGIONS), st.integers(0, 10_000)),
)


def _ids(reply: object) -> list[bytes]:
    if hasattr(reply, "pairs"):
        return [entry[0] for _key, entries in reply.pairs for entry in entries]  # type: ignore[attr-defined]
    return []


@settings(max_examples=150, deadline=None)
@given(st.lists(action, max_size=60))
def test_gt_delivers_every_entry_that_stays_in_the_stream(
    actions: list[tuple[str, int, int]],
) -> None:
    regions = {i: Region(i, IdMode.STRICT) for i in REGIONS}
    logs: dict[int, list[ops.Op]] = {i: [] for i in REGIONS}

    def do(i: int, *words: str, now: int = 1) -> object:
        done = run(regions[i], [w.encode() for w in words], now)
        logs[i].extend(done.replicated)
        return done.reply

    def deliver_all() -> None:
        for origin in REGIONS:
            for target in REGIONS:
                if target != origin:
                    for op in logs[origin]:
                        regions[target].receive(op)

    do(1, "XGROUP", "CREATE", "k", "g", "0", "MKSTREAM")
    deliver_all()
    delivered: set[bytes] = set()
    for kind, region, n in actions:
        if kind == "xadd":
            do(region, "XADD", "k", "*", "n", str(n), now=n)
        elif kind == "deliver":
            origin = REGIONS[n % 3]
            target = REGIONS[(n // 3) % 3]
            if logs[origin] and origin != target:
                regions[target].receive(logs[origin][(n // 9) % len(logs[origin])])
        elif kind == "read":
            reply = do(1, "XREADGROUP", "GROUP", "g", "c", "COUNT", str(n), "STREAMS", "k", ">")
            delivered.update(_ids(reply))
        else:
            ks = regions[region].state.get(b"k")
            if ks is not None and ks.entries.length:
                entries = list(ks.entries.range((0, 0), (2**64 - 1, 2**64 - 1)))
                sid = entries[n % len(entries)][0]
                do(region, "XDEL", "k", f"{sid[0]}-{sid[1]}")
    deliver_all()
    while True:
        got = _ids(do(1, "XREADGROUP", "GROUP", "g", "c", "COUNT", "7", "STREAMS", "k", ">"))
        if not got:
            break
        assert not delivered & set(got), "an entry was delivered twice by >"
        delivered.update(got)
    final = regions[1].state.get(b"k")
    remaining = (
        set()
        if final is None
        else {b"%d-%d" % sid for sid, _o, _f in final.entries.range((0, 0), (2**64 - 1, 2**64 - 1))}
    )
    assert remaining <= delivered
