"""Another region's transaction is applied whole, however a mirror hands its records over
(`streams.crdt.fold` assembles it, `streams.crdt.causal` releases it as one unit; the packs say
where a transaction ends, `streams.ops.pack`)."""

from __future__ import annotations

from streams.crdt import ops
from streams.crdt.fold import Fold
from streams.crdt.region import Region
from streams.ops.codec import decode, seal
from streams.ops.pack import decode_record, sealed_records

T = 1_000


def _transaction(region: Region, n: int, key: bytes = b"s") -> list[ops.Op]:
    return [region.issue(ops.XAdd(key, (T + i, 1), (b"i", b"%d" % i)), T) for i in range(n)]


def _xlen(fold: Fold, key: bytes = b"s") -> int:
    ks = fold.region.state.get(key)
    return 0 if ks is None else ks.entries.length


def test_a_transaction_fed_in_pieces_is_applied_only_once_its_last_op_arrived() -> None:
    r1 = Region(1)
    txn = _transaction(r1, 10)
    fold = Fold(Region(2))
    for i, op in enumerate(txn[:6]):  # the first record: the transaction goes on to seq 10
        fold.feed(("r1.oplog", 0), 0, op, txn_last=10)
        assert _xlen(fold) == 0, i
    assert fold.assembling == 6
    for op in txn[6:9]:  # the last record: complete by itself (txn_last 0)
        fold.feed(("r1.oplog", 0), 1, op)
        assert _xlen(fold) == 0
    fold.feed(("r1.oplog", 0), 1, txn[9])
    assert _xlen(fold) == 10 and fold.assembling == 0
    assert fold.region.causal.applied == {1: 10}


def test_positions_stay_before_a_transaction_being_assembled() -> None:
    r1 = Region(1)
    txn = _transaction(r1, 4)
    fold = Fold(Region(2))
    fold.feed(("r1.oplog", 0), 7, txn[0], txn_last=4)
    fold.feed(("r1.oplog", 0), 7, txn[1], txn_last=4)
    assert fold.safe_positions() == {("r1.oplog", 0): 7}
    fold.feed(("r1.oplog", 0), 8, txn[2])
    fold.feed(("r1.oplog", 0), 8, txn[3])
    assert fold.safe_positions() == {("r1.oplog", 0): 9}


def test_copies_of_a_transactions_first_record_are_absorbed() -> None:
    """MirrorMaker 2 copies at least once: the first record again after a restart, at a new
    offset, then the rest."""
    r1 = Region(1)
    txn = _transaction(r1, 6)
    fold = Fold(Region(2))
    for offset in (0, 1):
        for op in txn[:3]:
            fold.feed(("r1.oplog", 0), offset, op, txn_last=6)
    assert _xlen(fold) == 0
    for op in txn[3:]:
        fold.feed(("r1.oplog", 0), 2, op)
    assert _xlen(fold) == 6
    assert fold.safe_positions() == {("r1.oplog", 0): 3}
    for op in txn:  # the whole transaction once more: duplicates of applied ops
        fold.feed(("r1.oplog", 0), 3, op, txn_last=6 if op.seq < 4 else 0)
    assert _xlen(fold) == 6 and fold.assembling == 0


def test_a_transaction_waits_whole_for_what_its_later_ops_had_seen() -> None:
    """r1 applied r3's op between two commands of one batch: the batch's later ops carry it in
    their context. In r2, where r3's op has not arrived, none of the batch may show."""
    r1, r3 = Region(1), Region(3)
    first = r1.issue(ops.XAdd(b"a", (T, 1), (b"f", b"1")), T)
    from_r3 = r3.issue(ops.XAdd(b"x", (T, 3), (b"f", b"3")), T)
    r1.receive(from_r3)
    second = r1.issue(ops.XAdd(b"b", (T + 1, 1), (b"f", b"2")), T)
    fold = Fold(Region(2))
    fold.feed(("r1.oplog", 0), 0, first, txn_last=2)
    fold.feed(("r1.oplog", 0), 1, second)
    assert _xlen(fold, b"a") == 0 and _xlen(fold, b"b") == 0  # held whole
    fold.feed(("r3.oplog", 0), 0, from_r3)
    assert (_xlen(fold, b"a"), _xlen(fold, b"b"), _xlen(fold, b"x")) == (1, 1, 1)


def test_the_own_regions_log_is_read_as_written() -> None:
    """At home, Kafka's read_committed shows a transaction whole: no assembly there."""
    r1 = Region(1)
    txn = _transaction(r1, 3)
    fold = Fold(Region(1))
    fold.feed(("r1.oplog", 0), 0, txn[0], txn_last=3)
    assert _xlen(fold) == 1


def test_a_transaction_whose_end_never_comes_is_applied_when_its_origin_moves_on() -> None:
    """A log holding part of an aborted transaction (a broker that shows aborted records) and
    then the origin's next ops: what was read is applied, counted as torn."""
    r1 = Region(1)
    txn = _transaction(r1, 3)
    fold = Fold(Region(2))
    fold.feed(("r1.oplog", 0), 0, txn[0], txn_last=2)
    fold.feed(("r1.oplog", 0), 1, txn[2])  # seq 3, past the announced end (2)
    assert fold.torn == 1
    assert _xlen(fold) == 1  # seq 1 applied; seq 3 waits for seq 2, which never came


def test_a_batch_over_the_pack_limit_goes_as_packs_that_say_where_it_ends() -> None:
    r1 = Region(1)
    txn = [
        r1.issue(ops.XAdd(b"s", (T + i, 1), (b"v", bytes([i % 256]) * 3000)), T) for i in range(40)
    ]
    records = sealed_records([seal(op) for op in txn], limit=32 * 1024)
    assert len(records) > 2
    seen: list[ops.Op] = []
    for i, record in enumerate(records):
        each, continues = decode_record(record.value)
        assert continues == (40 if i < len(records) - 1 else 0)
        seen += [r for _b, r in each if isinstance(r, ops.Op)]
        assert dict(record.headers)["txn_last"] == b"40"
    assert [op.seq for op in seen] == list(range(1, 41))
    one = sealed_records([seal(op) for op in txn[:3]])
    assert len(one) == 1 and decode_record(one[0].value)[1] == 0
    single = sealed_records([seal(txn[0])])
    assert decode(single[0].value) == txn[0]  # one op: a plain record, as before
