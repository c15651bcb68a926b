"""A node serves from its stored snapshot before the state's digest is checked, and the check
still holds: a snapshot whose state does not match the digest its trailer recorded is refused
once the check (a forked child, `streams.node.runtime.digest_check`) ends, and the shard re-reads
its state from the previous snapshot and switches over.

The forged snapshot is the node's own newest one with another digest in its trailer: every other
check passes (its SHA-256 is published with it, its blocks' CRCs hold), as it would for a writer
or reader bug that gives back another state.
"""

from __future__ import annotations

import io
import time

import fastavro
import redis

from streams.kafka.snapshot_chunks import read_complete
from streams.node.kafka.snapshots import publish
from streams.snapshot.format import MAGIC_KEY
from topology.local import LocalTopology


def info(client: redis.Redis) -> dict[bytes, bytes]:
    flat = client.execute_command("CRDT.INFO")
    return {k: v for k, v in zip(flat[::2], flat[1::2], strict=True) if isinstance(v, bytes)}


def forged(data: bytes) -> bytes:
    """The same snapshot with a wrong digest in its trailer."""
    reader = fastavro.reader(io.BytesIO(data), return_record_name=True)
    records = list(reader)
    name, trailer = records[-1]["item"]
    assert name.endswith("Trailer") and trailer["digest"], trailer
    records[-1] = {"item": (name, {**trailer, "digest": "0" * 64})}
    out = io.BytesIO()
    fastavro.writer(
        out,
        reader.writer_schema,
        records,
        codec=reader.codec,
        metadata={MAGIC_KEY: reader.metadata[MAGIC_KEY]},
    )
    return out.getvalue()


def wait_for(client_of: object, field: bytes, want: bytes, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        facts = info(client_of())  # type: ignore[operator]
        if facts.get(field) == want:
            return
        assert time.monotonic() < deadline, facts
        time.sleep(0.1)


def test_a_snapshot_that_fails_its_deferred_digest_check_is_refused_and_the_state_re_read() -> None:
    with LocalTopology(regions=1, manual_sync=False) as topo:
        client = topo.client(1)
        client.xgroup_create(b"d:0", b"g", id="0", mkstream=True)
        pipe = client.pipeline(transaction=False)
        for i in range(2000):
            pipe.xadd(b"d:%d" % (i % 3), {b"i": b"%d" % i})
        pipe.execute()
        client.xreadgroup(b"g", b"c", {b"d:0": b">"}, count=10)
        good = client.execute_command("CRDT.SNAPSHOT").decode()
        client.xadd(b"d:1", {b"tail": b"1"})
        client.execute_command("CRDT.FLUSH")
        before = client.execute_command("CRDT.DIGEST")

        # A clean boot from it: served, then its digest checked and matched.
        topo.kill_node(1)
        topo.start_node(1)
        assert info(topo.client(1))[b"booted_from"] == b"snapshot %s from r1.snapshot" % (
            good.encode()
        )
        wait_for(lambda: topo.client(1), b"snapshot_digest_check", b"matched")
        assert topo.client(1).execute_command("CRDT.DIGEST") == before

        [(newest, data), *_older] = read_complete(topo.bootstrap[1], "r1.snapshot")
        assert newest == good
        bad = "9999999999999-1"
        publish(topo.bootstrap[1], "r1.snapshot", bad, forged(data))
        topo.kill_node(1)
        topo.start_node(1)
        # It boots from the forged one (only the digest differs: the same state serves) ...
        refused = b"snapshot %s: snapshot state does not match its recorded digest" % bad.encode()
        # ... and once the check ends, refuses it and re-reads from the good one.
        wait_for(
            lambda: topo.client(1),
            b"booted_from",
            b"snapshot %s from r1.snapshot (re-read after: %s)" % (good.encode(), refused),
        )
        facts = info(topo.client(1))
        assert facts[b"snapshot_digest_check"] == b"checked", facts
        assert topo.client(1).execute_command("CRDT.DIGEST") == before
        client = topo.client(1)
        client.xadd(b"d:2", {b"after": b"1"})  # and it takes writes
        assert client.xlen(b"d:2") == 667  # 666 before

        # The refusal is kept for as long as the node runs, not across a restart: a new start
        # boots from the forged one again and refuses it again.
        topo.kill_node(1)
        topo.start_node(1)
        wait_for(
            lambda: topo.client(1),
            b"booted_from",
            b"snapshot %s from r1.snapshot (re-read after: %s)" % (good.encode(), refused),
        )
