"""Convergence of three regions under any delivery order (docs/architecture.md, "Replicated state").

Hypothesis draws histories of commands issued in three strict-mode regions (XADD with `*` and
millisecond-only IDs, XDEL of IDs the region sees, XTRIM MAXLEN / MINID, DEL, XGROUP CREATE ...
MKSTREAM / DESTROY, XSETID) interleaved with partial deliveries: any issued op to any region, in
any order, duplicates and ops whose dependencies have not arrived included. Checked throughout:

- causal delivery releases an op only after `(origin, seq - 1)` and everything in its context;
- two regions that have applied the same ops hold the same digest;
- strict mode never gives two regions the same ID, and each region's own XADDs to a key are
  strictly increasing (until a DEL of the key is applied there: a deleted key starts afresh, as in
  Redis);

and at the end, once every op has been delivered everywhere, every region has the same digest,
nothing is held back, and no key shows a duplicate ID.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.commands.execute import run
from streams.crdt import ops
from streams.crdt.region import Region
from streams.ids import MAX_ID, MIN_ID, REGION_STRIDE, IdMode, StreamID, format_id

REGIONS = (1, 2, 3)
KEYS = (b"a", b"b")
GROUPS = (b"g1", b"g2")
START_MS = 1_000

Action = tuple[Any, ...]
"""("xadd", region, key, ...), ("deliver", region, picks), ("tick", ms): plain values only."""

region_id = st.sampled_from(REGIONS)
key = st.sampled_from(KEYS)


def weighted(*choices: tuple[int, st.SearchStrategy[Action]]) -> st.SearchStrategy[Action]:
    """`one_of` does not pick its branches evenly; this does, with weights."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda strategy: strategy)


deliveries = st.lists(st.integers(0, 400), min_size=1, max_size=10)
# Each action is a tuple of plain values; indices pick among what the region sees at run time.
action = weighted(
    (
        6,
        st.tuples(
            st.just("xadd"), region_id, key, st.sampled_from(["*", "*", "ms"]), st.integers(-1, 2)
        ),
    ),
    (
        2,
        st.tuples(
            st.just("xdel"), region_id, key, st.lists(st.integers(0, 20), min_size=1, max_size=3)
        ),
    ),
    (1, st.tuples(st.just("maxlen"), region_id, key, st.integers(0, 4))),
    (1, st.tuples(st.just("minid"), region_id, key, st.integers(0, 20))),
    (1, st.tuples(st.just("del"), region_id, key)),
    (2, st.tuples(st.just("create"), region_id, key, st.sampled_from(GROUPS))),
    (1, st.tuples(st.just("destroy"), region_id, key, st.sampled_from(GROUPS))),
    (1, st.tuples(st.just("setid"), region_id, key, st.integers(0, 2))),
    (2, st.tuples(st.just("tick"), st.integers(0, 2))),
    (5, st.tuples(st.just("deliver"), region_id, deliveries)),
)

# The clock stands still and one key takes many DELs: a region then re-makes IDs it made before
# the DEL, while other regions may still XDEL / XTRIM the old entries with those IDs. Only the
# dots (observed-remove) tell the old entry from the new one.
id_reuse_action = weighted(
    (4, st.tuples(st.just("xadd"), region_id, st.just(b"a"), st.just("*"), st.just(0))),
    (2, st.tuples(st.just("del"), region_id, st.just(b"a"))),
    (
        2,
        st.tuples(
            st.just("xdel"),
            region_id,
            st.just(b"a"),
            st.lists(st.integers(0, 20), min_size=1, max_size=2),
        ),
    ),
    (1, st.tuples(st.just("maxlen"), region_id, st.just(b"a"), st.integers(0, 2))),
    (1, st.tuples(st.just("minid"), region_id, st.just(b"a"), st.integers(0, 20))),
    (5, st.tuples(st.just("deliver"), region_id, deliveries)),
)


@dataclass
class World:
    regions: dict[int, Region] = field(
        default_factory=lambda: {r: Region(r, IdMode.STRICT) for r in REGIONS}
    )
    pool: list[ops.Op] = field(default_factory=list)
    clock: int = START_MS
    # The last ID each region gave its own XADD to each key, since a DEL of it applied there.
    own_last: dict[tuple[int, bytes], StreamID] = field(default_factory=dict)
    # Which region made each (key, ID): strict mode must never reuse one across regions.
    maker: dict[tuple[bytes, StreamID], int] = field(default_factory=dict)

    def visible(self, region: int, key: bytes) -> list[StreamID]:
        ks = self.regions[region].state.get(key)
        return [] if ks is None else [sid for sid, _o, _f in ks.entries.range(MIN_ID, MAX_ID)]

    def command(self, region: int, args: list[bytes]) -> None:
        done = run(self.regions[region], args, self.clock)
        for op in done.replicated:
            self.pool.append(op)
            self.after_applied(region, op)

    def after_applied(self, region: int, op: ops.Op) -> None:
        body = op.body
        if isinstance(body, ops.Del):
            self.own_last.pop((region, body.key), None)
        if isinstance(body, ops.XAdd) and op.origin == region:
            self.check_new_id(region, body.key, body.id)

    def check_new_id(self, region: int, key: bytes, sid: StreamID) -> None:
        assert sid[1] % REGION_STRIDE == region, f"strict ID {sid} not owned by region {region}"
        maker = self.maker.setdefault((key, sid), region)
        assert maker == region, f"regions {maker} and {region} both made {key!r} {sid}"
        last = self.own_last.get((region, key))
        assert last is None or sid > last, f"region {region} went from {last} to {sid}"
        self.own_last[(region, key)] = sid

    def deliver(self, target: int, op: ops.Op) -> None:
        region = self.regions[target]
        applied = dict(region.causal.applied)
        released = region.receive(op)
        for ready in released:
            assert ready.seq == applied.get(ready.origin, 0) + 1, "released out of seq order"
            for origin, seq in ready.ctx:
                assert applied.get(origin, 0) >= seq, f"released {ready} before {origin}:{seq}"
            applied[ready.origin] = ready.seq
            self.after_applied(target, ready)
        assert applied == region.causal.applied

    def check_equal_vectors_mean_equal_digests(self) -> None:
        seen: dict[tuple[tuple[int, int], ...], tuple[int, str]] = {}
        for r, region in self.regions.items():
            vector = tuple(sorted((o, s) for o, s in region.vector.items() if s))
            digest = region.state.digest()
            other = seen.setdefault(vector, (r, digest))
            assert other[1] == digest, f"regions {other[0]} and {r} applied {vector}, differ"

    def step(self, act: Action) -> None:
        kind = act[0]
        if kind == "tick":
            self.clock += act[1]
        elif kind == "deliver":
            for pick in act[2]:
                if self.pool:
                    self.deliver(act[1], self.pool[pick % len(self.pool)])
        else:
            self.command(act[1], self.args(act))
        self.check_equal_vectors_mean_equal_digests()

    def args(self, act: Action) -> list[bytes]:
        kind, region, k = act[0], act[1], act[2]
        seen = self.visible(region, k)

        def pick(i: int) -> bytes:
            return format_id(seen[i % len(seen)]) if seen else b"%d-%d" % (self.clock, i)

        if kind == "xadd":
            spec = b"*" if act[3] == "*" else b"%d" % (self.clock + act[4])
            return [b"XADD", k, spec, b"r", b"%d" % region, b"n", b"%d" % len(self.pool)]
        if kind == "xdel":
            return [b"XDEL", k] + [pick(i) for i in act[3]]
        if kind == "maxlen":
            return [b"XTRIM", k, b"MAXLEN", b"%d" % act[3]]
        if kind == "minid":
            return [b"XTRIM", k, b"MINID", pick(act[3])]
        if kind == "del":
            return [b"DEL", k]
        if kind == "create":
            return [b"XGROUP", b"CREATE", k, act[3], b"0", b"MKSTREAM"]
        if kind == "destroy":
            return [b"XGROUP", b"DESTROY", k, act[3]]
        if kind == "setid":
            ks = self.regions[region].state.get(k)
            last = ks.last_id if ks is not None else (self.clock, 0)
            return [b"XSETID", k, b"%d-%d" % (last[0] + act[3], last[1])]
        raise AssertionError(kind)

    def deliver_everything(self, order: list[int]) -> None:
        for target in REGIONS:
            for pick in order:
                if self.pool:
                    self.deliver(target, self.pool[pick % len(self.pool)])
            for op in self.pool:
                self.deliver(target, op)


def converge(history: list[Action], final_order: list[int]) -> None:
    """Run the history, checking as it goes; then deliver everything and check convergence."""
    world = World()
    for act in history:
        world.step(act)
    world.deliver_everything(final_order)

    digests = {r: region.state.digest() for r, region in world.regions.items()}
    assert len(set(digests.values())) == 1, digests
    for region in world.regions.values():
        assert region.causal.waiting == 0
        assert region.vector == world.regions[1].vector
        for k in KEYS:
            ids = world.visible(region.id, k)
            assert len(ids) == len(set(ids)), f"duplicate IDs in {k!r}: {ids}"


final_orders = st.lists(st.integers(0, 500), max_size=40)


@settings(max_examples=200, deadline=None)
@given(history=st.lists(action, min_size=10, max_size=80), final_order=final_orders)
def test_three_regions_converge_under_any_delivery_order(
    history: list[Action], final_order: list[int]
) -> None:
    converge(history, final_order)


@settings(max_examples=200, deadline=None)
@given(history=st.lists(id_reuse_action, min_size=10, max_size=60), final_order=final_orders)
def test_observed_remove_tells_reused_ids_apart_in_every_delivery_order(
    history: list[Action], final_order: list[int]
) -> None:
    converge(history, final_order)


@settings(max_examples=100, deadline=None)
@given(history=st.lists(action, min_size=5, max_size=40), data=st.data())
def test_delivering_one_region_log_in_any_order_gives_the_same_state(
    history: list[Action], data: st.DataObject
) -> None:
    """A fourth, passive region fed the whole op pool in two different orders ends equal."""
    world = World()
    for act in history:
        world.step(act)
    pool = world.pool
    shuffled = data.draw(st.permutations(pool))
    first, second = Region(4, IdMode.STRICT), Region(4, IdMode.STRICT)
    for op in pool:
        first.receive(op)
    for op in shuffled:
        second.receive(op)
        second.receive(op)  # a duplicate on the way
    assert first.causal.waiting == second.causal.waiting == 0
    assert first.state.digest() == second.state.digest()
