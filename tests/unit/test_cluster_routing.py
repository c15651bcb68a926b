"""`streams.cluster.routing`: run here, MOVED or CROSSSLOT, as Redis Cluster's getNodeByQuery.

The texts are checked against a real cluster in tests/differential/test_cluster_vs_redis.py; here
the decision is checked against a model over many layouts and key sets.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams import errors
from streams.cluster import Layout, redirect, redirect_command, redirect_exec
from streams.errors import CommandError
from streams.slots import key_slot

TWO = Layout.build("r1", 2, [("127.0.0.1", 7001), ("10.1.2.3", 7002)], myself=0)
CROSSSLOT = CommandError(errors.CROSSSLOT)
# b 3300 and {b}x 3300, c 7365: node 0; a 15495 and {a}z 15495, d 11298: node 1
XADD = [b"*", b"f", b"v"]


def test_no_keys_run_here() -> None:
    assert redirect(TWO, []) is None
    assert redirect_command(TWO, "ping", [b"PING"]) is None
    assert redirect_command(TWO, "keys", [b"KEYS", b"*"]) is None


def test_keys_of_one_local_slot_run_here() -> None:
    assert redirect(TWO, [b"b", b"{b}x", b"b"]) is None
    assert redirect_command(TWO, "xadd", [b"XADD", b"c", *XADD]) is None


def test_a_foreign_slot_is_moved_to_its_owner() -> None:
    assert redirect(TWO, [b"a"]) == CommandError("MOVED 15495 10.1.2.3:7002")
    assert redirect(TWO, [b"a", b"{a}z", b"a"]) == CommandError("MOVED 15495 10.1.2.3:7002")
    seen_from_1 = Layout.build("r1", 2, [("127.0.0.1", 7001), ("10.1.2.3", 7002)], myself=1)
    assert redirect(seen_from_1, [b"b"]) == CommandError("MOVED 3300 127.0.0.1:7001")


def test_crossslot_wins_over_moved_whatever_comes_first() -> None:
    assert redirect(TWO, [b"a", b"b"]) == CROSSSLOT
    assert redirect(TWO, [b"a", b"d"]) == CROSSSLOT
    assert redirect(TWO, [b"b", b"c"]) == CROSSSLOT


def test_xread_is_routed_by_its_stream_keys_only() -> None:
    args = [b"XREADGROUP", b"GROUP", b"a", b"d", b"STREAMS", b"b", b"{b}x", b">", b">"]
    assert redirect_command(TWO, "xreadgroup", args) is None
    assert redirect_command(TWO, "xread", [b"XREAD", b"STREAMS", b"a", b"b", b"0", b"0"]) == (
        CROSSSLOT
    )
    assert redirect_command(TWO, "xread", [b"XREAD", b"STREAMS", b"a", b"b", b"0"]) is None


def test_exec_checks_the_whole_queue_together() -> None:
    assert redirect_exec(TWO, []) is None
    queue = [("xadd", [b"XADD", b"b", *XADD]), ("xlen", [b"XLEN", b"{b}x"]), ("ping", [b"PING"])]
    assert redirect_exec(TWO, queue) is None
    assert redirect_exec(TWO, [*queue, ("xlen", [b"XLEN", b"c"])]) == CROSSSLOT
    assert redirect_exec(TWO, [("xlen", [b"XLEN", b"a"])]) == CommandError(
        "MOVED 15495 10.1.2.3:7002"
    )


@given(
    st.integers(1, 40),
    st.integers(0, 2),
    st.lists(st.binary(max_size=6) | st.sampled_from([b"{t}1", b"{t}2", b"t"]), max_size=5),
)
def test_redirect_matches_the_model(shards: int, me: int, keys: list[bytes]) -> None:
    endpoints = [("127.0.0.1", 7000 + i) for i in range(min(3, shards))]
    layout = Layout.build("r", shards, endpoints, myself=me % len(endpoints))
    slots = {key_slot(k) for k in keys}
    got = redirect(layout, keys)
    if len(slots) > 1:
        assert got == CROSSSLOT
    elif not slots or layout.owner(slots.pop()) is layout.me:
        assert got is None
    else:
        slot = key_slot(keys[0])
        owner = layout.owner(slot)
        assert got == CommandError(f"MOVED {slot} 127.0.0.1:{owner.port}")
