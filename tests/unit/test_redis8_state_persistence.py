"""The state the Redis 8 commands add (IDMP records and window, NACKed pending entries and their
order, per-region ack frontiers) survives what Redis's RDB / AOF tests check on a server: here a
snapshot round trip (format version 3), a replay of the op logs through the fold, and the undo of
a failed batch (the node's journal)."""

from __future__ import annotations

import io

from streams.commands.execute import context, run
from streams.commands.table import dispatch
from streams.crdt.fold import Fold
from streams.crdt.region import Region
from streams.crdt.state import State
from streams.ids import IdMode
from streams.node.runtime.undo import Journal
from streams.snapshot import read_snapshot, write_snapshot


def x(region: Region, *words: str | int, at: int = 1_000) -> object:
    return run(region, [str(w).encode() for w in words], at).reply


def busy_region() -> tuple[Region, list[object]]:
    """A region after IDMP, XCFGSET, XNACK (with FORCE, RETRYCOUNT), CLAIM and acks; and its ops
    in issue order."""
    region = Region(1, IdMode.LIBERAL)
    log: list[object] = []

    def do(*words: str | int, at: int = 1_000) -> None:
        done = run(region, [str(w).encode() for w in words], at)
        log.extend(done.replicated)
        log.extend(done.local)

    do("XADD", "s", "IDMP", "p", "i1", "*", "f", 1, at=1_001)
    do("XCFGSET", "s", "IDMP-MAXSIZE", 50)  # a new window: i1 is forgotten (kept, cleared)
    for n in range(2, 5):
        do("XADD", "s", "IDMP", "p", f"i{n}", "*", "f", n, at=1_000 + n)
    do("XADD", "s", "IDMPAUTO", "q", "*", "a", "b", at=1_100)
    do("XGROUP", "CREATE", "s", "g", "0")
    do("XGROUP", "CREATE", "s", "h", "0")
    do("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">", at=1_200)
    do("XNACK", "s", "g", "FAIL", "IDS", 2, "1004-0", "1002-0")
    do("XNACK", "s", "h", "FATAL", "IDS", 1, "1003-0", "RETRYCOUNT", 77, "FORCE")
    do("XACK", "s", "g", "1001-0")
    log.extend(region.flush_acks(1_300))
    return region, log


def local_view(state: State) -> object:
    ks = state.raw(b"s")
    assert ks is not None and ks.idmp is not None
    groups = {
        name: (
            [
                (k, p.consumer, p.delivery_time, p.delivery_count, p.nack_order)
                for k, p in g.pel.items()
            ],
            g.nack_seq,
            g.region_acks,
        )
        for name, g in sorted(ks.groups.items())
    }
    idmp = ks.idmp
    records = [(p, i, r.entry(), r.dot, r.ts_ms, r.cleared, r.lost) for p, i, r in idmp.records()]
    return groups, records, idmp.config, idmp.added, idmp.duplicates, idmp.tracked(1_400)


def test_a_snapshot_keeps_idmp_nacks_and_announced_frontiers() -> None:
    region, _log = busy_region()
    buf = io.BytesIO()
    write_snapshot(region, {("r1.oplog", 0): 1}, buf)
    back, _positions, _meta = read_snapshot(io.BytesIO(buf.getvalue()))
    assert local_view(back.state) == local_view(region.state)
    assert x(back, "XADD", "s", "IDMP", "p", "i3", "*", "f", "again", at=1_500) == b"1003-0"
    claimed = x(back, "XREADGROUP", "GROUP", "g", "c2", "COUNT", 1, "CLAIM", 0, "STREAMS", "s", ">")
    assert claimed.pairs[0][1][0][0] == b"1004-0"  # type: ignore[attr-defined]


def test_a_replay_of_the_logs_rebuilds_the_same_state() -> None:
    region, log = busy_region()
    fold = Fold.fresh(1, IdMode.LIBERAL)
    locals_first = sorted(log, key=lambda r: 0 if hasattr(r, "region") else 1)
    for n, record in enumerate(locals_first):
        fold.feed(("t", 0), n, record)  # type: ignore[arg-type]
    fold.finish()
    assert local_view(fold.region.state) == local_view(region.state)


def test_undoing_a_batch_of_idmp_and_nack_ops_restores_the_state() -> None:
    region = busy_region()[0]
    before = local_view(region.state)
    digest = region.state.digest()
    journal = Journal(region)
    for words in (
        ("XADD", "s", "IDMP", "p", "i9", "*", "f", "v"),
        ("XADD", "s", "IDMP", "p", "i3", "*", "f", "dup"),
        ("XNACK", "s", "g", "SILENT", "IDS", 1, "1003-0"),
        ("XCFGSET", "s", "IDMP-DURATION", 9),
    ):
        result = dispatch(context(region, 2_000), [str(w).encode() for w in words])
        replicated, local = region.number_all(result.effects, 2_000)
        assert replicated or local
        for op in replicated:
            journal.before(region.state, op)
        for record in local:
            journal.before_local(region.state, record)
        region.apply_issued(replicated, local)
    assert local_view(region.state) != before
    journal.undo(region)
    assert local_view(region.state) == before
    assert region.state.digest() == digest
