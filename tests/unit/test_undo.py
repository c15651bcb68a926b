"""The undo journal of a write batch (`streams.node.runtime.undo`): undoing the batches that failed
puts the state back exactly as it was before their first op, whatever commands they held: the node
serves reads from that state while it re-reads its log after a failed batch."""

from __future__ import annotations

import asyncio
import random

import pytest

from streams.commands.table import run
from streams.crdt.region import Region
from streams.errors import CommandError
from streams.ids import MIN_ID, IdMode
from streams.node.pipeline import router
from streams.node.runtime.replica import Replica
from streams.node.runtime.undo import CommittedView, Journal
from streams.node.runtime.waiters import Waiters

KEYS = [b"a", b"b", b"c"]


Dump = tuple[list[object], list[tuple[int, int]], int]


def dump(region: Region) -> Dump:
    """Everything of the state a command can read, canonically."""
    keys = []
    for key in sorted(region.state.keys):
        ks = region.state.keys[key]
        groups = []
        for name in sorted(ks.groups):
            g = ks.groups[name]
            pel = [(k, e.consumer, e.delivery_time, e.delivery_count) for k, e in g.pel.items()]
            consumers = sorted(
                (c.name, c.seen_time, sorted(c.pending)) for c in g.consumers.values()
            )
            groups.append(
                (
                    name,
                    g.default_cursor,
                    sorted(g.cursors.items()),
                    g.entries_read,
                    sorted(g.ack_sent.items()),
                    pel,
                    consumers,
                )
            )
        entries = list(ks.entries.range(MIN_ID, (2**64 - 1, 2**64 - 1)))
        keys.append(
            (
                key,
                entries,
                ks.entries.length,
                ks.last_id,
                ks.entries_added,
                ks.max_deleted_id,
                sorted(ks.del_tombstones),
                sorted((n, sorted(d)) for n, d in ks.group_tombstones.items()),
                groups,
            )
        )
    return keys, sorted(region.causal.applied.items()), region.local_seq


def random_command(rng: random.Random, ids: list[bytes]) -> list[bytes]:
    key = rng.choice(KEYS)
    some_id = rng.choice(ids) if ids else b"0-1"
    choices = [
        [b"XADD", key, b"*", b"f", b"%d" % rng.randrange(100)],
        [b"XADD", key, b"*", b"f", b"v"],
        [b"XADD", key, b"MAXLEN", b"3", b"*", b"f", b"t"],
        [b"XDEL", key, some_id],
        [b"XTRIM", key, b"MAXLEN", b"2"],
        [b"DEL", key],
        [b"XGROUP", b"CREATE", key, b"g", b"0", b"MKSTREAM"],
        [b"XREADGROUP", b"GROUP", b"g", b"c%d" % rng.randrange(2), b"COUNT", b"2"]
        + [b"STREAMS", key, b">"],
        [b"XACK", key, b"g", some_id],
        [b"XCLAIM", key, b"g", b"c9", b"0", some_id],
        [b"XGROUP", b"DESTROY", key, b"g"],
        [b"XGROUP", b"SETID", key, b"g", b"0"],
        [b"XSETID", key, b"99999999999999-0"],
    ]
    return rng.choice(choices)


def execute(replica: Replica, journal: Journal, args: list[bytes], now_ms: int) -> None:
    """What ShardSet does for one command: run it, then number, apply and note its ops."""
    cmd = router.resolve(args)
    assert not isinstance(cmd, str)
    result = run(cmd, replica.context(now_ms), args)
    if isinstance(result.reply, CommandError) or not result.effects:
        return
    replica.apply(replica.prepare(result.effects, now_ms), journal)


def batch(replica: Replica, rng: random.Random, size: int, now: list[int]) -> Journal:
    journal = Journal(replica.region)
    for _ in range(size):
        ids = [
            b"%d-%d" % sid
            for ks in replica.region.state.keys.values()
            for sid, _o, _f in ks.entries.range(MIN_ID, (2**64 - 1, 2**64 - 1))
        ]
        now[0] += rng.randrange(1, 5)
        execute(replica, journal, random_command(rng, ids), now[0])
    return journal


@pytest.mark.parametrize("seed", range(40))
def test_undoing_failed_batches_restores_the_state_before_them(seed: int) -> None:
    rng = random.Random(seed)
    replica = Replica(1, IdMode.STRICT, Waiters())
    replica.go_live()
    now = [1_700_000_000_000]
    batch(replica, rng, 15, now)  # committed: its journal is dropped
    committed = dump(replica.region)
    failed = [batch(replica, rng, rng.randrange(1, 12), now) for _ in range(2)]
    assert dump(replica.region) != committed or all(not j.records for j in failed)
    # While they are pending, reads of the view see exactly the state before them.
    view = CommittedView(replica.region.state, failed)
    seen = Region(1, IdMode.STRICT)
    for key in set(replica.region.state.keys) | view.touched:
        ks = view.raw(key)
        if ks is not None:
            seen.state.keys[key] = ks
    assert dump(seen)[0] == committed[0]
    replica.undo(failed)
    assert dump(replica.region) == committed


def test_undo_wakes_the_blocked_readers_of_the_keys_it_changed() -> None:
    waiters = Waiters()
    replica = Replica(1, IdMode.STRICT, waiters)
    replica.go_live()
    journal = Journal(replica.region)
    execute(replica, journal, [b"XADD", b"a", b"*", b"f", b"v"], 1_700_000_000_000)

    async def blocked_then_undone() -> tuple[bool, bool]:
        on_a = asyncio.ensure_future(waiters.wait([b"a"], 5.0))
        on_b = asyncio.ensure_future(waiters.wait([b"b"], 0.2))
        await asyncio.sleep(0)  # both registered
        replica.undo([journal])
        return await on_a, await on_b

    woken_a, woken_b = asyncio.run(blocked_then_undone())
    assert (woken_a, woken_b) == (True, False)  # the reader of the key it changed, only
    assert replica.region.state.get(b"a") is None
