"""Packed blocks out of one entry log and into another (what a version 2 snapshot carries), and
the digest computed block by block.

The round trip is a hypothesis test over random histories (adds in and out of order on three
origins, observed XDELs, trims and DELs, the node limits changed in between as CONFIG SET does):
the installed logs hold the same blocks (boundaries, dead slots, sizes), read the same, have the
radix tree Redis builds when it loads the same nodes from an RDB, and go on exactly as the
originals under more random ops. The digest test compares `State.digest` with the entry-by-entry
definition it replaced, whose value regions and Spark compare. Refusals: a block inconsistent
with its payload, or out of order, leaves the log unchanged.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.crdt.blocks import Block, BlockError, PackedBlock
from streams.crdt.entries import EntryLogs, node_limits, set_node_limits
from streams.crdt.groups import Group
from streams.crdt.radix import Rax, rax_key
from streams.crdt.state import State
from streams.ids import MAX_ID, MIN_ID

Op = tuple[Any, ...]

op = st.one_of(
    st.tuples(st.just("add"), st.integers(1, 3), st.integers(0, 3), st.integers(0, 40)),
    st.tuples(st.just("add"), st.integers(1, 3), st.integers(0, 3), st.integers(0, 40)),
    st.tuples(st.just("insert"), st.integers(1, 3), st.integers(0, 400)),
    st.tuples(st.just("xdel"), st.integers(0, 500), st.integers(0, 40)),
    st.tuples(st.just("trim"), st.integers(1, 3), st.integers(0, 500), st.integers(0, 400)),
    st.tuples(st.just("del"), st.integers(0, 60)),
    st.tuples(st.just("limits"), st.sampled_from([0, 1, 3, 7, 100]), st.sampled_from([0, 200])),
)


class History:
    """Applies ops to an EntryLogs; the IDs and dots it makes depend only on the ops so far."""

    def __init__(self) -> None:
        self.dots = {1: 0, 2: 0, 3: 0}
        self.top = {1: (5, 0), 2: (5, 0), 3: (5, 0)}

    def apply(self, logs: EntryLogs, item: Op) -> None:
        kind = item[0]
        if kind == "add":
            _, origin, jump, size = item
            ms, seq = self.top[origin]
            sid = (ms + jump, seq + 1 if not jump else origin)
            self.top[origin] = sid
            self.dots[origin] += 1
            if size % 13 == 0:  # its own field names: the block is not all SAMEFIELDS
                fields: tuple[bytes, ...] = (b"g", b"1", b"h", b"%d" % size)
            else:
                fields = (b"f", b"x" * size)
            logs.add(origin, self.dots[origin], sid, fields)
        elif kind == "insert":
            _, origin, ms = item
            self.dots[origin] += 1
            logs.add(origin, self.dots[origin], (ms // 100, ms % 100), (b"i", b"%d" % ms))
        elif kind == "xdel":
            _, index, covered = item
            merged = list(logs.range(MIN_ID, MAX_ID))
            if merged:
                sid, origin, _f = merged[index % len(merged)]
                logs.remove_observed(origin, sid, covered)
        elif kind == "trim":
            _, origin, ms, covered = item
            logs.trim_observed(origin, (ms // 100, ms % 100), covered)
        elif kind == "del":
            covered = item[1]
            logs.remove_all_observed({1: covered, 2: covered, 3: covered})
        else:
            set_node_limits(max_entries=item[1], max_bytes=item[2])


def _copy(logs: EntryLogs) -> EntryLogs:
    copy = EntryLogs()
    for origin in logs.origins():
        blocks = logs.packed_blocks(origin)
        half = len(blocks) // 2  # a snapshot may carry one log in several records
        copy.install_blocks(origin, blocks[:half])
        copy.install_blocks(origin, blocks[half:])
    return copy


def _shape(block: Block) -> tuple[Any, ...]:
    return (block.first, block.last, block.slots, block.live, block.dead, block.lp_base)


def _content(block: Block) -> tuple[Any, ...]:
    """Its slots (IDs, dots, fields), whether the block is open (lists) or closed (tuples)."""
    return tuple(tuple(part) for part in block.decoded())


def _same(a: EntryLogs, b: EntryLogs) -> None:
    assert a.length == b.length and a.origins() == b.origins()
    for origin in a.origins():
        assert [_shape(x) for x in a.blocks(origin)] == [_shape(y) for y in b.blocks(origin)]
        assert [_content(x) for x in a.blocks(origin)] == [_content(y) for y in b.blocks(origin)]
        assert list(a.origin_entries(origin)) == list(b.origin_entries(origin))
        assert a.origin_top(origin) == b.origin_top(origin)
    assert list(a.range(MIN_ID, MAX_ID, reverse=True)) == list(
        b.range(MIN_ID, MAX_ID, reverse=True)
    )


def _rdb_loaded_tree(logs: EntryLogs) -> tuple[int, int]:
    """XINFO STREAM's radix numbers after Redis loads these nodes: each inserted in order."""
    keys = nodes = 0
    for origin in logs.origins():
        rax = Rax()
        for block in logs.blocks(origin):
            rax.insert(rax_key(block.first))
        keys += rax.numele
        nodes += rax.numnodes - 1
    return keys, nodes + 1


@settings(max_examples=80, deadline=None)
@given(before=st.lists(op, min_size=20, max_size=250), after=st.lists(op, max_size=80))
def test_installed_blocks_are_the_same_log_and_go_on_the_same(
    before: list[Op], after: list[Op]
) -> None:
    saved = node_limits()
    set_node_limits(max_bytes=300, max_entries=3)
    try:
        original = EntryLogs()
        history = History()
        for item in before:
            history.apply(original, item)
        copy = _copy(original)
        _same(original, copy)
        assert copy.radix_tree() == _rdb_loaded_tree(original)
        twin = History()
        twin.dots, twin.top = dict(history.dots), dict(history.top)
        for item in after:  # the same ops on both from here: same boundaries, same reads
            history.apply(original, item)
            twin.apply(copy, item)
            _same(original, copy)
    finally:
        set_node_limits(max_bytes=saved[0], max_entries=saved[1])


def _reference_digest(state: State) -> str:
    """`State.digest` as it was defined before it was computed by block: entry by entry."""
    h = hashlib.sha256()

    def feed(tag: bytes, data: bytes) -> None:
        h.update(tag + len(data).to_bytes(8, "big") + data)

    for key in sorted(state.existing_keys()):
        ks = state.keys[key]
        feed(b"K", key)
        for sid, origin, fields in ks.entries.range(MIN_ID, MAX_ID):
            feed(b"E", b"%d-%d@%d" % (sid[0], sid[1], origin))
            for item in fields:
                feed(b"F", item)
        for name in sorted(ks.groups):
            feed(b"G", name)
    return h.hexdigest()


add = st.tuples(st.just("add"), st.integers(1, 3), st.integers(0, 3), st.integers(0, 40))
xdel = st.tuples(st.just("xdel"), st.integers(0, 500), st.integers(0, 400))
digest_op = st.one_of(add, add, add, xdel, op)


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.lists(digest_op, min_size=30, max_size=200), min_size=1, max_size=3),
    big=st.integers(0, 5000),
    max_entries=st.sampled_from([3, 10, 100]),
)
def test_the_digest_by_blocks_is_the_digest_entry_by_entry(
    keys: list[list[Op]], big: int, max_entries: int
) -> None:
    saved = node_limits()
    set_node_limits(max_bytes=4096, max_entries=max_entries)
    try:
        state = State()
        for k, history_ops in enumerate(keys):
            ks = state._key(b"key%d" % k)
            history = History()
            for item in history_ops:
                if k == 0 and item[0] in ("add", "insert", "trim"):
                    item = (item[0], 1, *item[2:])  # one origin: fed block after block
                history.apply(ks.entries, item)
            if k == 0 and big:  # values past the precomputed length prefixes
                ks.entries.add(1, 10**6, (10**9, big), (b"big", b"v" * big, b"n", b""))
                ks.entries.add(1, 10**6 + 1, (10**9 + 1, 0), (b"big", b"v", b"n", b"w" * big))
        state._key(b"groups only").groups[b"g"] = Group(b"g", MIN_ID, {}, None)
        assert state.digest() == _reference_digest(state)
    finally:
        set_node_limits(max_bytes=saved[0], max_entries=saved[1])


def _filled(n: int = 250) -> EntryLogs:
    logs = EntryLogs()
    for i in range(n):
        logs.add(1, i + 1, (1, i), (b"f", b"v%d" % i))
    assert logs.remove_observed(1, (1, 3), n)
    return logs


def _refused(blocks: list[PackedBlock], into: EntryLogs | None = None) -> None:
    target = into if into is not None else EntryLogs()
    before = [(o, [_shape(b) for b in target.blocks(o)]) for o in target.origins()]
    length = target.length
    with pytest.raises(BlockError):
        target.install_blocks(1, blocks)
    assert [(o, [_shape(b) for b in target.blocks(o)]) for o in target.origins()] == before
    assert target.length == length


def test_blocks_out_of_order_or_overlapping_are_refused() -> None:
    blocks = _filled().packed_blocks(1)
    assert len(blocks) == 3
    _refused([blocks[1], blocks[0]])
    _refused([blocks[0], blocks[0]])
    _refused([blocks[0]._replace(last=blocks[1].first), blocks[1]])
    into = EntryLogs()
    into.install_blocks(1, blocks[1:2])
    _refused(blocks[:1], into)  # a later record must follow what is already there


def test_a_block_that_disagrees_with_its_payload_is_refused() -> None:
    block = _filled().packed_blocks(1)[0]
    other = _filled(300).packed_blocks(1)[1]
    _refused([block._replace(first=(1, 1))])
    _refused([block._replace(last=(1, 98))])
    _refused([block._replace(slots=99)])
    _refused([block._replace(slots=101, dead=block.dead)])
    _refused([block._replace(payload=other.payload)])
    _refused([block._replace(payload=block.payload[:-3])])
    _refused([block._replace(payload=b"")])
    _refused([block._replace(dead=1 << 100)])
    _refused([block._replace(dead=-1)])
    _refused([block._replace(lp_base=0)])


def test_an_open_tail_is_exported_without_being_sealed() -> None:
    logs = _filled()
    tail = logs.blocks(1)[-1]
    assert tail.open is not None
    copy = _copy(logs)
    assert tail.open is not None and tail.payload is None
    copy.add(1, 1000, (2, 0), (b"f", b"next"))  # the installed tail takes the next entry
    logs.add(1, 1000, (2, 0), (b"f", b"next"))
    assert [_shape(b) for b in copy.blocks(1)] == [_shape(b) for b in logs.blocks(1)]
