"""stream-cgroups.tcl's XREADGROUP ... CLAIM cases (and XREAD's refusal of CLAIM), ported one
for one (see test_stream_tcl.py)."""

from __future__ import annotations

import time

from redis8.tcl import (
    EMPTIED,
    Client,
    after,
    assert_error,
    excused,
    wait_for_blocked_clients_count,
)


def setup(r: Client, count: int, key: str = "mystream") -> None:
    r("DEL", key)
    for i in range(1, count + 1):
        r("XADD", key, f"{i}-0", "f", f"v{i}")
    r("XGROUP", "CREATE", key, "group1", "0")


def read(r: Client, consumer: str, *opts: str | int, key: str = "mystream") -> object:
    return r("XREADGROUP", "GROUP", "group1", consumer, *opts, "STREAMS", key, ">")


def messages(reply: object, at: int = 0) -> list[list[object]]:
    assert isinstance(reply, list)
    found: list[list[object]] = reply[at][1]
    return found


def test_xreadgroup_claim_field_types_are_correct(r: Client) -> None:
    """XREADGROUP CLAIM field types are correct (the idle time and delivery count are integers)"""
    setup(r, 1)
    read(r, "consumer1")
    after(100)
    raw = r.raw.call(
        [b"XREADGROUP", b"GROUP", b"group1", b"consumer2", b"CLAIM", b"50"]
        + [b"STREAMS", b"mystream", b">"]
    )
    head = b"*1\r\n*2\r\n$8\r\nmystream\r\n*1\r\n*4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$2\r\nv1\r\n:"
    assert raw.startswith(head)
    assert raw[len(head) :].split(b"\r\n")[1].startswith(b":")


def test_xreadgroup_claim_returns_unacknowledged_messages(r: Client) -> None:
    """XREADGROUP CLAIM returns unacknowledged messages"""
    setup(r, 2)
    assert len(messages(read(r, "consumer1"))) == 2
    assert r("XPENDING", "mystream", "group1")[0] == 2
    after(100)
    reply = read(r, "consumer2", "CLAIM", 50)
    assert reply[0][0] == "mystream"
    found = messages(reply)
    assert len(found) == 2
    for at, (sid, value) in enumerate((("1-0", "v1"), ("2-0", "v2"))):
        assert found[at][0] == sid and found[at][1] == ["f", value]
        assert found[at][2] >= 50 and found[at][3] == 1
    pending = r("XPENDING", "mystream", "group1", "-", "+", 10)
    assert [p[1] for p in pending] == ["consumer2", "consumer2"]
    assert [p[3] for p in pending] == [2, 2]


def test_xreadgroup_claim_respects_min_idle_time_threshold(r: Client) -> None:
    """XREADGROUP CLAIM respects min-idle-time threshold"""
    setup(r, 2)
    assert len(messages(read(r, "consumer1"))) == 2
    assert r("XPENDING", "mystream", "group1")[0] == 2
    assert read(r, "consumer2", "CLAIM", 100) == ""


def test_xreadgroup_claim_with_count_limit(r: Client) -> None:
    """XREADGROUP CLAIM with COUNT limit"""
    setup(r, 3)
    assert len(messages(read(r, "consumer1"))) == 3
    after(100)
    found = messages(read(r, "consumer2", "COUNT", 2, "CLAIM", 50))
    assert [m[0] for m in found] == ["1-0", "2-0"]
    assert all(m[2] >= 50 and m[3] == 1 for m in found)


@excused(EMPTIED)
def test_xreadgroup_claim_without_messages(r: Client) -> None:
    """XREADGROUP CLAIM without messages"""
    r("DEL", "mystream")
    r("XADD", "mystream", "1-0", "f", "v1")
    r("XDEL", "mystream", "1-0")
    r("XGROUP", "CREATE", "mystream", "group1", "0")
    assert read(r, "consumer1", "CLAIM", 100) == ""


def test_xreadgroup_claim_without_pending_messages(r: Client) -> None:
    """XREADGROUP CLAIM without pending messages"""
    setup(r, 2)
    found = messages(read(r, "consumer1", "CLAIM", 100))
    assert found == [["1-0", ["f", "v1"], 0, 0], ["2-0", ["f", "v2"], 0, 0]]


def test_xreadgroup_claim_message_response_format(r: Client) -> None:
    """XREADGROUP CLAIM message response format"""
    setup(r, 2)
    first = messages(read(r, "consumer1", "COUNT", 1))
    assert len(first) == 1 and len(first[0]) == 2
    after(100)
    found = messages(read(r, "consumer2", "CLAIM", 50))
    assert found[0][:2] == ["1-0", ["f", "v1"]] and found[0][2] >= 50 and found[0][3] == 1
    assert found[1] == ["2-0", ["f", "v2"], 0, 0]


def test_xreadgroup_claim_delivery_count(r: Client) -> None:
    """XREADGROUP CLAIM delivery count"""
    setup(r, 1)
    read(r, "consumer1")
    after(100)
    assert messages(read(r, "consumer2", "CLAIM", 50))[0][3] == 1
    for _ in range(2):
        after(100)
        read(r, "consumer3", "CLAIM", 50)
    after(100)
    assert messages(read(r, "consumer3", "CLAIM", 50))[0][3] == 4
    after(100)
    read(r, "consumer4", "CLAIM", 50)
    after(100)
    assert messages(read(r, "consumer5", "CLAIM", 50))[0][3] == 6


def test_xreadgroup_claim_idle_time(r: Client) -> None:
    """XREADGROUP CLAIM idle time"""
    setup(r, 1)
    read(r, "consumer1")
    for wait, consumer, min_idle in ((100, "consumer2", 50), (70, "consumer3", 60)):
        after(wait)
        assert messages(read(r, consumer, "CLAIM", min_idle))[0][2] >= min_idle
    for wait, min_idle in ((80, 70), (20, 10)):
        after(wait)
        assert messages(read(r, "consumer3", "CLAIM", min_idle))[0][2] >= min_idle


def test_xreadgroup_claim_with_noack(r: Client) -> None:
    """XREADGROUP CLAIM with NOACK"""
    setup(r, 2)
    after(100)
    assert len(messages(read(r, "consumer1", "NOACK", "CLAIM", 50))) == 2
    assert r("XPENDING", "mystream", "group1")[0] == 0
    assert read(r, "consumer1", "NOACK", "CLAIM", 50) == ""


def test_xreadgroup_claim_with_noack_and_pending_messages(r: Client) -> None:
    """XREADGROUP CLAIM with NOACK and pending messages"""
    setup(r, 2)
    read(r, "consumer1", "COUNT", 1)
    assert r("XPENDING", "mystream", "group1")[0] == 1
    after(100)
    assert len(messages(read(r, "consumer1", "NOACK", "CLAIM", 50))) == 2
    assert r("XPENDING", "mystream", "group1")[0] == 1
    after(100)
    found = messages(read(r, "consumer1", "NOACK", "CLAIM", 50))
    assert len(found) == 1 and found[0][0] == "1-0"


def test_xreadgroup_claim_with_multiple_streams(r: Client) -> None:
    """XREADGROUP CLAIM with multiple streams"""
    keys = ("mystream{t}1", "mystream{t}2", "mystream{t}3")
    for n, key in enumerate(keys):
        r("DEL", key)
        r("XADD", key, f"{2 * n + 1}-0", "f", "v1")
        r("XADD", key, f"{2 * n + 2}-0", "f", "v2")
        r("XGROUP", "CREATE", key, "group1", "0")
    r("XREADGROUP", "GROUP", "group1", "consumer1", "COUNT", 1, "STREAMS", *keys, ">", ">", ">")
    after(100)
    reply = r(
        *("XREADGROUP", "GROUP", "group1", "consumer1", "CLAIM", 50, "STREAMS"),
        *keys,
        *(">", ">", ">"),
    )
    for n, key in enumerate(keys):
        assert reply[n][0] == key
        found = messages(reply, n)
        assert [(m[0], m[3]) for m in found] == [(f"{2 * n + 1}-0", 1), (f"{2 * n + 2}-0", 0)]


def test_xreadgroup_claim_with_min_idle_time_equal_to_zero(r: Client) -> None:
    """XREADGROUP CLAIM with min-idle-time equal to zero"""
    setup(r, 2)
    read(r, "consumer1", "COUNT", 1)
    found = messages(read(r, "consumer1", "CLAIM", 0))
    assert [(m[0], m[3]) for m in found] == [("1-0", 1), ("2-0", 0)]


def test_xreadgroup_claim_with_large_min_idle_time(r: Client) -> None:
    """XREADGROUP CLAIM with large min-idle-time"""
    setup(r, 2)
    read(r, "consumer1", "COUNT", 1)
    after(100)
    found = messages(read(r, "consumer1", "CLAIM", "9223372036854775807"))
    assert [(m[0], m[3]) for m in found] == [("2-0", 0)]


def test_xreadgroup_claim_with_not_integer_for_min_idle_time(r: Client) -> None:
    """XREADGROUP CLAIM with not integer for min-idle-time"""
    setup(r, 2)
    read(r, "consumer1", "COUNT", 1)
    for bad in ("test", "5.5", "5,5", "10e", "+10", "*10", "10/2", "10*2", "10€"):
        assert_error(
            "*ERR min-idle-time is not an integer*",
            r,
            *("XREADGROUP", "GROUP", "group1", "consumer1", "CLAIM", bad.encode()),
            *("STREAMS", "mystream", ">"),
        )


def test_xreadgroup_claim_with_negative_integer_for_min_idle_time(r: Client) -> None:
    """XREADGROUP CLAIM with negative integer for min-idle-time"""
    setup(r, 2)
    read(r, "consumer1", "COUNT", 1)
    group = ("XREADGROUP", "GROUP", "group1", "consumer1", "CLAIM")
    for bad in ("-10", "-42"):
        assert_error(
            "*ERR min-idle-time must be a positive integer*",
            r,
            *group,
            bad,
            "STREAMS",
            "mystream",
            ">",
        )
    for bad in ("-0", "-5.5", "-5,5", "-10e", "-10/2", "-10*2", "(-10)*2"):
        assert_error(
            "*ERR min-idle-time is not an integer*", r, *group, bad, "STREAMS", "mystream", ">"
        )


def test_xreadgroup_claim_with_different_position(r: Client) -> None:
    """XREADGROUP CLAIM with different position"""
    setup(r, 2)
    read(r, "consumer1", "COUNT", 1)
    orders = (
        ("GROUP", "group1", "consumer1", "COUNT", 1, "CLAIM", 50),
        ("GROUP", "group1", "consumer1", "CLAIM", 50, "COUNT", 1),
        ("GROUP", "group1", "consumer1", "CLAIM", 50, "COUNT", 1, "CLAIM", 60),
        ("CLAIM", 50, "GROUP", "group1", "consumer1", "COUNT", 1),
    )
    for count, opts in enumerate(orders, 1):
        after(100)
        found = messages(r("XREADGROUP", *opts, "STREAMS", "mystream", ">"))
        assert [(m[0], m[3]) for m in found] == [("1-0", count)]
    x = ("XREADGROUP", "GROUP", "group1")
    not_int = "*ERR min-idle-time is not an integer*"
    assert_error(
        not_int, r, *x, "consumer1", "CLAIM", 10, "CLAIM", "COUNT", 1, "STREAMS", "mystream", ">"
    )
    assert_error(
        not_int,
        r,
        "XREADGROUP",
        "CLAIM",
        "GROUP",
        "group1",
        "consumer1",
        "COUNT",
        1,
        "STREAMS",
        "mystream",
        ">",
    )
    assert_error(
        "*NOGROUP No such key*",
        r,
        *x,
        "consumer1",
        "COUNT",
        1,
        "STREAMS",
        "mystream",
        "CLAIM",
        50,
        ">",
    )
    assert_error(
        "*ERR Unbalanced*", r, *x, "consumer1", "COUNT", 1, "STREAMS", "mystream", "CLAIM", ">"
    )
    assert_error(
        "*ERR Invalid stream ID*",
        r,
        *x,
        "consumer1",
        "COUNT",
        1,
        "STREAMS",
        "mystream",
        ">",
        "CLAIM",
        50,
    )
    assert_error(
        "*ERR Unbalanced*", r, *x, "consumer1", "COUNT", 1, "STREAMS", "mystream", ">", "CLAIM"
    )
    assert_error("*ERR syntax error*", r, *x, "CLAIM", 50, "consumer1", "STREAMS", "mystream", ">")
    assert_error(not_int, r, *x, "consumer1", "CLAIM", "STREAMS", "mystream", ">")


def test_xreadgroup_claim_with_specific_id(r: Client) -> None:
    """XREADGROUP CLAIM with specific ID"""
    setup(r, 3)
    read(r, "consumer1")
    after(100)
    reply = r("XREADGROUP", "GROUP", "group1", "consumer1", "CLAIM", 1000, "STREAMS", "mystream", 0)
    found = messages(reply)
    assert len(found) == 3 and len(found[0]) == 2


def test_xreadgroup_claim_on_non_existing_consumer_group(r: Client) -> None:
    """XREADGROUP CLAIM on non-existing consumer group"""
    setup(r, 3)
    read(r, "consumer1")
    after(100)
    assert_error(
        "*NOGROUP No such key*",
        r,
        *("XREADGROUP", "GROUP", "not_existing_group", "consumer1", "CLAIM", 50),
        *("STREAMS", "mystream", ">"),
    )


def test_xreadgroup_claim_on_non_existing_consumer(r: Client) -> None:
    """XREADGROUP CLAIM on non-existing consumer"""
    setup(r, 3)
    read(r, "consumer1")
    after(100)
    assert len(messages(read(r, "consumer2", "CLAIM", 50))) == 3


def test_xreadgroup_claim_verify_ownership_transfer_and_delivery_count_updates(r: Client) -> None:
    """XREADGROUP CLAIM verify ownership transfer and delivery count updates"""
    setup(r, 3)
    read(r, "consumer1")
    after(100)
    assert len(messages(read(r, "consumer2", "CLAIM", 50))) == 3
    pending = r("XPENDING", "mystream", "group1", "-", "+", 10)
    assert [(p[0], p[1], p[3]) for p in pending] == [
        ("1-0", "consumer2", 2),
        ("2-0", "consumer2", 2),
        ("3-0", "consumer2", 2),
    ]


def test_xreadgroup_claim_verify_xack_removes_messages_from_claim_pool(r: Client) -> None:
    """XREADGROUP CLAIM verify XACK removes messages from CLAIM pool"""
    setup(r, 3)
    read(r, "consumer1")
    r("XACK", "mystream", "group1", "1-0", "3-0")
    after(100)
    found = messages(read(r, "consumer2", "CLAIM", 50))
    assert [m[0] for m in found] == ["2-0"]
    r("XACK", "mystream", "group1", "2-0")
    after(100)
    assert read(r, "consumer2", "CLAIM", 50) == ""


def test_xreadgroup_claim_verify_that_xclaim_updates_delivery_count(r: Client) -> None:
    """XREADGROUP CLAIM verify that XCLAIM updates delivery count"""
    setup(r, 3)
    read(r, "consumer1")
    after(100)
    r("XCLAIM", "mystream", "group1", "consumer3", 50, "2-0", "3-0")
    after(100)
    found = messages(read(r, "consumer2", "CLAIM", 50))
    assert [(m[0], m[3]) for m in found] == [("1-0", 1), ("2-0", 2), ("3-0", 2)]


def test_xreadgroup_claim_verify_forced_entries_are_claimable(r: Client) -> None:
    """XREADGROUP CLAIM verify forced entries are claimable"""
    setup(r, 3)
    r("XCLAIM", "mystream", "group1", "consumer3", 0, "1-0", "2-0", "FORCE", "JUSTID")
    found = messages(read(r, "consumer2", "CLAIM", 0, "COUNT", 2))
    assert [(m[0], m[3]) for m in found] == [("1-0", 1), ("2-0", 1)]


def test_xreadgroup_claim_with_block_zero(r: Client) -> None:
    """XREADGROUP CLAIM with BLOCK zero"""
    setup(r, 3)
    read(r, "consumer1")
    assert read(r, "consumer1", "BLOCK", 1) == ""
    assert read(r, "consumer1", "BLOCK", 100, "CLAIM", 500) == ""
    after(100)
    assert len(messages(read(r, "consumer1", "BLOCK", 10000, "CLAIM", 50))) == 3
    after(100)
    assert len(messages(read(r, "consumer1", "BLOCK", 0, "CLAIM", 50))) == 3


def test_xreadgroup_claim_messages_become_claimable_during_block(r: Client) -> None:
    """XREADGROUP CLAIM messages become claimable during block"""
    setup(r, 1)
    read(r, "consumer1")
    rd = r.deferring()
    rd.send(
        *("XREADGROUP", "GROUP", "group1", "consumer2", "BLOCK", 5000, "CLAIM", 1000),
        *("STREAMS", "mystream", ">"),
    )
    wait_for_blocked_clients_count(r, 1)
    after(1500)
    assert len(rd.read()) == 1
    rd.close()


def test_xreadgroup_claim_block_times_out_with_no_claimable_messages(r: Client) -> None:
    """XREADGROUP CLAIM block times out with no claimable messages"""
    setup(r, 1)
    read(r, "consumer1")
    start = time.monotonic()
    assert read(r, "consumer2", "BLOCK", 100, "CLAIM", 500) == ""
    assert 0.1 <= time.monotonic() - start <= 0.3


def test_xreadgroup_claim_block_with_multiple_streams_mixed_claimable(r: Client) -> None:
    """XREADGROUP CLAIM block with multiple streams, mixed claimable"""
    r("DEL", "stream{t}1", "stream{t}2")
    r("XADD", "stream{t}1", "1-0", "f", "v1")
    r("XADD", "stream{t}2", "2-0", "f", "v2")
    r("XGROUP", "CREATE", "stream{t}1", "group1", "0")
    r("XGROUP", "CREATE", "stream{t}2", "group1", "0")
    both = ("STREAMS", "stream{t}1", "stream{t}2", ">", ">")
    r("XREADGROUP", "GROUP", "group1", "consumer1", "COUNT", 1, *both)
    after(100)
    reply = r("XREADGROUP", "GROUP", "group1", "consumer2", "BLOCK", 1000, "CLAIM", 50, *both)
    assert len(reply) == 2
    assert reply[0][0] == "stream{t}1" and len(messages(reply, 0)) == 1
    assert reply[1][0] == "stream{t}2" and len(messages(reply, 1)) == 1


def test_xreadgroup_claim_claims_all_pending_immediately(r: Client) -> None:
    """XREADGROUP CLAIM claims all pending immediately"""
    setup(r, 1)
    read(r, "consumer1")
    assert len(messages(read(r, "consumer2", "BLOCK", 1000, "CLAIM", 0))) == 1


def test_xreadgroup_claim_with_block_and_noack(r: Client) -> None:
    """XREADGROUP CLAIM with BLOCK and NOACK"""
    setup(r, 1)
    read(r, "consumer1")
    after(100)
    assert len(messages(read(r, "consumer2", "BLOCK", 1000, "CLAIM", 50, "NOACK"))) == 1
    assert len(r("XPENDING", "mystream", "group1", "-", "+", 10)) == 1


def test_xreadgroup_claim_block_wakes_on_new_message_before_min_idle_time_reached(
    r: Client,
) -> None:
    """XREADGROUP CLAIM BLOCK wakes on new message before min-idle-time reached"""
    setup(r, 1)
    read(r, "consumer1")
    rd = r.deferring()
    rd.send(
        *("XREADGROUP", "GROUP", "group1", "consumer2", "BLOCK", 5000, "CLAIM", 1000),
        *("STREAMS", "mystream", ">"),
    )
    wait_for_blocked_clients_count(r, 1)
    after(100)
    r("XADD", "mystream", "2-0", "f", "v2")
    assert len(messages(rd.read())) == 1
    rd.close()
