"""`python -m bench.undo`: what the undo journal of a write batch costs (issue 22), in process.

    python -m bench.undo

- XADD applied as the node applies it, without a journal (the code before issue 22:
  `Region.apply_issued`) and with one (`Replica.apply`, a journal per 100 ops), interleaved,
  best of five: the journal's cost per op on the hot path.
- XADD with MAXLEN on a capped stream (an XADD and an XTRIM op per command; the XTRIM's record
  keeps the entries it removes), likewise.
- A copy of a key (`undo.copy_key`), which the rarer ops (DEL, XSETID, groups) take once per
  batch and per key, and which a read of a key with pending ops pays while a batch is slow
  (`CommittedView`), by stream length.

Printed, never asserted: figures only make sense on a quiet machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from streams.crdt import ops
from streams.ids import IdMode
from streams.node.runtime.replica import Replica
from streams.node.runtime.undo import Journal, copy_key
from streams.node.runtime.waiters import Waiters

NOW = 1_700_000_000_000


def _replica() -> Replica:
    replica = Replica(1, IdMode.STRICT, Waiters())
    replica.go_live()
    return replica


def _xadds(replica: Replica, key: bytes, count: int, journal: bool, seq: list[int]) -> None:
    region = replica.region
    j = Journal(region)
    for i in range(count):
        seq[0] += 1
        body = ops.XAdd(key, (NOW + seq[0], 0), (b"f", b"v"))
        issued = replica.prepare([body], NOW)
        if journal:
            if i % 100 == 0:
                j = Journal(region)
            replica.apply(issued, j)
        else:
            region.apply_issued(issued.replicated, issued.local)


def _best(run: Callable[[], None], rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def xadd_cost(count: int = 50_000) -> str:
    seq = [0]
    without: list[float] = []
    with_journal: list[float] = []
    for _round in range(5):
        for journal, out in ((False, without), (True, with_journal)):
            replica = _replica()
            started = time.perf_counter()
            _xadds(replica, b"k", count, journal, seq)
            out.append(time.perf_counter() - started)
    a, b = min(without) / count * 1e6, min(with_journal) / count * 1e6
    return (
        f"XADD applied, {count:,} ops, best of 5 interleaved: without a journal {a:.2f} us/op, "
        f"with {b:.2f} us/op (+{b - a:.2f} us)"
    )


def _capped(replica: Replica, count: int, cap: int, journal: bool, seq: list[int]) -> None:
    """XADD with MAXLEN `cap` as the command issues it: the XADD, then an XTRIM of the oldest."""
    region = replica.region
    j = Journal(region)
    for i in range(count):
        seq[0] += 1
        sid = (NOW + seq[0], 0)
        bodies: list[ops.Body] = [
            ops.XAdd(b"k", sid, (b"f", b"v")),
            ops.XTrim(b"k", ((1, (NOW + seq[0] - cap, 0)),)),
        ]
        issued = replica.prepare(bodies, NOW)
        if journal:
            if i % 100 == 0:
                j = Journal(region)
            replica.apply(issued, j)
        else:
            region.apply_issued(issued.replicated, issued.local)


def maxlen_cost(count: int = 20_000, cap: int = 10_000) -> str:
    seq = [0]
    without: list[float] = []
    with_journal: list[float] = []
    for _round in range(5):
        for journal, out in ((False, without), (True, with_journal)):
            replica = _replica()
            _xadds(replica, b"k", cap, False, seq)
            started = time.perf_counter()
            _capped(replica, count, cap, journal, seq)
            out.append(time.perf_counter() - started)
    a, b = min(without) / count * 1e6, min(with_journal) / count * 1e6
    return (
        f"XADD MAXLEN {cap:,} (XADD + XTRIM ops), {count:,} commands, best of 5 interleaved: "
        f"without a journal {a:.2f} us/command, with {b:.2f} us (+{b - a:.2f} us)"
    )


def copy_cost() -> str:
    lines = []
    for length in (100, 1_000, 10_000, 100_000):
        replica = _replica()
        _xadds(replica, b"k", length, False, [0])
        ks = replica.region.state.keys[b"k"]
        seconds = _best(lambda: copy_key(ks))  # noqa: B023 (run before the next iteration)
        lines.append(f"copy of a key of {length:,} entries: {seconds * 1000:.2f} ms")
    return "\n".join(lines)


def main() -> None:
    print(xadd_cost())
    print(maxlen_cost())
    print(copy_cost())


if __name__ == "__main__":
    main()
