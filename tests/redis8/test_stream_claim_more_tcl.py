"""The rest of stream-cgroups.tcl's XREADGROUP ... CLAIM cases (ordering, SETID, DELCONSUMER,
trims, transactions, blocked clients, XREAD's refusal), ported one for one (see
test_stream_tcl.py)."""

from __future__ import annotations

from redis8.tcl import Client, after, assert_error, wait_for_blocked_clients_count


def setup(r: Client, count: int) -> None:
    r("DEL", "mystream")
    for i in range(1, count + 1):
        r("XADD", "mystream", f"{i}-0", "f", f"v{i}")
    r("XGROUP", "CREATE", "mystream", "group1", "0")


def read(r: Client, consumer: str, *opts: str | int) -> object:
    return r("XREADGROUP", "GROUP", "group1", consumer, *opts, "STREAMS", "mystream", ">")


def messages(reply: object) -> list[list[object]]:
    assert isinstance(reply, list)
    found: list[list[object]] = reply[0][1]
    return found


def test_xreadgroup_claim_with_two_blocked_clients(r: Client) -> None:
    """XREADGROUP CLAIM with two blocked clients"""
    r("DEL", "mystream")
    r("XADD", "mystream", "1-0", "f", "v1")
    r("XDEL", "mystream", "1-0")
    r("XGROUP", "CREATE", "mystream", "group1", "0", "MKSTREAM")
    rd1, rd2 = r.deferring(), r.deferring()
    for rd, consumer in ((rd1, "consumer1"), (rd2, "consumer2")):
        rd.send(
            *("XREADGROUP", "GROUP", "group1", consumer, "BLOCK", 0, "CLAIM", 100),
            *("STREAMS", "mystream", ">"),
        )
    wait_for_blocked_clients_count(r, 2)
    r("XADD", "mystream", "2-0", "f", "v2")
    assert len(rd1.read()) == 1
    assert len(rd2.read()) == 1
    rd1.close()
    rd2.close()


def test_xreadgroup_claim_verify_claiming_order(r: Client) -> None:
    """XREADGROUP CLAIM verify claiming order"""
    setup(r, 6)
    read(r, "consumer1", "COUNT", 10)
    seconds, micros = r("TIME")
    now = int(seconds) * 1000 + int(micros) // 1000
    for n, back in enumerate((50000, 40000, 30000, 20000, 2000, 1000), 1):
        r("XCLAIM", "mystream", "group1", "consumer1", 0, f"{n}-0", "TIME", now - back, "JUSTID")
    found = messages(read(r, "consumer2", "CLAIM", 10000, "COUNT", 10))
    assert [m[0] for m in found] == ["1-0", "2-0", "3-0", "4-0"]
    assert [m[0] for m in messages(read(r, "consumer2", "CLAIM", 1500, "COUNT", 10))] == ["5-0"]
    assert [m[0] for m in messages(read(r, "consumer2", "CLAIM", 500, "COUNT", 10))] == ["6-0"]


def test_xreadgroup_claim_after_consumer_deleted_with_pending_messages(r: Client) -> None:
    """XREADGROUP CLAIM after consumer deleted with pending messages"""
    setup(r, 1)
    read(r, "consumer1")
    r("XGROUP", "DELCONSUMER", "mystream", "group1", "consumer1")
    assert r("XPENDING", "mystream", "group1", "-", "+", 10) == []
    after(100)
    assert read(r, "consumer2", "CLAIM", 50) == ""


def test_xreadgroup_claim_after_xgroup_setid_moves_past_pending_messages(r: Client) -> None:
    """XREADGROUP CLAIM after XGROUP SETID moves past pending messages"""
    setup(r, 2)
    read(r, "consumer1")
    r("XGROUP", "SETID", "mystream", "group1", "2-0")
    after(100)
    assert len(messages(read(r, "consumer2", "CLAIM", 50))) == 2


def test_xreadgroup_claim_after_xgroup_setid_moves_before_pending_messages(r: Client) -> None:
    """XREADGROUP CLAIM after XGROUP SETID moves before pending messages"""
    setup(r, 2)
    read(r, "consumer1")
    read(r, "consumer2", "CLAIM", 0)
    r("XGROUP", "SETID", "mystream", "group1", "0")
    after(100)
    found = messages(read(r, "consumer2", "CLAIM", 50))
    assert [(m[0], m[3]) for m in found] == [("1-0", 2), ("2-0", 2), ("1-0", 0), ("2-0", 0)]
    after(100)
    found = messages(read(r, "consumer2", "CLAIM", 50))
    assert [(m[0], m[3]) for m in found] == [("1-0", 1), ("2-0", 1)]


def test_xreadgroup_claim_when_pending_messages_get_trimmed(r: Client) -> None:
    """XREADGROUP CLAIM when pending messages get trimmed (the group keeps the key alive here)"""
    setup(r, 3)
    read(r, "consumer1")
    r("XTRIM", "mystream", "MAXLEN", 0)
    after(100)
    assert read(r, "consumer2", "CLAIM", 50) == ""


def test_xreadgroup_claim_usage_stability_with_repeated_claims(r: Client) -> None:
    """XREADGROUP CLAIM usage stability with repeated claims (300 of Redis's 1000 rounds: the
    node's commit per claim makes a round slower than redis-server's)"""
    setup(r, 1)
    read(r, "consumer1")
    for i in range(300):
        after(2)
        read(r, f"consumer{i % 10 + 1}", "CLAIM", 1)
    assert r("XPENDING", "mystream", "group1")[0] == 1


def test_xreadgroup_claim_with_large_number_of_pel_messages(r: Client) -> None:
    """XREADGROUP CLAIM with large number of PEL messages"""
    r("DEL", "mystream")
    r("XGROUP", "CREATE", "mystream", "group1", "0", "MKSTREAM")
    r("MULTI")
    for i in range(10000):
        r("XADD", "mystream", "*", "field", i)
    r("EXEC")
    read(r, "consumer1")
    after(100)
    assert len(messages(read(r, "consumer2", "CLAIM", 50, "COUNT", 1000))) == 1000


def test_xreadgroup_claim_within_multi_exec_transaction(r: Client) -> None:
    """XREADGROUP CLAIM within MULTI/EXEC transaction"""
    setup(r, 1)
    read(r, "consumer1")
    after(100)
    r("MULTI")
    read(r, "consumer2", "CLAIM", 50)
    r("XPENDING", "mystream", "group1")
    results = r("EXEC")
    assert results[1][0] == 1


def test_xread_with_claim_option(r: Client) -> None:
    """XREAD with CLAIM option"""
    r("DEL", "mystream")
    r("XADD", "mystream", "1-0", "f", "v1")
    assert_error(
        "*ERR The CLAIM option is only supported*",
        r,
        *("XREAD", "COUNT", 2, "CLAIM", 10, "STREAMS", "mystream", "0-0"),
    )
