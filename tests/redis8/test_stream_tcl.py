"""The cases of the newest redis/redis `tests/unit/type/stream.tcl` that test the stream commands
and options Redis added after 7.0 (XDELEX; KEEPREF / DELREF / ACKED on XADD and XTRIM; XADD IDMP
and IDMPAUTO; XCFGSET and its XINFO STREAM fields; CONFIG stream-idmp-*), ported one for one to a
node of one region. Each test carries the Tcl test's name; the excused ones (DEBUG RELOAD,
restarts, AOF: what a node has no such command for) are listed in docs/redis8.md with why.
"""

from __future__ import annotations

import re

from redis8.tcl import Client, assert_error, dict_get

ID = re.compile(r"^[0-9]+-[0-9]+$")


def xinfo(r: Client, key: str = "mystream", *more: str) -> object:
    return r("XINFO", "STREAM", key, *more)


def info(r: Client, field: str, key: str = "mystream") -> object:
    return dict_get(xinfo(r, key), field)


# --- XADD / XTRIM with KEEPREF, DELREF, ACKED -------------------------------------------------


def test_xadd_with_maxlen_option_and_acked_option(r: Client) -> None:
    """XADD with MAXLEN option and ACKED option"""
    r("DEL", "mystream")
    for i in range(1, 6):
        r("XADD", "mystream", f"{i}-0", "f", "v")
    assert r("XLEN", "mystream") == 5
    r("XGROUP", "CREATE", "mystream", "mygroup", "0")
    r("XADD", "mystream", "MAXLEN", "=", "1", "ACKED", "6-0", "f", "v")
    assert r("XLEN", "mystream") == 6
    records = r(
        "XREADGROUP", "GROUP", "mygroup", "consumer1", "COUNT", 1, "STREAMS", "mystream", ">"
    )
    r("XACK", "mystream", "mygroup", records[0][1][0][0])
    assert r("XPENDING", "mystream", "mygroup")[0] == 0
    r("XADD", "mystream", "MAXLEN", "=", "1", "ACKED", "7-0", "f", "v")
    assert r("XLEN", "mystream") == 6
    records = r("XREADGROUP", "GROUP", "mygroup", "consumer1", "STREAMS", "mystream", ">")
    r("XACK", "mystream", "mygroup", *[entry[0] for entry in records[0][1]])
    assert r("XPENDING", "mystream", "mygroup")[0] == 0
    r("XADD", "mystream", "MAXLEN", "=", "1", "ACKED", "*", "f", "v")
    assert r("XLEN", "mystream") == 1


def test_xadd_with_maxlen_option_and_delref_option(r: Client) -> None:
    """XADD with MAXLEN option and DELREF option"""
    r("DEL", "mystream")
    for i in range(1, 6):
        r("XADD", "mystream", f"{i}-0", "f", "v")
    r("XGROUP", "CREATE", "mystream", "mygroup", "0")
    r("XREADGROUP", "GROUP", "mygroup", "consumer1", "COUNT", 1, "STREAMS", "mystream", ">")
    r("XADD", "mystream", "MAXLEN", "=", "1", "DELREF", "*", "f", "v")
    assert r("XLEN", "mystream") == 1
    assert r("XPENDING", "mystream", "mygroup")[0] == 0


def test_xtrim_with_approx_and_acked_deletes_entries_correctly(r: Client) -> None:
    """XTRIM with approx and ACKED deletes entries correctly"""
    r("DEL", "mystream")
    origin = r("CONFIG", "GET", "stream-node-max-entries")[1]
    r("CONFIG", "SET", "stream-node-max-entries", 2)
    try:
        for i in range(1, 6):
            r("XADD", "mystream", f"{i}-0", "f", "v")
        r("XGROUP", "CREATE", "mystream", "mygroup", "0")
        r("XREADGROUP", "GROUP", "mygroup", "consumer1", "STREAMS", "mystream", ">")
        r("XACK", "mystream", "mygroup", "1-0", "2-0", "4-0")
        assert r("XTRIM", "mystream", "MINID", "~", "6-0", "ACKED") == 3
        assert r("XLEN", "mystream") == 2
        assert r("XRANGE", "mystream", "-", "+") == [["3-0", ["f", "v"]], ["5-0", ["f", "v"]]]
    finally:
        r("CONFIG", "SET", "stream-node-max-entries", origin)


def test_xtrim_with_approx_and_delref_deletes_entries_correctly(r: Client) -> None:
    """XTRIM with approx and DELREF deletes entries correctly"""
    r("DEL", "mystream")
    origin = r("CONFIG", "GET", "stream-node-max-entries")[1]
    r("CONFIG", "SET", "stream-node-max-entries", 2)
    try:
        for i in range(1, 5):
            r("XADD", "mystream", f"{i}-0", "f", "v")
        r("XGROUP", "CREATE", "mystream", "mygroup", "0")
        r("XREADGROUP", "GROUP", "mygroup", "consumer1", "STREAMS", "mystream", ">")
        assert r("XTRIM", "mystream", "MINID", "~", "5-0", "DELREF") == 4
        assert r("XLEN", "mystream") == 0
        assert r("XPENDING", "mystream", "mygroup") == [0, "", "", ""]
    finally:
        r("CONFIG", "SET", "stream-node-max-entries", origin)


# --- XADD IDMP ----------------------------------------------------------------------------------


def test_xadd_idmp_with_invalid_syntax(r: Client) -> None:
    """XADD IDMP with invalid syntax"""
    r("DEL", "mystream")
    m = "mystream"
    assert_error("*ERR Invalid stream ID specified*", r, "XADD", m, "IDMP", "p1", "*", "f", "v")
    assert_error(
        "*IDMP/IDMPAUTO can be used only with auto-generated IDs*",
        r,
        *("XADD", m, "IDMP", "p1", "iid1", "1-1", "f", "v"),
    )
    twice = "*IDMP/IDMPAUTO specified multiple times*"
    assert_error(twice, r, "XADD", m, "IDMP", "p1", "iid1", "IDMP", "p2", "iid2", "*", "f", "v")
    assert_error(twice, r, "XADD", m, "IDMPAUTO", "p1", "IDMP", "p2", "iid2", "*", "f", "v")
    assert_error(
        "*IDMP requires a non-empty producer ID*", r, "XADD", m, "IDMP", "", "iid1", "*", "f", "v"
    )
    assert_error(
        "*IDMP requires a non-empty idempotent ID*", r, "XADD", m, "IDMP", "p1", "", "*", "f", "v"
    )
    assert_error(
        "*IDMPAUTO requires a non-empty producer ID*", r, "XADD", m, "IDMPAUTO", "", "*", "f", "v"
    )


def test_xadd_idmp_basic_addition(r: Client) -> None:
    """XADD IDMP basic addition"""
    r("DEL", "mystream")
    iids = [
        "1", "A", "B", "-", "+", "*", "^", "$", "#", "@", "?", "\\", "IDMP", "123-456",
        "9999999999999-9999999999999", "hello世界", "héllo", "line1\nline2", "tab\there",
        'quote"test', "with spaces", "long" * 100, "x" * 1000, "special!@#$%^&*()",
        "path/to/file", "key:value",
    ]  # fmt: skip
    for iid in iids:
        assert ID.match(r("XADD", "mystream", "IDMP", "p1", iid.encode(), "*", "f", "v"))
    assert r("XLEN", "mystream") == 26


def test_xadd_idmp_duplicate_request_returns_same_id(r: Client) -> None:
    """XADD IDMP duplicate request returns same ID"""
    r("DEL", "mystream")
    id1 = r(
        "XADD", "mystream", "IDMP", "p1", "payment-abc", "*", "amount", "100", "currency", "USD"
    )
    id2 = r(
        "XADD", "mystream", "IDMP", "p1", "payment-abc", "*", "amount", "200", "currency", "EUR"
    )
    assert id1 == id2
    assert r("XLEN", "mystream") == 1
    fields = r("XRANGE", "mystream", "-", "+")[0][1]
    assert dict_get(fields, "amount") == "100" and dict_get(fields, "currency") == "USD"


def test_xadd_idmp_multiple_different_iids_create_multiple_entries(r: Client) -> None:
    """XADD IDMP multiple different IIDs create multiple entries"""
    r("DEL", "mystream")
    ids = [
        r("XADD", "mystream", "IDMP", "p1", f"req-{n}", "*", "user", user)
        for n, user in ((1, "alice"), (2, "bob"), (3, "charlie"))
    ]
    assert len(set(ids)) == 3
    assert r("XLEN", "mystream") == 3
    entries = r("XRANGE", "mystream", "-", "+")
    assert [dict_get(e[1], "user") for e in entries] == ["alice", "bob", "charlie"]


def test_xadd_idmp_with_binary_safe_iid(r: Client) -> None:
    """XADD IDMP with binary-safe iid"""
    r("DEL", "mystream")
    iid = b"\x00\x01\x02\xff"
    id1 = r("XADD", "mystream", "IDMP", "p1", iid, "*", "field", "value")
    assert r("XADD", "mystream", "IDMP", "p1", iid, "*", "field", "dup") == id1


def test_xadd_idmp_with_maximum_length_iid(r: Client) -> None:
    """XADD IDMP with maximum length iid"""
    r("DEL", "mystream")
    assert "-" in r("XADD", "mystream", "IDMP", "p1", "x" * 65536, "*", "field", "value")


def test_xadd_idmp_with_maxlen_option(r: Client) -> None:
    """XADD IDMP with MAXLEN option"""
    r("DEL", "mystream")
    add = ("XADD", "mystream", "IDMP", "p1")
    id1 = r(*add, "req-1", "MAXLEN", "~", 100, "*", "field", "value1")
    r(*add, "req-2", "MAXLEN", "~", 100, "*", "field", "value2")
    assert r(*add, "req-1", "MAXLEN", "~", 100, "*", "field", "value3") == id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmp_with_minid_option(r: Client) -> None:
    """XADD IDMP with MINID option"""
    r("DEL", "mystream")
    add = ("XADD", "mystream", "IDMP", "p1", "req-1", "MINID", "~", "1000000000-0", "*")
    id1 = r(*add, "field", "value1")
    assert r(*add, "field", "value2") == id1
    assert r("XLEN", "mystream") == 1


def test_xadd_idmp_with_nomkstream_option(r: Client) -> None:
    """XADD IDMP with NOMKSTREAM option"""
    r("DEL", "mystream")
    assert r("XADD", "mystream", "NOMKSTREAM", "IDMP", "p1", "req-1", "*", "field", "value") == ""
    r("XADD", "mystream", "IDMP", "p1", "req-2", "*", "field", "value")
    new = r("XADD", "mystream", "NOMKSTREAM", "IDMP", "p1", "req-3", "*", "field", "value")
    assert "-" in new
    assert r("XLEN", "mystream") == 2


def test_xadd_idmp_with_keepref_option(r: Client) -> None:
    """XADD IDMP with KEEPREF option"""
    r("DEL", "mystream")
    id1 = r("XADD", "mystream", "IDMP", "p1", "req-1", "KEEPREF", "*", "field", "value1")
    assert r("XADD", "mystream", "IDMP", "p1", "req-1", "KEEPREF", "*", "field", "value2") == id1
    assert r("XLEN", "mystream") == 1


def test_xadd_idmp_with_combined_options(r: Client) -> None:
    """XADD IDMP with combined options"""
    r("DEL", "mystream")
    opts = ("IDMP", "p1", "req-1", "KEEPREF", "MAXLEN", "~", 1000, "LIMIT", 10, "*")
    id1 = r("XADD", "mystream", *opts, "field1", "value1", "field2", "value2")
    assert r("XADD", "mystream", *opts, "field3", "value3") == id1
    assert r("XLEN", "mystream") == 1
    fields = r("XRANGE", "mystream", "-", "+")[0][1]
    assert dict_get(fields, "field1") == "value1" and dict_get(fields, "field2") == "value2"


def test_xadd_idmp_argument_order_variations(r: Client) -> None:
    """XADD IDMP argument order variations"""
    r("DEL", "mystream")
    ids = [
        r("XADD", "mystream", "IDMP", "p1", "req-1", "MAXLEN", "~", 100, "*", "field", "value1"),
        r("XADD", "mystream", "MAXLEN", "~", 100, "IDMP", "p1", "req-2", "*", "field", "value2"),
        r(
            *("XADD", "mystream", "NOMKSTREAM", "IDMP", "p1", "req-3", "MAXLEN", "~", 100, "*"),
            *("field", "value3"),
        ),
    ]
    assert all("-" in i for i in ids)
    assert r("XLEN", "mystream") == 3


def test_xadd_idmp_concurrent_duplicate_requests(r: Client) -> None:
    """XADD IDMP concurrent duplicate requests"""
    r("DEL", "mystream")
    clients = [Client(r.port) for _ in range(3)]
    try:
        ids = [
            c("XADD", "mystream", "IDMP", "p1", "concurrent-req", "*", "client", str(n))
            for n, c in enumerate(clients, 1)
        ]
    finally:
        for c in clients:
            c.close()
    assert ids[0] == ids[1] == ids[2]
    assert r("XLEN", "mystream") == 1


def test_xadd_idmp_pipelined_requests(r: Client) -> None:
    """XADD IDMP pipelined requests"""
    r("DEL", "mystream")
    r("MULTI")
    r("XADD", "mystream", "IDMP", "p1", "req-1", "*", "field", "value1")
    r("XADD", "mystream", "IDMP", "p1", "req-2", "*", "field", "value2")
    # Tcl's `# Duplicate` after the command is two more arguments, not a comment.
    r("XADD", "mystream", "IDMP", "p1", "req-1", "*", "field", "value3", "#", "Duplicate")
    r("XADD", "mystream", "IDMP", "p1", "req-3", "*", "field", "value4")
    id1, id2, id1_dup, id3 = r("EXEC")
    assert id1 == id1_dup
    assert len({id1, id2, id3}) == 3
    assert r("XLEN", "mystream") == 3


def test_xadd_idmp_with_consumer_groups(r: Client) -> None:
    """XADD IDMP with consumer groups"""
    r("DEL", "mystream")
    id1 = r("XADD", "mystream", "IDMP", "p1", "cg-1", "*", "field", "value1")
    id2 = r("XADD", "mystream", "IDMP", "p1", "cg-2", "*", "field", "value2")
    r("XGROUP", "CREATE", "mystream", "mygroup", "0")
    entries = r(
        "XREADGROUP", "GROUP", "mygroup", "consumer1", "COUNT", 10, "STREAMS", "mystream", ">"
    )
    assert len(entries[0][1]) == 2
    assert r("XACK", "mystream", "mygroup", id1, id2) == 2
    assert r("XADD", "mystream", "IDMP", "p1", "cg-1", "*", "field", "dup") == id1


def test_xadd_idmp_multiple_producers_have_isolated_namespaces(r: Client) -> None:
    """XADD IDMP multiple producers have isolated namespaces"""
    r("DEL", "mystream")
    id1 = r("XADD", "mystream", "IDMP", "producer1", "req-123", "*", "field", "from-p1")
    id2 = r("XADD", "mystream", "IDMP", "producer2", "req-123", "*", "field", "from-p2")
    assert id1 != id2
    assert r("XLEN", "mystream") == 2
    entries = r("XRANGE", "mystream", "-", "+")
    assert [dict_get(e[1], "field") for e in entries] == ["from-p1", "from-p2"]
    assert r("XADD", "mystream", "IDMP", "producer1", "req-123", "*", "field", "dup-p1") == id1
    assert r("XADD", "mystream", "IDMP", "producer2", "req-123", "*", "field", "dup-p2") == id2
    assert r("XLEN", "mystream") == 2


def test_xadd_idmp_multiple_producers_each_have_their_own_maxsize_limit(r: Client) -> None:
    """XADD IDMP multiple producers each have their own MAXSIZE limit"""
    r("DEL", "mystream")
    r("XADD", "mystream", "IDMP", "p1", "init", "*", "field", "init")
    r("XCFGSET", "mystream", "IDMP-MAXSIZE", 3, "IDMP-DURATION", 60)
    ids = {
        (p, n): r("XADD", "mystream", "IDMP", p, f"req-{n}", "*", "field", f"{p}-v{n}")
        for p in ("p1", "p2")
        for n in (1, 2, 3)
    }
    for (p, n), first in ids.items():
        assert r("XADD", "mystream", "IDMP", p, f"req-{n}", "*", "field", "dup") == first
    assert info(r, "pids-tracked") == 2


def test_xadd_idmp_multiple_producers_with_binary_producer_ids(r: Client) -> None:
    """XADD IDMP multiple producers with binary producer IDs"""
    r("DEL", "mystream")
    id1 = r("XADD", "mystream", "IDMP", b"\x00\x01\x02", "req-1", "*", "field", "v1")
    id2 = r("XADD", "mystream", "IDMP", b"\x03\x04\x05", "req-1", "*", "field", "v2")
    assert id1 != id2
    assert r("XLEN", "mystream") == 2
    assert r("XADD", "mystream", "IDMP", b"\x00\x01\x02", "req-1", "*", "field", "dup") == id1


def test_xadd_idmp_multiple_producers_with_unicode_producer_ids(r: Client) -> None:
    """XADD IDMP multiple producers with unicode producer IDs"""
    r("DEL", "mystream")
    ids = [
        r("XADD", "mystream", "IDMP", pid.encode(), "req-1", "*", "field", value)
        for pid, value in (
            ("producer-世界", "v1"),
            ("producer-héllo", "v2"),
            ("producer-日本", "v3"),
        )
    ]
    assert len(set(ids)) == 3
    assert r("XLEN", "mystream") == 3
    assert info(r, "pids-tracked") == 3


def test_xadd_idmp_multiple_producers_with_long_producer_ids(r: Client) -> None:
    """XADD IDMP multiple producers with long producer IDs"""
    r("DEL", "mystream")
    id1 = r("XADD", "mystream", "IDMP", "a" * 1000, "req-1", "*", "field", "v1")
    id2 = r("XADD", "mystream", "IDMP", "b" * 1000, "req-1", "*", "field", "v2")
    assert id1 != id2
    assert r("XLEN", "mystream") == 2
    assert r("XADD", "mystream", "IDMP", "a" * 1000, "req-1", "*", "field", "dup") == id1


def test_xadd_idmp_multiple_producers_concurrent_access(r: Client) -> None:
    """XADD IDMP multiple producers concurrent access"""
    r("DEL", "mystream")
    clients = [Client(r.port) for _ in range(3)]
    try:
        ids = [
            c("XADD", "mystream", "IDMP", f"service-{s}", "order-123", "*", "data", f"from-{s}")
            for c, s in zip(clients, "abc", strict=True)
        ]
        assert len(set(ids)) == 3
        assert r("XLEN", "mystream") == 3
        dup = clients[0]("XADD", "mystream", "IDMP", "service-a", "order-123", "*", "data", "retry")
        assert dup == ids[0]
        assert info(r, "pids-tracked") == 3
    finally:
        for c in clients:
            c.close()


def test_xadd_idmp_multiple_producers_pipelined_requests(r: Client) -> None:
    """XADD IDMP multiple producers pipelined requests"""
    r("DEL", "mystream")
    r("MULTI")
    for pid, iid, value in (
        ("p1", "req-1", "v1"),
        ("p2", "req-1", "v2"),
        ("p1", "req-1", "dup"),
        ("p2", "req-2", "v3"),
        ("p3", "req-1", "v4"),
    ):
        r("XADD", "mystream", "IDMP", pid, iid, "*", "field", value)
    p1r1, p2r1, p1r1_dup, p2r2, p3r1 = r("EXEC")
    assert p1r1 == p1r1_dup
    assert p1r1 != p2r1 and p2r1 != p2r2 and p2r1 != p3r1
    assert r("XLEN", "mystream") == 4
    assert info(r, "pids-tracked") == 3


def test_xadd_idmp_multiple_producers_with_mixed_idmp_and_idmpauto(r: Client) -> None:
    """XADD IDMP multiple producers with mixed IDMP and IDMPAUTO"""
    r("DEL", "mystream")
    id1 = r("XADD", "mystream", "IDMP", "p1", "explicit-iid", "*", "field", "v1")
    id2 = r("XADD", "mystream", "IDMPAUTO", "p2", "*", "field", "v1")
    id3 = r("XADD", "mystream", "IDMP", "p3", "another-iid", "*", "field", "v1")
    id4 = r("XADD", "mystream", "IDMPAUTO", "p4", "*", "field", "v1")
    assert id1 != id2 and id2 != id3 and id3 != id4
    assert r("XLEN", "mystream") == 4
    assert r("XADD", "mystream", "IDMP", "p1", "explicit-iid", "*", "field", "dup") == id1
    assert r("XADD", "mystream", "IDMPAUTO", "p2", "*", "field", "v1") == id2
    assert info(r, "pids-tracked") == 4


def test_xadd_idmp_multiple_producers_stress_test(r: Client) -> None:
    """XADD IDMP multiple producers stress test"""
    r("DEL", "mystream")
    ids = [
        r("XADD", "mystream", "IDMP", f"producer-{i}", "request-1", "*", "field", f"value-{i}")
        for i in range(50)
    ]
    assert r("XLEN", "mystream") == 50
    assert info(r, "pids-tracked") == 50 and info(r, "iids-tracked") == 50
    for i, first in enumerate(ids):
        assert r("XADD", "mystream", "IDMP", f"producer-{i}", "request-1", "*", "field", "dup") == (
            first
        )
    assert r("XLEN", "mystream") == 50
