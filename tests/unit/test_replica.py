"""The node's replica folds records live with the same fold as at boot: a local op read back (a
fenced node reads the local log the writer that took over appends to) waits until the replicated
ops it was made on are applied, and blocked readers of every touched key are woken."""

from __future__ import annotations

import asyncio

from streams.crdt import ops
from streams.crdt.region import Region
from streams.ids import MIN_ID, IdMode
from streams.node.runtime.oplog import Decoded
from streams.node.runtime.replica import Replica
from streams.node.runtime.waiters import Waiters

T = 1000


def _takeover_history() -> tuple[list[ops.Op], ops.LocalOp]:
    """The node that took over region 1 adds an entry, creates group g and delivers the entry."""
    other = Region(1)
    own = [
        other.issue(ops.XAdd(b"s", (T, 1), (b"f", b"v")), T),
        other.issue(ops.GroupCreate(b"s", b"g", MIN_ID, (), None), T),
    ]
    deliver = other.issue_local(
        ops.Deliver(b"s", b"g", b"alice", T, ((1, (T, 1)),), False, None), T
    )
    return own, deliver


def test_a_live_local_op_waits_for_the_replicated_ops_it_was_made_on() -> None:
    own, deliver = _takeover_history()
    replica = Replica(1, IdMode.STRICT, Waiters())
    replica.go_live()
    replica.feed([Decoded("r1.local", 0, 0, deliver)])
    assert replica.region.local_seq == 0 and not replica.settled()  # its group is not here yet
    replica.feed([Decoded("r1.oplog", 0, 0, own[0])])
    assert replica.region.local_seq == 0
    replica.feed([Decoded("r1.oplog", 0, 1, own[1])])
    group = replica.region.state.group(b"s", b"g")
    assert replica.region.local_seq == 1 and replica.settled()
    assert group is not None and list(group.pel) == [(T, 1, 1)]  # (ms, seq, origin)
    assert replica.positions() == {("r1.local", 0): 1, ("r1.oplog", 0): 2}


def test_records_applied_live_wake_the_readers_of_their_keys() -> None:
    async def scenario() -> bool:
        waiters = Waiters()
        replica = Replica(2, IdMode.STRICT, waiters)
        replica.go_live()
        own, _deliver = _takeover_history()
        waiting = asyncio.create_task(waiters.wait([b"s"], 5.0))
        await asyncio.sleep(0)
        replica.feed([Decoded("r1.oplog", 0, 0, own[0])])
        woken = await waiting
        assert replica.last_ts == {1: T}  # CRDT.INFO's lag reads this
        return woken

    assert asyncio.run(scenario())
