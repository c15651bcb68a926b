"""The replay fold applies a local op on exactly the replicated ops it was made on."""

from __future__ import annotations

from streams.crdt import ops
from streams.crdt.fold import Fold
from streams.crdt.region import Region
from streams.ids import MIN_ID


def _history() -> tuple[list[ops.Op], list[ops.Op], list[ops.LocalOp], Region]:
    """r1 creates group g and adds an entry; r1's consumer reads it (a local op); r2, which saw
    the create, destroys g and creates it again; r1 then receives r2's ops."""
    r1, r2 = Region(1), Region(2)
    t = 1000
    own1 = [
        r1.issue(ops.XAdd(b"s", (t, 1), (b"f", b"v")), t),
        r1.issue(ops.GroupCreate(b"s", b"g", MIN_ID, (), None), t),
    ]
    for op in own1:
        r2.receive(op)
    deliver = r1.issue_local(ops.Deliver(b"s", b"g", b"alice", t, ((1, (t, 1)),), False, None), t)
    own2 = [
        r2.issue(ops.GroupDestroy(b"s", b"g"), t + 1),
        r2.issue(ops.GroupCreate(b"s", b"g", MIN_ID, (), None), t + 2),
    ]
    for op in own2:
        r1.receive(op)
    return own1, own2, [deliver], r1


def test_local_op_applies_before_replicated_ops_it_did_not_see_whatever_the_read_order() -> None:
    own1, own2, local, live = _history()
    fold = Fold(Region(1))
    for i, record in enumerate(local):
        fold.feed(("r1.local", 0), i, record)
    # The other region's topic first: without the gate the delivery would land on the new group.
    for i, op in enumerate(own2):
        fold.feed(("r2.oplog", 0), i, op)
    for i, op in enumerate(own1):
        fold.feed(("r1.oplog", 0), i, op)
    fold.finish()
    group = fold.region.state.group(b"s", b"g")
    assert group is not None and not group.pel  # the delivery went to the destroyed group
    assert group.pel == live.state.group(b"s", b"g").pel  # type: ignore[union-attr]
    assert fold.region.state.digest() == live.state.digest()


def test_positions_stop_at_the_first_record_the_fold_holds_back() -> None:
    own1, own2, local, _live = _history()
    fold = Fold(Region(1))
    for i, op in enumerate(own2):  # r2's ops wait for r1's (their causal context)
        fold.feed(("r2.oplog", 0), i, op)
    fold.feed(("r1.oplog", 0), 0, own1[0])
    assert fold.safe_positions() == {("r2.oplog", 0): 0, ("r1.oplog", 0): 1}
    fold.feed(("r1.oplog", 0), 1, own1[1])
    assert fold.safe_positions() == {("r2.oplog", 0): 2, ("r1.oplog", 0): 2}


def test_a_cut_applies_no_op_past_its_vector() -> None:
    own1, own2, local, _live = _history()
    fold = Fold(Region(1), cut={1: 1})
    for i, op in enumerate(own1):
        fold.feed(("r1.oplog", 0), i, op)
    for i, op in enumerate(own2):
        fold.feed(("r2.oplog", 0), i, op)
    fold.finish()
    assert fold.region.vector == {1: 1}
    assert fold.beyond_cut == 3
    assert fold.safe_positions() == {("r1.oplog", 0): 1, ("r2.oplog", 0): 0}
