"""A takeover while the old writer's commit timed out (issue 22): the old node must not take the
region back when its broker answers again. Its writer needs renewing then (a timed-out commit
cannot be aborted), and a renewal under the shard's transactional id would fence whoever holds
it now; so before renewing it asks `<region>.writers` whether a node started after it
(`streams.node.kafka.presence.Presence.superseded`), and steps down to read-only instead."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
from support import answers, free_port, wait_until

from streams.node.kafka.presence import Identity, Presence
from streams.node.kafka.process_writer import ProcessWriter
from streams.node.runtime.oplog import WriterFenced
from topology.local import LocalTopology

TAKEN_OVER = "another writer took over region r1"


def _fenced(client: redis.Redis) -> bytes:
    info = client.execute_command("CRDT.INFO")
    return dict(zip(info[::2], info[1::2], strict=True))[b"fenced"]  # type: ignore[no-any-return]


def test_a_node_taken_over_during_a_commit_timeout_steps_down_and_never_fences_the_new_one(
    tmp_path: Path,
) -> None:
    with LocalTopology(regions=1, node_args=["--write-timeout", "2"]) as topo:
        old = redis.Redis(port=topo.ports[1], socket_timeout=30)
        old.xadd("s", {"n": "before"})
        broker = topo.brokers[1]._proc
        node = topo._procs[(1, 0)]
        assert broker is not None
        outcome: list[str] = []

        def write_into_the_outage() -> None:
            try:
                old.xadd("s", {"n": "timed out"})
                outcome.append("acknowledged")
            except redis.ResponseError as exc:
                outcome.append(str(exc))

        broker.send_signal(signal.SIGSTOP)
        try:
            writer = threading.Thread(target=write_into_the_outage)
            writer.start()
            writer.join(10)
            assert outcome and "may or may not have been applied" in outcome[0], outcome
            node.send_signal(signal.SIGSTOP)  # the old node sleeps through the takeover
        finally:
            broker.send_signal(signal.SIGCONT)
        port = free_port()
        log = open(tmp_path / "new.log", "wb")
        cmd = [sys.executable, "-m", "streams.node", "--topology", str(topo.topology_path)]
        proc = subprocess.Popen(
            [*cmd, "--region", "r1", "--port", str(port), "--takeover"],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        try:
            new = redis.Redis(port=port, socket_timeout=30)
            wait_until(lambda: answers(new), timeout=60)
            new.xadd("s", {"n": "new writer 1"})
            node.send_signal(signal.SIGCONT)
            # The old node re-reads its log, finds it was superseded, and refuses writes saying
            # so; it never renews its writer (which would fence the new one).
            deadline = time.monotonic() + 20
            while True:
                try:
                    old.xadd("s", {"n": "zombie"})
                    raise AssertionError("the old node took a write after the takeover")
                except redis.ResponseError as exc:
                    if TAKEN_OVER in str(exc):
                        break
                    assert "writes refused" in str(exc), exc
                    assert time.monotonic() < deadline, f"the old node still says: {exc}"
                    time.sleep(0.1)
            assert b"took over" in _fenced(old)
            for i in range(2, 6):  # the new node keeps the region
                new.xadd("s", {"n": f"new writer {i}"})
                time.sleep(0.2)
            assert _fenced(new) == b""
            wait_until(lambda: old.xlen("s") == new.xlen("s"), timeout=30)
            written = [f[b"n"] for _id, f in new.xrange("s")]
            assert written[0] == b"before" and written[-5:] == [
                b"new writer %d" % i for i in range(1, 6)
            ], written
            assert b"zombie" not in written
        finally:
            node.send_signal(signal.SIGCONT)
            proc.terminate()
            proc.wait(timeout=15)
            log.close()


def test_a_writer_asks_before_renewing_and_a_superseded_one_stays_fenced() -> None:
    """The two halves of the check on a real broker: `Presence.superseded` names a node that
    announced itself after this one (and nothing for the newest), and a shard writer's `recover`
    renews only when nothing newer is named."""
    with LocalTopology(regions=1) as topo:
        bootstrap = topo.bootstrap[1]
        older = Presence(bootstrap, "r1.writers", Identity.here("r1", 0, "10.0.0.1:1", (0,)))
        newer = Presence(bootstrap, "r1.writers", Identity.here("r1", 0, "10.0.0.2:2", (0,)))
        try:
            older.announce(takeover=False)
            assert older.superseded(0, "r1") is None
            newer.announce(takeover=True)
            text = older.superseded(0, "r1")
            assert text is not None and TAKEN_OVER in text and "10.0.0.2:2" in text, text
            assert newer.superseded(0, "r1") is None
        finally:
            for presence in (older, newer):
                presence.close()

        process = ProcessWriter(bootstrap, "r-test", "r1.oplog", "r1.local", (0,), 1, timeout_s=10)
        writer = process.handles[0]
        try:
            writer.start()
            process._renew_needed = True  # as after a commit that timed out
            asyncio.run(writer.recover(lambda: None))
            assert not process._renew_needed and not writer.fenced
            process._renew_needed = True
            with pytest.raises(WriterFenced, match="took over"):
                asyncio.run(writer.recover(lambda: "another writer took over region r1: X"))
            assert writer.fenced and process._renew_needed  # not renewed: nobody was fenced
        finally:
            writer.close()
