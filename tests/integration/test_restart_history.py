"""A node restarts with its whole history: 10,000 and 100,000 ops, and a region that also
materializes two other regions' logs.

The defect this proves fixed: a node that had taken 5,000 writes could not restart (the fetch
wait was shorter than the embedded broker needed to find the records of a long partition).
Restart times are printed for docs/benchmarks.md; nothing here asserts a time.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from topology.local import LocalTopology

KEYS = [f"hist:{i}".encode() for i in range(8)]
GROUP = b"g"


def write_history(client: redis.Redis, commands: int, tag: str) -> None:
    """`commands` writes in pipelines of 1,000: XADDs over several keys, XDELs, and on half the
    keys a group read with XREADGROUP and partly acknowledged (PEL and consumers to restore)."""
    for key in KEYS[::2]:
        try:
            client.xgroup_create(key, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            assert "BUSYGROUP" in str(exc)
    done = 0
    chunk = 0
    while done < commands:
        size = min(1000, commands - done)
        pipe = client.pipeline(transaction=False)
        for i in range(size):
            pipe.xadd(KEYS[i % len(KEYS)], {b"f": f"{tag}-{chunk}-{i}".encode(), b"n": b"%d" % i})
        ids = pipe.execute()
        pipe = client.pipeline(transaction=False)
        for victim in ids[5:50:15]:
            pipe.xdel(KEYS[ids.index(victim) % len(KEYS)], victim)
        pipe.execute()
        for key in KEYS[::2]:
            read = client.xreadgroup(GROUP, f"c{chunk % 3}", {key: ">"}, count=20)
            delivered = [eid for _stream, entries in read for eid, _ in entries]
            if delivered:
                client.xack(key, GROUP, *delivered[::2])
        done += size
        chunk += 1


def observe(client: redis.Redis) -> dict[str, object]:
    seen: dict[str, object] = {"digest": client.execute_command("CRDT.DIGEST")}
    for key in KEYS:
        seen[f"xlen {key!r}"] = client.xlen(key)
        seen[f"last {key!r}"] = client.xrevrange(key, count=1)
    for key in KEYS[::2]:
        seen[f"pending {key!r}"] = client.xpending_range(key, GROUP, "-", "+", 10_000)
        seen[f"summary {key!r}"] = client.xpending(key, GROUP)
        seen[f"groups {key!r}"] = [
            (g["name"], g["pending"], g["last-delivered-id"]) for g in client.xinfo_groups(key)
        ]
    return seen


def restart(topo: LocalTopology, i: int) -> float:
    topo.kill_node(i)
    started = time.monotonic()
    topo.start_node(i)
    return time.monotonic() - started


def without_idle(pending: object) -> object:
    """XPENDING's idle time moves on between observations; everything else must not."""
    if isinstance(pending, list):
        return [
            {k: v for k, v in entry.items() if k != "time_since_delivered"}
            if isinstance(entry, dict)
            else entry
            for entry in pending
        ]
    return pending


def same(before: dict[str, object], after: dict[str, object]) -> None:
    for name in before:
        assert without_idle(after[name]) == without_idle(before[name]), name


@pytest.mark.parametrize("commands", [10_000, 100_000], ids=["10k", "100k"])
def test_a_node_restarts_twice_with_its_whole_history(commands: int) -> None:
    with LocalTopology(regions=1, manual_sync=False, id_mode="liberal") as topo:
        client = topo.client(1)
        started = time.monotonic()
        write_history(client, commands, "r1")
        wrote = time.monotonic() - started
        client.execute_command("CRDT.FLUSH")
        before = observe(client)
        assert sum(int(before[f"xlen {k!r}"]) for k in KEYS) > commands * 0.9  # type: ignore[call-overload]
        first = restart(topo, 1)
        same(before, observe(topo.client(1)))
        second = restart(topo, 1)
        same(before, observe(topo.client(1)))
        print(
            f"\n[restart] {commands:,} write commands in {wrote:.1f} s; node serving again "
            f"{first:.2f} s after a restart, {second:.2f} s after the second"
        )


def test_a_region_restarts_with_the_logs_of_two_other_regions() -> None:
    with LocalTopology(regions=3, manual_sync=False, id_mode="strict") as topo:
        for i in (1, 2, 3):
            write_history(topo.client(i), 5_000, f"r{i}")
        topo.sync()
        before = observe(topo.client(1))
        elapsed = restart(topo, 1)
        after = observe(topo.client(1))
        same(before, after)
        assert after["digest"] == topo.client(2).execute_command("CRDT.DIGEST")
        topo.client(1).xadd(KEYS[0], {b"after": b"restart"})
        topo.sync()
        assert len({topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 2, 3)}) == 1
        print(f"\n[restart] region r1 with 3 x 5,000 write commands: serving after {elapsed:.2f} s")


def test_a_region_restarts_while_another_region_writes_without_pause() -> None:
    """A mirrored log that grows all the time never gives librdkafka the empty fetch that makes
    a partition-EOF event; catch-up used to wait for one and a restart lasted as long as the
    other region wrote (59.8 s measured under 35 writes/s, where ~2 s are enough)."""
    with LocalTopology(regions=2, manual_sync=False, id_mode="strict") as topo:
        write_history(topo.client(1), 2_000, "r1")
        stop = threading.Event()
        written: list[bytes] = []

        def keep_writing() -> None:
            writer = topo.client(2)
            while not stop.is_set():
                written.append(writer.xadd(b"steady", {b"n": b"%d" % len(written)}))

        thread = threading.Thread(target=keep_writing, daemon=True)
        thread.start()
        try:
            while len(written) < 200:
                time.sleep(0.05)
            topo.kill_node(1)
            started = time.monotonic()
            # Without the fix the writer outlasts this bound (33 s measured) and the node exits.
            topo.start_node(1, ["--catch-up-timeout", "20"])
            elapsed = time.monotonic() - started
            during = len(written)
            time.sleep(1.0)
        finally:
            stop.set()
            thread.join(10)
        assert len(written) > during, "the other region stopped writing during the restart"
        topo.sync()
        assert topo.client(1).xlen(b"steady") == len(written)
        digests = {topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 2)}
        assert len(digests) == 1
        print(f"\n[restart] r1 while r2 writes without pause: serving after {elapsed:.2f} s")
