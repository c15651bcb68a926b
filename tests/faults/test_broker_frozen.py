"""Region r1's broker frozen (SIGSTOP on its Tansu process; a restarted embedded broker keeps
nothing, so a freeze is the broker fault that can be healed) under load in both regions, then
thawed (SIGCONT). Three lengths, because three timeouts decide what happens:

- 3 s, under every client timeout: the batch in flight simply waits; no request fails, writes and
  reads resume at SIGCONT, nothing lost or doubled.
- 24 s, past the writer's timeouts (the commit's 10 s, then as long again to renew the producer):
  the failure path of the group-commit write path. The requests waiting on the batch in flight
  get an error reply within FIRST_ERROR_BOUND_S while the broker is still frozen, and every
  later one at once (no client hangs past that bound); r2 is unaffected; the node answers LOADING
  to reads too while it cannot reload (recorded, it is the documented trade-off). After SIGCONT
  it takes writes again within RECOVERY_S. (It did not before 98a1e56: abort_transaction after a
  timed-out commit is refused by librdkafka and the producer stayed mid-commit; the writer now
  replaces its producer.)
- 7 s, past the materializer's 5 s metadata timeout but under the commit timeout: the writes in
  flight commit at SIGCONT and writes go on. (Before, the failed topic lookup stopped the
  materializer for good and the node refused writes until restarted; it now retries.)

`WritesStillRefused` is raised last, after every other check: a node that still refuses writes
after SIGCONT (it is then restarted so that the data can be checked) fails the test.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import pytest
import redis

from faults.workload import (
    Ledger,
    Prober,
    check_dots,
    check_logs_fold_to_nodes,
    check_no_loss,
    crdt_info,
    first_write,
    plain_client,
    prepare,
    run_load,
    settle,
    summary,
    window,
)
from topology.local import LocalTopology

RATE = 30.0
"""Requests a second per region (two regions)."""
COMMIT_TIMEOUT_S = 10.0
"""streams.node.writer.RegionWriter's timeout_s: how long a batch waits for its transaction."""
LONG_FREEZE_S = 24.0
FIRST_ERROR_BOUND_S = 2 * COMMIT_TIMEOUT_S + 3
"""The commit times out (10 s), then renewing the producer waits up to as long again before the
batch is failed (measured: the first error 20.0 s after SIGSTOP), + a margin."""
HANG_BOUND_S = FIRST_ERROR_BOUND_S + 2
"""A request slower than this is a hang; under the clients' 30 s socket timeout, so that a hang
shows as a slow request."""
SOCKET_TIMEOUT_S = 30.0
RECOVERY_S = 15.0
"""How long after SIGCONT the node has to take a write again."""


class WritesStillRefused(Exception):
    """The node did not take a write within RECOVERY_S of SIGCONT (raised last, once every
    other check passed: the data is checked whatever happened)."""


@dataclass
class Frozen:
    """What happened around one freeze: the writers' ledgers (r1, r2), a reader per region, and
    the marks (monotonic SIGSTOP / SIGCONT, recovery figures)."""

    ledgers: list[Ledger] = field(default_factory=list)
    r1_reads: Prober | None = None
    r2_reads: Prober | None = None
    marks: dict[str, float | str | None] = field(default_factory=dict)

    @property
    def stop(self) -> float:
        stop = self.marks["stop"]
        assert isinstance(stop, float)
        return stop

    @property
    def cont(self) -> float:
        cont = self.marks["cont"]
        assert isinstance(cont, float)
        return cont

    def reads(self, region: int) -> Prober:
        reader = self.r1_reads if region == 1 else self.r2_reads
        assert reader is not None
        return reader

    def raise_if_still_refusing(self) -> None:
        if self.marks["writes_again_s"] is None:
            raise WritesStillRefused(f"r1 after SIGCONT: {self.marks['refusing_with']}")


def fault(topo: LocalTopology, freeze_s: float, marks: dict[str, float | str | None]) -> None:
    """Run by run_load while the writers go on: SIGSTOP r1's broker 1.5 s into the load for
    `freeze_s`, SIGCONT, then wait for r1 to take a write; if it does not, restart r1's node
    (what an operator would do) so that the test can check the data."""
    broker = topo.brokers[1]._proc
    assert broker is not None
    time.sleep(1.5)
    marks["stop"] = time.monotonic()
    broker.send_signal(signal.SIGSTOP)
    try:
        time.sleep(freeze_s)
    finally:
        broker.send_signal(signal.SIGCONT)
    marks["cont"] = time.monotonic()
    marks["writes_again_s"] = first_write(topo.ports[1], RECOVERY_S)
    if marks["writes_again_s"] is None:
        marks["refusing_with"] = refusal(topo)
        killed = time.monotonic()
        topo.kill_node(1)
        topo.start_node(1)
        marks["after_restart_s"] = first_write(topo.ports[1], 60)
        marks["restart_s"] = time.monotonic() - killed


def refusal(topo: LocalTopology) -> str:
    """What r1 answers to a write now, and its CRDT.INFO fault fields."""
    client = plain_client(topo.ports[1])
    try:
        try:
            client.xadd(b"probe", {b"p": b"refused?"})
            answer = "acknowledged"
        except redis.RedisError as exc:
            answer = f"{type(exc).__name__}: {str(exc)[:110]}"
        try:
            info = crdt_info(client)
            fields = f"materializer_error={info['materializer_error'][:90]!r}"
        except redis.RedisError as exc:
            fields = f"CRDT.INFO: {type(exc).__name__}"
        return f"{answer}; {fields}"
    finally:
        client.close()


@contextmanager
def frozen(freeze_s: float) -> Iterator[Frozen]:
    """Two regions under load, r1's broker frozen `freeze_s` meanwhile, a reader in each
    region; prints what happened and checks that no request hung, then hands over for the
    test's own checks, then settles and checks the data (nothing lost, refused or doubled, the
    logs fold to the digests, op logs 1..n)."""
    with LocalTopology(regions=2, manual_sync=False) as topo:
        prepare(topo)
        out = Frozen()
        out.r1_reads = Prober(topo.ports[1], SOCKET_TIMEOUT_S)
        out.r2_reads = Prober(topo.ports[2], SOCKET_TIMEOUT_S)
        broker = topo.brokers[1]._proc
        assert broker is not None
        out.r1_reads.start()
        out.r2_reads.start()
        try:
            during = partial(fault, topo, freeze_s, out.marks)
            out.ledgers = run_load(topo, [1, 2], seconds=0, rate=RATE, during=during)
        finally:
            broker.send_signal(signal.SIGCONT)
            out.r1_reads.stop()
            out.r2_reads.stop()
        report(f"r1's Tansu SIGSTOPped {freeze_s:g} s under 2 regions x {RATE:g} req/s", out)
        yield out
        settle(topo)
        counts = check_no_loss(topo, out.ledgers)
        print(f"  checked in both regions: {counts}")
        check_logs_fold_to_nodes(topo)
        dots = check_dots(topo)
        print(f"  logs fold to the digests; op logs 1..n on both clusters: {dots}")


def first_error(out: Frozen) -> float | None:
    """Seconds from SIGSTOP to the first error reply any request in r1 got (writer or reader)."""
    ends = [
        t + took - out.stop
        for t, outcome, took in out.ledgers[0].events + out.reads(1).events
        if outcome != "ok" and t + took > out.stop
    ]
    return min(ends, default=None)


def report(title: str, out: Frozen) -> None:
    """Print what happened around the freeze; no request may have taken HANG_BOUND_S."""
    stop, cont, marks = out.stop, out.cont, out.marks
    r1, r2 = out.ledgers
    print(f"\nbroker frozen: {title}")
    print(summary(out.ledgers))
    first = first_error(out)
    if first is not None:
        print(f"  r1: the first error reply came {first:.2f}s after SIGSTOP")
    print(f"  r1 writes started during the freeze: {window(r1.events, stop, cont)}")
    print(f"  r1 reads during the freeze: {window(out.reads(1).events, stop, cont)}")
    print(f"  r1 reads after SIGCONT: {window(out.reads(1).events, cont, float('inf'))}")
    print(f"  r2 writes during the freeze: {window(r2.events, stop, cont)}")
    print(f"  r2 reads during the freeze: {window(out.reads(2).events, stop, cont)}")
    if marks["writes_again_s"] is not None:
        print(f"  r1 takes writes {marks['writes_again_s']:.2f}s after SIGCONT")
    else:
        print(
            f"  r1 still refuses writes {RECOVERY_S:g}s after SIGCONT: {marks['refusing_with']}; "
            f"restarted it: writes again {marks['after_restart_s']:.2f}s after the restart "
            f"(kill to first write {marks['restart_s']:.2f}s)"
        )
    slowest = max(r1.slowest, r2.slowest, out.reads(1).slowest, out.reads(2).slowest)
    print(f"  slowest request anywhere {slowest:.2f}s (bound asserted: {HANG_BOUND_S:g}s)")
    assert slowest < HANG_BOUND_S, "a client hung"


def check_failure_path(out: Frozen) -> None:
    """Every request that met the freeze in r1 ended with an error reply (never a timeout or a
    dropped connection), and r2 went on as if nothing happened."""
    stop, cont = out.stop, out.cont
    r1, r2 = out.ledgers
    for outcome in (*window(r1.events, stop, cont), *window(out.reads(1).events, stop, cont)):
        assert outcome == "ok" or outcome.startswith(("ResponseError", "BusyLoadingError")), (
            f"a request in r1 ended without an error reply: {outcome}"
        )
    assert set(window(r2.events, stop, cont)) == {"ok"}, "r2's writes were affected"
    assert set(window(out.reads(2).events, stop, cont)) == {"ok"}, "r2's reads were affected"


def test_a_broker_stalled_briefly_delays_requests_and_loses_nothing() -> None:
    freeze_s = 3.0
    with frozen(freeze_s) as out:
        for ledger in out.ledgers:
            assert not ledger.errors, f"{ledger.name}: a request failed: {ledger.errors}"
        assert not out.reads(1).errors() and not out.reads(2).errors(), "a read failed"
        held = max(
            took for t, _o, took in out.ledgers[0].events if t < out.cont and t + took > out.stop
        )
        print(f"  r1's longest held write {held:.2f}s (the freeze was {freeze_s:g}s)")
        assert held > freeze_s / 2, "r1's writes were not held by the frozen broker"


def test_a_frozen_broker_fails_writes_with_an_error_in_bounded_time_and_loses_nothing() -> None:
    with frozen(LONG_FREEZE_S) as out:
        first = first_error(out)
        assert first is not None, "no request failed while the broker was frozen"
        assert first < FIRST_ERROR_BOUND_S, f"the first error came {first:.2f}s after SIGSTOP"
        texts = " ".join(out.ledgers[0].errors)
        assert "did not confirm the write" in texts, texts
        check_failure_path(out)
        # After the first error, while the broker is still frozen, r1 answers at once.
        after = window(out.ledgers[0].events, out.stop + first + 0.5, out.cont)
        assert after, "r1's writer sent nothing between the first error and SIGCONT"
        assert max(slowest for _n, slowest in after.values()) < 1.0, after
    out.raise_if_still_refusing()


def test_writes_are_taken_again_after_a_freeze_past_the_metadata_timeout() -> None:
    with frozen(7.0) as out:
        check_failure_path(out)
    out.raise_if_still_refusing()


def test_reload_finishes_while_another_region_writes() -> None:
    with LocalTopology(regions=2, manual_sync=False, node_args=["--debug-faults"]) as topo:
        prepare(topo)
        client = plain_client(topo.ports[1])

        def fail_one_batch_then_wait() -> None:
            time.sleep(1.0)
            assert client.execute_command("CRDT.FAULT", "APPEND", "1") == b"OK"
            with pytest.raises(redis.ResponseError, match="may or may not have been applied"):
                client.xadd(b"x", {b"p": b"failed"})
            started = time.monotonic()
            while time.monotonic() - started < 20:
                try:
                    client.xadd(b"x", {b"p": b"after"})
                    print(
                        f"\nreload under remote load: writes again after "
                        f"{time.monotonic() - started:.2f}s"
                    )
                    return
                except (redis.BusyLoadingError, redis.ResponseError):
                    time.sleep(0.1)
            raise AssertionError("r1 still LOADING 20 s after a failed batch while r2 writes")

        run_load(topo, [2], seconds=0, rate=RATE, during=fail_one_batch_then_wait, tail=0)
