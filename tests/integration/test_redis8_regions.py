"""The Redis 8 stream commands end to end on three regions with real brokers and mirrors
(`LocalTopology(regions=3, manual_sync=True)`): the rules of docs/architecture.md, "Redis 8
across regions", as a client sees them. One topology for the module, a key per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from topology.local import LocalTopology


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    with LocalTopology(regions=3, manual_sync=True) as running:
        yield running


def cmd(topo: LocalTopology, region: int, *args: str | int) -> object:
    return topo.client(region).execute_command(*args)


def ids(topo: LocalTopology, region: int, key: str) -> list[bytes]:
    return [sid for sid, _fields in topo.client(region).xrange(key)]


def digests(topo: LocalTopology) -> set[bytes]:
    return {topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 2, 3)}


def test_an_entry_pending_in_r2_survives_xtrim_acked_and_xackdel_acked_in_r1(
    topo: LocalTopology,
) -> None:
    first = cmd(topo, 1, "XADD", "acked", "*", "n", 1)
    second = cmd(topo, 1, "XADD", "acked", "*", "n", 2)
    cmd(topo, 1, "XGROUP", "CREATE", "acked", "g", "0")
    topo.sync()
    assert len(topo.client(2).xreadgroup("g", "r2-worker", {"acked": ">"})[0][1]) == 2
    topo.client(1).xreadgroup("g", "r1-worker", {"acked": ">"})
    assert cmd(topo, 1, "XACKDEL", "acked", "g", "ACKED", "IDS", 2, first, second) == [2, 2]
    assert cmd(topo, 1, "XTRIM", "acked", "MAXLEN", "=", 0, "ACKED") == 0
    topo.sync()
    for region in (1, 2, 3):
        assert ids(topo, region, "acked") == [first, second]
    assert topo.client(2).xpending("acked", "g")["pending"] == 2
    # Once r2 acknowledged them and every region announced it, ACKED deletes everywhere.
    topo.client(2).xack("acked", "g", first, second)
    topo.sync()
    topo.sync()
    assert cmd(topo, 1, "XTRIM", "acked", "MAXLEN", "=", 0, "ACKED") == 2
    topo.sync()
    for region in (1, 2, 3):
        assert ids(topo, region, "acked") == []
    assert len(digests(topo)) == 1


def test_an_idmp_retry_in_r2_returns_r1s_id_and_leaves_one_entry_everywhere(
    topo: LocalTopology,
) -> None:
    first = cmd(topo, 1, "XADD", "orders", "IDMP", "shop", "order-42", "*", "total", 10)
    topo.sync()
    retry = cmd(topo, 2, "XADD", "orders", "IDMP", "shop", "order-42", "*", "total", 10)
    assert retry == first
    topo.sync()
    for region in (1, 2, 3):
        assert ids(topo, region, "orders") == [first]
    assert len(digests(topo)) == 1


def test_concurrent_idmp_duplicates_in_r1_and_r2_converge_to_one_entry(
    topo: LocalTopology,
) -> None:
    one = cmd(topo, 1, "XADD", "pay", "IDMP", "psp", "tx-9", "*", "via", "r1")
    two = cmd(topo, 2, "XADD", "pay", "IDMP", "psp", "tx-9", "*", "via", "r2")
    assert one != two
    topo.sync()
    kept = ids(topo, 1, "pay")
    assert len(kept) == 1 and kept[0] in (one, two)
    for region in (2, 3):
        assert ids(topo, region, "pay") == kept
        assert (
            cmd(topo, region, "XADD", "pay", "IDMP", "psp", "tx-9", "*", "via", "retry")
            == (kept[0])
        )
    topo.sync()
    assert len(digests(topo)) == 1


def test_delref_and_the_idmp_window_replicate_nacks_stay_local(topo: LocalTopology) -> None:
    first = cmd(topo, 1, "XADD", "mixed", "IDMP", "p", "a", "*", "n", 1)
    cmd(topo, 1, "XADD", "mixed", "*", "n", 2)
    cmd(topo, 1, "XGROUP", "CREATE", "mixed", "g", "0")
    cmd(topo, 1, "XCFGSET", "mixed", "IDMP-DURATION", 600)
    topo.sync()
    topo.client(3).xreadgroup("g", "w3", {"mixed": ">"})
    assert cmd(topo, 3, "XNACK", "mixed", "g", "FAIL", "IDS", 1, first) == 1
    assert cmd(topo, 2, "XDELEX", "mixed", "DELREF", "IDS", 1, first) == [1]
    topo.sync()
    info = topo.client(2).xinfo_stream("mixed")
    assert info["idmp-duration"] == 600
    assert topo.client(3).xpending("mixed", "g")["pending"] == 1  # the DELREF dropped `first`
    assert topo.client(1).xpending("mixed", "g")["pending"] == 0  # r3's NACK stayed in r3
    assert len(digests(topo)) == 1


def test_a_restarted_node_keeps_idmp_history_and_nacked_entries(topo: LocalTopology) -> None:
    first = cmd(topo, 1, "XADD", "restart", "IDMP", "p", "x", "*", "n", 1)
    cmd(topo, 1, "XGROUP", "CREATE", "restart", "g", "0")
    topo.client(1).xreadgroup("g", "w", {"restart": ">"})
    cmd(topo, 1, "XNACK", "restart", "g", "FATAL", "IDS", 1, first)
    topo.kill_node(1)
    topo.start_node(1)
    assert cmd(topo, 1, "XADD", "restart", "IDMP", "p", "x", "*", "n", 2) == first
    pending = topo.client(1).xpending_range("restart", "g", "-", "+", 10)
    assert [(p["message_id"], p["consumer"], p["time_since_delivered"]) for p in pending] == [
        (first, b"", -1)
    ]
    assert pending[0]["times_delivered"] == 2**63 - 1
