"""The one admission step every reader of the op logs goes through (streams/kafka/records.py):
a Kafka record in, the ops the record gate admits and `continues` out, or a typed refusal.
Pure: records and bytes built here, no broker."""

from __future__ import annotations

import pytest

from streams.config import RegionConfig
from streams.crdt import ops
from streams.crdt.region import Region
from streams.kafka.gate import Refusal, UndecodableRecord, UntrustedRecord, signed
from streams.kafka.records import Admission, Skip, Trust, origin_names
from streams.ops.codec import encode, seal
from streams.ops.pack import pack, sealed_records

KEY = bytes.fromhex("11" * 32)
REGIONS = {1: "r1", 2: "r2"}


def xadd(origin: int, seq: int, value: bytes = b"v") -> ops.Op:
    return ops.Op(origin, seq, (), 1_000, ops.XAdd(b"k", (1_000, seq), (b"f", value)))


def signed_gate() -> Admission:
    return Admission(Trust(REGIONS, {1: KEY}).gate(2))


def test_a_pack_gives_its_ops_and_where_its_transaction_ends() -> None:
    r1 = Region(1)
    txn = [
        seal(r1.issue(ops.XAdd(b"k", (1_000 + i, 1), (b"i", b"%d" % i)), 1_000)) for i in range(6)
    ]
    records = sealed_records(txn, limit=3 * len(txn[0].value))
    assert len(records) == 2
    admission = Admission(Trust(REGIONS).gate(2))
    first = admission.admit("r1.oplog", 0, 0, records[0].value)
    last = admission.admit("r1.oplog", 0, 1, records[1].value)
    assert [r.seq for r in first.records] == [1, 2, 3] and first.continues == 6
    assert [r.seq for r in last.records] == [4, 5, 6] and last.continues == 0
    assert admission.skipped == 0


def test_a_signing_regions_unsigned_record_is_skipped_and_counted_not_raised() -> None:
    admission = signed_gate()
    value = encode(xadd(1, 1))
    admitted = admission.admit("r1.oplog", 0, 4, value, headers=[("origin", b"1")])
    assert admitted.items == [] and admitted.continues == 0
    (skip,) = admitted.skipped
    assert (skip.kind, skip.topic, skip.offset) == (Refusal.FORGED, "r1.oplog", 4)
    assert not skip.taints and "is not signed" in skip.reason
    assert admission.counts == {Refusal.FORGED: 1}
    assert admission.wants_headers
    good = admission.admit("r1.oplog", 0, 5, value, headers=signed([], KEY, value))
    assert [r.seq for r in good.records] == [1]


def test_a_forged_pack_is_skipped_whole() -> None:
    admission = signed_gate()
    value = pack([encode(xadd(1, 1)), encode(xadd(1, 2))])
    admitted = admission.admit("r1.oplog", 0, 0, value, headers=None)
    assert admitted.items == [] and admitted.skipped[0].kind is Refusal.FORGED


def test_an_undecodable_record_is_a_typed_refusal_that_taints_when_skipped() -> None:
    admission = Admission(Trust(REGIONS).gate(2))
    with pytest.raises(UndecodableRecord) as refused:
        admission.admit("r1.oplog", 0, 9, b"not an op")
    assert refused.value.kind is Refusal.CORRUPT and refused.value.offset == 9
    skip = admission.count(Skip.of(refused.value))
    assert skip.taints and admission.counts == {Refusal.CORRUPT: 1}


def test_an_op_in_another_regions_log_is_an_untrusted_refusal() -> None:
    admission = Admission(Trust(REGIONS).gate(2))
    with pytest.raises(UntrustedRecord) as refused:
        admission.admit("A.r1.oplog", 0, 3, encode(xadd(2, 1)))
    assert refused.value.kind is Refusal.UNTRUSTED
    assert "in the op log of region r1" in refused.value.reason
    assert Skip.of(refused.value).taints


def test_without_a_topology_the_regions_the_logs_name_still_catch_misplaced_ops_and_conflicts() -> (
    None
):
    first = [("r1.oplog", encode(xadd(1, 1))), ("r2.oplog", encode(xadd(2, 1))), ("r2.local", b"")]
    trust = Trust.from_logs(first)
    assert trust.regions == {1: "r1", 2: "r2"} and trust.learned and not trust.keys
    admission = Admission(trust.gate())
    with pytest.raises(UntrustedRecord, match="in the op log of region r1"):
        admission.admit("r1.oplog", 0, 7, encode(xadd(2, 9)))
    with pytest.raises(UntrustedRecord, match="no topology file"):
        admission.admit("r1.oplog", 0, 8, encode(xadd(7, 1)))
    admission.admit("r1.oplog", 0, 0, encode(xadd(1, 1, b"real")))
    admission.admit("r1.oplog", 0, 5, encode(xadd(1, 1, b"real")))  # a mirror's copy
    with pytest.raises(UntrustedRecord, match="dot 1:1"):
        admission.admit("r1.oplog", 0, 6, encode(xadd(1, 1, b"forged")))
    assert "signatures unchecked" in trust.describe()


def test_origin_names_pass_over_undecodable_and_local_first_records() -> None:
    names = origin_names(
        [
            ("c1.r1.oplog", encode(xadd(1, 1))),
            ("r2.oplog", b"junk"),
            ("r3.local", encode(xadd(3, 1))),
        ]
    )
    assert names == {1: "r1"}


def test_a_topology_files_regions_give_every_check_signatures_included() -> None:
    trust = Trust.of(
        [
            RegionConfig("r1", 1, "h:1", 6380, signing_key="11" * 32),
            RegionConfig("r2", 2, "h:2", 6381),
        ]
    )
    assert trust.regions == REGIONS and trust.keys == {1: KEY} and not trust.learned
    assert "signatures of r1" in trust.describe()


def test_skip_record_names_an_undecodable_record_and_withholds_a_decodable_one() -> None:
    named = frozenset({("r1.oplog", 0, 3), ("r1.oplog", 0, 4)})
    admission = Admission(Trust(REGIONS).gate(2), named)
    bad = admission.admit("r1.oplog", 0, 3, b"junk")
    assert bad.items == [] and bad.skipped[0].kind is Refusal.NAMED
    held = admission.admit("r1.oplog", 0, 4, encode(xadd(1, 1, b"forged")))
    assert held.withheld and held.items == []
    assert admission.unresolved() == [("r1.oplog", 0, 4)]
    rival = admission.admit("r1.oplog", 0, 5, encode(xadd(1, 1, b"real")))
    assert [r.seq for r in rival.records] == [1]
    assert rival.skipped[0].kind is Refusal.NAMED and rival.skipped[0].offset == 4
    assert admission.unresolved() == [] and admission.skipped == 2


def test_without_a_gate_records_are_only_decoded() -> None:
    admitted = Admission(None).admit("x.oplog", 0, 0, encode(xadd(9, 1)))
    assert [r.origin for r in admitted.records] == [9]
