"""Region r1's broker frozen (SIGSTOP on its Tansu process; a restarted embedded broker keeps
nothing, so a freeze is the broker fault that can be healed) under load from 20 clients of r1
(10 writers, 10 readers) and a writer and a reader in r2, then thawed (SIGCONT). Two freezes in
one topology, because the write timeout (`--write-timeout`, 10 s by default) decides what happens:

- 3 s, under the write timeout: the batch in flight waits; no write fails, writes resume at
  SIGCONT; reads are answered throughout (a read that would show an op of a batch not yet
  committed is answered from the state the log holds, `streams.node.runtime.undo`).
- 15 s, past it: the writes waiting for the batch in flight are refused with an error within the
  write timeout of their arrival, every later write at once while the broker is away; reads are
  answered throughout, never with a write's error; after SIGCONT the node re-reads its log in the
  background, switches over, and takes writes again within RECOVERY_S.

Then nothing acknowledged is lost or doubled, nothing refused is there, in either region. The 60 s
freeze of issue 22 runs the same scenario (`python -m faults.test_broker_frozen 60`, opt-in: the
suite cannot afford a minute); its figures are in docs/reliability.md.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from faults.workload import (
    Ledger,
    Prober,
    Writer,
    check_dots,
    check_logs_fold_to_nodes,
    check_no_loss,
    first_write,
    percentile,
    plain_client,
    prepare,
    settle,
    summary,
    window,
)
from topology.local import LocalTopology

WRITE_TIMEOUT_S = 10.0
"""The node's --write-timeout (its default)."""
BOUND_S = WRITE_TIMEOUT_S + 0.5
"""A write is answered within this of its arrival (the issue's 10.5 s)."""
RECOVERY_S = 2.0
"""Writes are taken again within this of SIGCONT."""
WRITERS = 10
READERS = 10
WRITER_RATE = 3.0
"""Requests a second per writer of r1 (30 a second over the 10)."""
READ_INTERVAL_S = 0.1
READ_P99_S = 0.1
"""Reads wait at most 25 ms for a slow batch, then answer from the committed view (p99 ~27 ms
quiet); 51 ms was seen on a machine running two test suites at once, so the bound leaves room
while a read that waited for the frozen broker (seconds) still fails it."""


@dataclass
class Freeze:
    seconds: float
    stop: float = 0.0
    cont: float = 0.0
    writes_again_s: float | None = None
    woken: dict[str, tuple[float, bytes | None]] = field(default_factory=dict)
    """Per blocked reader (XREAD, XREADGROUP) blocked since before SIGSTOP: when it was answered
    and the payload it got."""
    woke_with: bytes = b""
    """The payload of the XADD sent after writes were taken again."""


class Blocked(threading.Thread):
    """A client blocked in XREAD or XREADGROUP (BLOCK past the freeze) on `key` across it: during
    it, an XADD to `key` that fails must not answer it; the one acknowledged after SIGCONT must
    (or the failed one, should the log hold it after all: its outcome is unknown)."""

    def __init__(self, port: int, key: bytes, group: bool, f: Freeze) -> None:
        super().__init__(daemon=True)
        self.block_ms = int((f.seconds + 30) * 1000)
        self.client = plain_client(port, timeout=f.seconds + 60)
        self.key, self.group, self.f = key, group, f

    def run(self) -> None:
        block = self.block_ms
        if self.group:
            reply = self.client.xreadgroup(b"wg", b"c", {self.key: b">"}, count=1, block=block)
        else:
            reply = self.client.xread({self.key: b"$"}, count=1, block=block)
        payload = reply[0][1][0][1][b"p"] if reply else None
        self.f.woken["XREADGROUP" if self.group else "XREAD"] = (time.monotonic(), payload)
        self.client.close()


@dataclass
class Run:
    ledgers: list[Ledger] = field(default_factory=list)
    r1_readers: list[Prober] = field(default_factory=list)
    r2_reader: Prober | None = None
    freezes: list[Freeze] = field(default_factory=list)

    def r1_writes(self) -> list[tuple[float, str, float]]:
        return [e for ledger in self.ledgers if ledger.region == 1 for e in ledger.events]

    def r1_reads(self) -> list[tuple[float, str, float]]:
        return [e for reader in self.r1_readers for e in reader.events]


def reader_request(n: int) -> Callable[[redis.Redis], object]:
    """The readers' mix: lengths, ranges and group state of the keys the writers write."""
    key = b"shared:%d" % (n % 4)
    requests = [
        lambda c: c.xlen(key),
        lambda c: c.xrange(key, count=5),
        lambda c: c.xrevrange(b"q", count=3),
        lambda c: c.xinfo_stream(key) if c.exists(key) else None,
        lambda c: c.xpending(b"q", b"cg"),
    ]
    return requests[n % len(requests)]


def freeze(topo: LocalTopology, f: Freeze, n: int) -> None:
    broker = topo.brokers[1]._proc
    assert broker is not None
    key = b"wake:%d" % n
    client = plain_client(topo.ports[1], timeout=30)
    client.xgroup_create(key, b"wg", id="$", mkstream=True)
    blocked = [Blocked(topo.ports[1], key, group, f) for group in (False, True)]
    for thread in blocked:
        thread.start()
    time.sleep(0.3)
    f.stop = time.monotonic()
    broker.send_signal(signal.SIGSTOP)
    try:
        time.sleep(1.0)
        during = threading.Thread(target=xadd_during, args=(topo.ports[1], key), daemon=True)
        during.start()
        time.sleep(max(0.0, f.seconds - (time.monotonic() - f.stop)))
    finally:
        broker.send_signal(signal.SIGCONT)
    f.cont = time.monotonic()
    f.writes_again_s = first_write(topo.ports[1], 30)
    f.woke_with = b"after-%d" % n
    client.xadd(key, {b"p": f.woke_with})
    for thread in [*blocked, during]:
        thread.join(10)
    client.close()


def xadd_during(port: int, key: bytes) -> None:
    """Held by the frozen broker: acknowledged at SIGCONT, or refused past the write timeout."""
    client = plain_client(port, timeout=30)
    try:
        client.xadd(key, {b"p": b"during"})
    except redis.ResponseError:
        pass
    client.close()


def run(freezes: list[float]) -> Run:
    """The load, the freezes one after another (2 s of load before each and after the last),
    a report of each, then the data checks. Returns what was seen for the caller's checks."""
    out = Run()
    node_args = ["--write-timeout", f"{WRITE_TIMEOUT_S:g}"]
    with LocalTopology(regions=2, manual_sync=False, node_args=node_args) as topo:
        prepare(topo)
        broker = topo.brokers[1]._proc
        assert broker is not None
        writers = [Writer(topo, 1, WRITER_RATE, tag=f"1{chr(97 + i)}") for i in range(WRITERS)] + [
            Writer(topo, 2, 30.0)
        ]
        out.r1_readers = [
            Prober(topo.ports[1], 30.0, READ_INTERVAL_S, reader_request(i)) for i in range(READERS)
        ]
        out.r2_reader = Prober(topo.ports[2], 30.0, READ_INTERVAL_S)
        for thread in [*writers, *out.r1_readers, out.r2_reader]:
            thread.start()
        try:
            for n, seconds in enumerate(freezes):
                time.sleep(2.0)
                f = Freeze(seconds)
                out.freezes.append(f)
                freeze(topo, f, n)
            time.sleep(2.0)
        finally:
            broker.send_signal(signal.SIGCONT)
            out.ledgers = [w.stop() for w in writers]
            for reader in [*out.r1_readers, out.r2_reader]:
                reader.stop()
        for f in out.freezes:
            report(out, f)
        settle(topo)
        counts = check_no_loss(topo, out.ledgers)
        print(f"  checked in both regions: {counts}")
        check_logs_fold_to_nodes(topo)
        print(f"  logs fold to the digests; op logs 1..n on both clusters: {check_dots(topo)}")
    return out


def report(out: Run, f: Freeze) -> None:
    writes, reads = out.r1_writes(), out.r1_reads()
    during = [took for t, _o, took in reads if f.stop <= t < f.cont]
    errors = sorted(
        t + took - f.stop
        for t, o, took in writes
        if o != "ok" and f.stop < t + took < f.cont + RECOVERY_S
    )
    print(f"\nr1's broker frozen {f.seconds:g} s under {WRITERS} writers + {READERS} readers")
    print(summary([ledger for ledger in out.ledgers if ledger.region == 1][:2]) + "\n  ...")
    during.sort()
    print(
        f"  r1 reads during the freeze: {len(during)}, p50 {percentile(during, 0.5) * 1000:.1f}"
        f" ms, p99 {percentile(during, 0.99) * 1000:.1f} ms, max "
        f"{max(during, default=0) * 1000:.1f} ms; outcomes {window(reads, f.stop, f.cont)}"
    )
    print(f"  r1 writes started during the freeze: {window(writes, f.stop, f.cont)}")
    if errors:
        print(f"  r1: the first write error came {errors[0]:.2f}s after SIGSTOP")
    print(f"  r1 takes writes {f.writes_again_s}s after SIGCONT")
    woken = {cmd: (round(t - f.cont, 2), p) for cmd, (t, p) in f.woken.items()}
    print(f"  blocked readers answered (s after SIGCONT, payload): {woken}")
    assert out.r2_reader is not None
    print(f"  r2 during the freeze: reads {window(out.r2_reader.events, f.stop, f.cont)}")


def check(out: Run) -> None:
    writes, reads = out.r1_writes(), out.r1_reads()
    assert all(o == "ok" for _t, o, _took in reads), {o for _t, o, _ in reads if o != "ok"}
    slowest_read = max(took for _t, _o, took in reads)
    assert slowest_read < 1.0, f"a read waited {slowest_read:.2f}s: for the broker"
    for f in out.freezes:
        during = sorted(took for t, _o, took in reads if f.stop <= t < f.cont)
        assert percentile(during, 0.99) < READ_P99_S, f"reads' p99 {percentile(during, 0.99)}s"
    slowest_write = max(took for _t, _o, took in writes)
    assert slowest_write < BOUND_S, f"a write was answered after {slowest_write:.2f}s"
    for f in out.freezes:
        assert f.writes_again_s is not None and f.writes_again_s < RECOVERY_S, (
            f"writes taken again {f.writes_again_s}s after SIGCONT"
        )
        errors = [t + took for t, o, took in writes if o != "ok" and f.stop < t + took]
        errors = [e for e in errors if e < f.cont + RECOVERY_S]
        assert set(f.woken) == {"XREAD", "XREADGROUP"}, f"blocked readers not answered: {f}"
        for cmd, (t, payload) in f.woken.items():
            assert t > f.cont, f"{cmd} was answered during the freeze"
            if f.seconds < WRITE_TIMEOUT_S:
                assert payload == b"during", (cmd, payload)  # committed at SIGCONT
            else:  # the failed XADD only if the log holds it after all (its outcome is unknown)
                assert payload in (f.woke_with, b"during"), (cmd, payload)
        if f.seconds < WRITE_TIMEOUT_S:
            assert not errors, f"a write failed during a {f.seconds:g} s freeze"
            continue
        assert errors, "no write was refused during the freeze"
        first = min(errors) - f.stop
        assert first < BOUND_S, f"the first write error came {first:.2f}s after SIGSTOP"
        later = [took for t, _o, took in writes if f.stop + first + 0.2 < t < f.cont]
        assert later and max(later) < 0.5, f"writes after the first error waited {max(later)}s"
    assert out.r2_reader is not None and not out.r2_reader.errors(), "r2's reads were affected"
    r2 = [ledger for ledger in out.ledgers if ledger.region == 2]
    assert not r2[0].errors, f"r2's writes were affected: {r2[0].errors}"


def test_a_frozen_broker_keeps_reads_answered_and_refuses_writes_within_the_bound() -> None:
    check(run([3.0, 15.0]))


def test_reload_finishes_while_another_region_writes() -> None:
    from faults.workload import run_load

    with LocalTopology(regions=2, manual_sync=False, node_args=["--debug-faults"]) as topo:
        prepare(topo)
        client = plain_client(topo.ports[1])

        def fail_one_batch_then_wait() -> None:
            time.sleep(1.0)
            assert client.execute_command("CRDT.FAULT", "APPEND", "1") == b"OK"
            try:
                client.xadd(b"x", {b"p": b"failed"})
                raise AssertionError("the injected fault failed no write")
            except redis.ResponseError as exc:
                assert "may or may not have been applied" in str(exc), exc
            started = time.monotonic()
            while time.monotonic() - started < 20:
                try:
                    client.xadd(b"x", {b"p": b"after"})
                    print(
                        f"\nreload under remote load: writes again after "
                        f"{time.monotonic() - started:.2f}s"
                    )
                    return
                except redis.ResponseError:
                    time.sleep(0.1)
            raise AssertionError(
                "r1 still refuses writes 20 s after a failed batch while r2 writes"
            )

        run_load(topo, [2], seconds=0, rate=30.0, during=fail_one_batch_then_wait, tail=0)


if __name__ == "__main__":  # the long freeze, opt-in: python -m faults.test_broker_frozen 60
    check(run([float(sys.argv[1]) if len(sys.argv) > 1 else 60.0]))
