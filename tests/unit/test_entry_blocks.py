"""The packed entry storage (`streams.crdt.entries`) behaves as the plain per-origin map it
replaced, and its blocks follow Redis's node rules.

A hypothesis model test runs random adds (in order and, rarely, out of order), observed XDELs,
trims and DELs against a dict per origin and compares every read the commands use: merged ranges
both ways, `after_cursors`, get / has / origins_with, tops, the per-origin dotted iterator and
the "last at or below" lookup. The node-rule tests pin down what the differential test against
redis-server relies on.
"""

from __future__ import annotations

from bisect import bisect_right

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.crdt.entries import EntryLogs, node_limits, set_node_limits
from streams.crdt.radix import Rax, rax_key
from streams.ids import MAX_ID, MIN_ID, StreamID

Model = dict[int, dict[StreamID, tuple[int, tuple[bytes, ...]]]]


def _merged(model: Model) -> list[tuple[StreamID, int, tuple[bytes, ...]]]:
    return sorted((sid, o, item[1]) for o, log in model.items() for sid, item in log.items())


op = st.one_of(
    st.tuples(st.just("add"), st.integers(1, 3), st.integers(0, 3), st.integers(0, 40)),
    st.tuples(st.just("insert"), st.integers(1, 3), st.integers(0, 400)),
    st.tuples(st.just("xdel"), st.integers(0, 500), st.integers(0, 40)),
    st.tuples(st.just("trim"), st.integers(1, 3), st.integers(0, 500), st.integers(0, 400)),
    st.tuples(st.just("del"), st.integers(0, 400)),
)


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(op, max_size=300), max_entries=st.sampled_from([0, 1, 3, 100]))
def test_packed_logs_read_like_a_map_per_origin(ops: list[tuple], max_entries: int) -> None:  # type: ignore[type-arg]
    saved = node_limits()
    set_node_limits(max_bytes=300, max_entries=max_entries)
    try:
        logs = EntryLogs()
        model: Model = {}
        dots = {1: 0, 2: 0, 3: 0}
        top = {1: (5, 0), 2: (5, 0), 3: (5, 0)}
        for item in ops:
            kind = item[0]
            if kind == "add":
                _, origin, jump, size = item
                ms, seq = top[origin]
                sid = (ms + jump, seq + 1 if not jump else origin)
                top[origin] = sid
                dots[origin] += 1
                fields = (b"f", b"x" * size) if size % 3 else (b"g", b"1", b"h", b"%d" % size)
                logs.add(origin, dots[origin], sid, fields)
                model.setdefault(origin, {})[sid] = (dots[origin], fields)
            elif kind == "insert":
                _, origin, ms = item
                sid = (ms // 100, ms % 100)
                dots[origin] += 1
                logs.add(origin, dots[origin], sid, (b"i", b"%d" % ms))
                model.setdefault(origin, {})[sid] = (dots[origin], (b"i", b"%d" % ms))
                if sid > top[origin]:
                    top[origin] = sid
            elif kind == "xdel":
                _, index, covered = item
                merged = _merged(model)
                if merged:
                    sid, origin, _f = merged[index % len(merged)]
                    expect = model[origin][sid][0] <= covered
                    assert logs.remove_observed(origin, sid, covered) == expect
                    if expect:
                        del model[origin][sid]
            elif kind == "trim":
                _, origin, ms, covered = item
                threshold = (ms // 100, ms % 100)
                gone = [
                    s
                    for s, (d, _f) in model.get(origin, {}).items()
                    if s <= threshold and d <= covered
                ]
                assert logs.trim_observed(origin, threshold, covered) == len(gone)
                for s in gone:
                    del model[origin][s]
            else:
                covered = item[1]
                removed = logs.remove_all_observed({1: covered, 2: covered, 3: covered})
                gone = sorted(s for o in model for s, (d, _f) in model[o].items() if d <= covered)
                assert sorted(removed) == gone
                for o in model:
                    model[o] = {s: v for s, v in model[o].items() if v[0] > covered}
            model = {o: log for o, log in model.items() if log}
            _same_reads(logs, model)
    finally:
        set_node_limits(max_bytes=saved[0], max_entries=saved[1])


def _same_reads(logs: EntryLogs, model: Model) -> None:
    merged = _merged(model)
    assert logs.length == len(merged)
    assert list(logs.range(MIN_ID, MAX_ID)) == merged
    assert list(logs.range(MIN_ID, MAX_ID, reverse=True)) == merged[::-1]
    ids = [m[0] for m in merged]
    if merged:
        lo, hi = ids[len(ids) // 3], ids[2 * len(ids) // 3]
        assert list(logs.range(lo, hi)) == [m for m in merged if lo <= m[0] <= hi]
        assert list(logs.range(lo, hi, reverse=True)) == [
            m for m in merged[::-1] if lo <= m[0] <= hi
        ]
        cursors = {1: lo, 2: hi}
        assert list(logs.after_cursors(cursors, MIN_ID)) == [
            m for m in merged if m[0] > cursors.get(m[1], MIN_ID)
        ]
        probe = ids[len(ids) // 2]
        assert logs.has(probe)
        assert logs.origins_with(probe) == sorted(o for o in model if probe in model[o])
    assert logs.first() == (merged[0] if merged else None)
    assert logs.last() == (merged[-1] if merged else None)
    assert logs.max_id() == (max(ids) if ids else None)
    for origin in (1, 2, 3):
        log = model.get(origin, {})
        keys = sorted(log)
        assert logs.origin_top(origin) == (keys[-1] if keys else None)
        assert list(logs.origin_entries(origin)) == [(s, log[s][0], log[s][1]) for s in keys]
        for s in keys[:3]:
            assert logs.get(origin, s) == log[s][1]
            at = bisect_right(keys, s) - 1
            assert logs.last_at_or_below(origin, s) == keys[at]
            assert logs.last_at_or_below(origin, s, strict=True) == (
                keys[at - 1] if at > 0 else None
            )


def test_a_block_holds_max_entries_slots_deleted_ones_included() -> None:
    logs = EntryLogs()
    for i in range(150):
        logs.add(1, i + 1, (1, i), (b"f", b"v"))
    assert [b.slots for b in logs.blocks(1)] == [100, 50]
    assert logs.radix_tree() == (2, 4)  # head+15-byte chain, split node, two leaves
    for i in range(100, 150):
        assert logs.remove_observed(1, (1, i), 10**6)
    assert [b.slots for b in logs.blocks(1)] == [100]  # XDEL of its last live entry drops it
    logs.add(1, 200, (2, 0), (b"f", b"v"))
    assert [b.slots for b in logs.blocks(1)] == [100, 1]  # the full node stays closed


def test_a_trim_that_cuts_a_node_keeps_the_slots_and_the_node() -> None:
    logs = EntryLogs()
    for i in range(10):
        logs.add(1, i + 1, (1, i), (b"f", b"v"))
    assert logs.remove_observed(1, (1, 9), 100)
    assert logs.trim_observed(1, (1, 8), 100) == 9
    assert logs.length == 0
    assert logs.radix_tree() == (1, 2)  # a node with no live entry, as Redis keeps it
    logs.add(1, 11, (1, 10), (b"f", b"v"))
    assert [b.slots for b in logs.blocks(1)] == [11]


def test_bytes_close_a_node_where_the_listpack_would_reach_the_limit() -> None:
    logs = EntryLogs()
    for i in range(60):
        logs.add(1, i + 1, (1, i + 1), (b"f", b"x" * 100))
    assert [b.slots for b in logs.blocks(1)] == [36, 24]


def test_unobserved_entries_survive_a_del_in_their_blocks() -> None:
    logs = EntryLogs()
    for i in range(5):
        logs.add(2, i + 1, (1, i), (b"f", b"v"))
    assert logs.remove_all_observed({2: 3}) == [(1, 0), (1, 1), (1, 2)]
    assert [sid for sid, _o, _f in logs.range(MIN_ID, MAX_ID)] == [(1, 3), (1, 4)]


def test_the_radix_tree_counts_nodes_like_redis_after_removals() -> None:
    """Known Redis shapes: one key is head + compressed chain leaf (2 nodes); keys sharing 15
    bytes split once; removing back to one key re-compresses the chain."""
    rax = Rax()
    assert (rax.numele, rax.numnodes) == (0, 1)
    assert rax.insert(rax_key((1, 0)))
    assert (rax.numele, rax.numnodes) == (1, 2)
    assert rax.insert(rax_key((1, 5)))
    assert rax.insert(rax_key((2, 0)))
    assert not rax.insert(rax_key((2, 0)))
    assert rax.remove(rax_key((1, 5)))
    assert rax.remove(rax_key((2, 0)))
    assert not rax.remove(rax_key((2, 0)))
    assert (rax.numele, rax.numnodes) == (1, 2)
    assert rax.remove(rax_key((1, 0)))
    assert (rax.numele, rax.numnodes) == (0, 1)
