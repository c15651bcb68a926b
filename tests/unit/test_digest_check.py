"""The deferred digest check: a forked child compares the state as it was at the fork with a
recorded digest and says so by its exit status; the waiting thread reports it, or CANCELLED when
the node stops first."""

from __future__ import annotations

import queue

from streams.commands.execute import run
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.node.runtime.digest_check import DigestCheck, PendingCheck, fork_check


def region_of(entries: int) -> Region:
    region = Region(1, IdMode.LIBERAL)
    for n in range(entries):
        run(region, [b"XADD", b"k:%d" % (n % 3), b"*", b"f", b"%d" % n], 1_000 + n)
    return region


def outcome_of(region: Region, digest: str) -> DigestCheck:
    told: queue.Queue[DigestCheck] = queue.Queue()
    PendingCheck(fork_check(region, digest), told.put)
    return told.get(timeout=30)


def test_the_state_as_read_matches_its_digest() -> None:
    region = region_of(500)
    assert outcome_of(region, region.state.digest()) is DigestCheck.MATCH


def test_another_digest_is_a_mismatch() -> None:
    assert outcome_of(region_of(50), "0" * 64) is DigestCheck.MISMATCH


def test_the_child_checks_the_state_at_the_fork_whatever_the_parent_does_after() -> None:
    region = region_of(200)
    digest = region.state.digest()
    told: queue.Queue[DigestCheck] = queue.Queue()
    pid = fork_check(region, digest)
    run(region, [b"XADD", b"k:0", b"*", b"late", b"1"], 9_000)  # a tail op, after the fork
    assert region.state.digest() != digest
    PendingCheck(pid, told.put)
    assert told.get(timeout=30) is DigestCheck.MATCH


def test_a_check_cancelled_by_a_stop_reports_cancelled_and_leaves_no_child() -> None:
    region = region_of(30_000)  # long enough to be stopped midway
    told: queue.Queue[DigestCheck] = queue.Queue()
    check = PendingCheck(fork_check(region, "0" * 64), told.put)
    check.cancel()
    assert told.get(timeout=30) is DigestCheck.CANCELLED
    check.cancel()  # again: the child is gone and reaped, nothing is signalled
