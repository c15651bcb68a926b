"""`diff` tells a convergence bug (first diverging op, by bisection) from a replica that lags."""

from __future__ import annotations

import pytest

from streams.crdt import ops
from streams.crdt.region import Region
from streams.replay.diff import Cluster, Loaded, diff, diff_clusters
from streams.replay.positions import PositionError

Logged = tuple[tuple[str, int], int, ops.Op | ops.LocalOp, int]


class DropsXDel(Region):
    """A deliberately corrupted fold: it ignores XDEL."""

    def receive(self, op: ops.Op) -> list[ops.Op]:
        released = self.causal.offer(op)
        for ready in released:
            if not isinstance(ready.body, ops.XDel):
                self.state.apply(ready)
        return released


def _logs() -> tuple[list[Logged], list[Logged]]:
    r1, r2 = Region(1), Region(2)
    mine = [
        r1.issue(ops.XAdd(b"s", (10, 1), (b"n", b"a")), 10),
        r1.issue(ops.XAdd(b"s", (11, 1), (b"n", b"b")), 11),
        r1.issue(ops.XAdd(b"t", (12, 1), (b"n", b"x")), 12),
        r1.issue(ops.XDel(b"s", ((11, 1),)), 13),
        r1.issue(ops.XAdd(b"s", (14, 1), (b"n", b"c")), 14),
    ]
    theirs = [
        r2.issue(ops.XAdd(b"u", (20, 2), (b"n", b"y")), 20),
        r2.issue(ops.XAdd(b"u", (21, 2), (b"n", b"z")), 21),
    ]
    one: list[Logged] = [(("r1.oplog", 0), i, op, 0) for i, op in enumerate(mine)]
    two: list[Logged] = [(("r2.oplog", 0), i, op, 0) for i, op in enumerate(theirs)]
    return one, two


def test_a_corrupted_fold_is_a_convergence_bug_named_by_its_first_diverging_op() -> None:
    one, two = _logs()
    a = Loaded("r1", 1, one + two)
    report = diff(a, a, make_b=DropsXDel)
    assert [bug.key for bug in report.bugs] == [b"s"]
    bug = report.bugs[0]
    assert bug.op is not None and (bug.op.origin, bug.op.seq) == (1, 4)
    assert isinstance(bug.op.body, ops.XDel)
    assert bug.where == (("r1.oplog", 0), 3)
    assert not report.lagging


def test_an_op_held_back_from_one_cluster_is_lag_not_a_bug() -> None:
    one, two = _logs()
    report = diff(Loaded("r1", 1, one + two), Loaded("r1", 1, one + two[:1]))
    assert not report.bugs
    assert report.shared == {1: 5, 2: 1}
    [lag] = report.lagging
    assert lag.key == b"u" and lag.side == "b"
    assert [(op.origin, op.seq) for op in lag.missing] == [(2, 2)] and not lag.held


def test_equal_replicas_do_not_differ() -> None:
    one, two = _logs()
    report = diff(Loaded("r1", 1, one + two), Loaded("r3", 3, two + one))
    assert not report.differs and report.equal_keys == 3


def test_clusters_are_compared_shard_by_shard() -> None:
    """Each shard numbers its own ops, so shard 1's r1:1 is not shard 0's r1:1: a bug in one
    shard is found there, with that shard's shared position, and the other shard is equal."""
    one, two = _logs()
    moved = [((topic, 1), o, op, t) for (topic, _p), o, op, t in one]  # the same ops in shard 1
    a = Cluster("r1", 2, {0: Loaded("r1", 1, two), 1: Loaded("r1", 1, moved)})
    b = Cluster("r2", 2, {0: Loaded("r2", 2, two), 1: Loaded("r2", 2, moved)})
    plain = diff_clusters(a, b)
    assert [r.differs for r in plain.values()] == [False, False]
    assert plain[0].shared == {2: 2} and plain[1].shared == {1: 5}
    buggy = {s: diff(a.loaded[s], b.loaded[s], make_b=DropsXDel) for s in (0, 1)}
    assert not buggy[0].differs
    [bug] = buggy[1].bugs
    assert bug.where == (("r1.oplog", 1), 3)
    with pytest.raises(PositionError, match="the same shards"):
        diff_clusters(a, Cluster("r3", 1, {0: Loaded("r3", 3, two)}))
