"""Causal delivery with duplicate drop (docs/architecture.md, "Replicated state")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.commands.execute import run
from streams.crdt import ops
from streams.crdt.causal import CausalBuffer
from streams.crdt.region import Region
from streams.ids import IdMode


def op(origin: int, seq: int, ctx: dict[int, int] | None = None) -> ops.Op:
    return ops.Op(origin, seq, tuple(sorted((ctx or {}).items())), 0, ops.Del(b"k"))


def dots(released: list[ops.Op]) -> list[tuple[int, int]]:
    return [(o.origin, o.seq) for o in released]


def test_an_op_waits_for_the_previous_op_of_its_origin() -> None:
    buf = CausalBuffer()
    assert buf.offer(op(1, 2)) == []
    assert buf.waiting == 1
    assert buf.missing() == {1: 1}
    assert dots(buf.offer(op(1, 1))) == [(1, 1), (1, 2)]
    assert buf.waiting == 0
    assert buf.applied == {1: 2}


def test_an_op_waits_for_every_op_its_context_names() -> None:
    buf = CausalBuffer()
    assert buf.offer(op(2, 1, {1: 2, 3: 1})) == []
    assert dots(buf.offer(op(1, 1))) == [(1, 1)]
    assert dots(buf.offer(op(3, 1))) == [(3, 1)]  # still missing 1:2
    assert buf.waiting == 1
    assert dots(buf.offer(op(1, 2))) == [(1, 2), (2, 1)]
    assert buf.waiting == 0


def test_release_cascades_across_origins_in_a_causal_order() -> None:
    buf = CausalBuffer()
    chain = [op(1, 1), op(2, 1, {1: 1}), op(3, 1, {2: 1}), op(1, 2, {3: 1}), op(2, 2, {1: 2})]
    for held in reversed(chain[1:]):
        assert buf.offer(held) == []
    assert dots(buf.offer(chain[0])) == [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2)]


def test_applied_ops_and_held_ops_offered_again_are_dropped() -> None:
    buf = CausalBuffer()
    buf.offer(op(1, 1))
    assert buf.is_duplicate(op(1, 1))
    assert buf.offer(op(1, 1)) == []
    buf.offer(op(1, 3))
    assert buf.is_duplicate(op(1, 3))
    assert buf.offer(op(1, 3)) == []
    assert buf.waiting == 1
    assert dots(buf.offer(op(1, 2))) == [(1, 2), (1, 3)]  # 1:3 released once


def test_a_buffer_started_from_a_snapshot_vector_drops_what_the_snapshot_holds() -> None:
    buf = CausalBuffer({1: 5, 2: 3})
    assert buf.offer(op(1, 5)) == []
    assert buf.offer(op(2, 1)) == []
    assert dots(buf.offer(op(1, 6, {2: 3}))) == [(1, 6)]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_arrival_order_with_duplicates_releases_every_op_once_in_causal_order(
    data: st.DataObject,
) -> None:
    # A random causal history: each new op of an origin has seen a random prefix of the others.
    seqs = {1: 0, 2: 0, 3: 0}
    history: list[ops.Op] = []
    for _ in range(data.draw(st.integers(1, 25))):
        origin = data.draw(st.sampled_from([1, 2, 3]))
        ctx = {}
        for other in (1, 2, 3):
            if other != origin and seqs[other]:
                ctx[other] = data.draw(st.integers(0, seqs[other]))
        # contexts never go back: an origin has seen at least what its previous op had seen
        if history:
            mine = [o for o in history if o.origin == origin]
            if mine:
                for r, s in mine[-1].ctx:
                    ctx[r] = max(ctx.get(r, 0), s)
        seqs[origin] += 1
        history.append(op(origin, seqs[origin], {r: s for r, s in ctx.items() if s}))
    arrivals = data.draw(st.permutations(history + data.draw(st.lists(st.sampled_from(history)))))

    buf = CausalBuffer()
    applied: dict[int, int] = {}
    released: list[ops.Op] = []
    for arriving in arrivals:
        for ready in buf.offer(arriving):
            assert ready.seq == applied.get(ready.origin, 0) + 1
            assert all(applied.get(r, 0) >= s for r, s in ready.ctx)
            applied[ready.origin] = ready.seq
            released.append(ready)
    assert sorted(dots(released)) == sorted(dots(history))
    assert buf.waiting == 0


def test_a_region_holds_a_remote_xdel_until_the_entry_it_removes_arrives() -> None:
    r1, r2, r3 = (Region(i, IdMode.STRICT) for i in (1, 2, 3))
    added = run(r1, [b"XADD", b"k", b"*", b"f", b"v"], 1000).replicated
    for o in added:
        r2.receive(o)
    removed = run(r2, [b"XDEL", b"k", b"1000-1"], 1001).replicated
    assert [type(o.body) for o in removed] == [ops.XDel]

    assert r3.receive(removed[0]) == []  # r3 has not seen the XADD yet
    assert r3.causal.waiting == 1
    assert r3.state.get(b"k") is None
    assert dots(r3.receive(added[0])) == [(1, 1), (2, 1)]
    assert r3.state.get(b"k") is None  # the XDEL ran after the XADD it observed
    assert r3.state.digest() == r2.state.digest()


def test_a_region_drops_its_own_ops_and_remote_ops_delivered_twice() -> None:
    r1, r2 = Region(1), Region(2)
    done = run(r1, [b"XADD", b"k", b"*", b"f", b"v"], 1000).replicated
    assert r1.receive(done[0]) == []  # its own op, already applied at commit
    assert len(r2.receive(done[0])) == 1
    assert r2.receive(done[0]) == []
    length = r2.state.get(b"k")
    assert length is not None and length.entries.length == 1
