"""stream.tcl's IDMPAUTO, IDMP window, XCFGSET, XINFO STREAM IDMP fields and CONFIG
stream-idmp-* cases, ported one for one (see test_stream_tcl.py)."""

from __future__ import annotations

import re

from redis8.tcl import Client, after, assert_error, dict_get

ID = re.compile(r"^[0-9]+-[0-9]+$")


def info(r: Client, field: str, *more: str) -> object:
    return dict_get(r("XINFO", "STREAM", "mystream", *more), field)


def auto(r: Client, *fields: str, pid: str = "p1", opts: tuple[str | int, ...] = ()) -> str:
    reply: str = r("XADD", "mystream", *opts, "IDMPAUTO", pid, "*", *fields)
    return reply


def idmp(r: Client, pid: str, iid: str, *fields: str) -> str:
    reply: str = r("XADD", "mystream", "IDMP", pid, iid, "*", *fields)
    return reply


# --- IDMPAUTO -----------------------------------------------------------------------------------


def test_xadd_idmpauto_with_invalid_syntax(r: Client) -> None:
    """XADD IDMPAUTO with invalid syntax"""
    r("DEL", "mystream")
    twice = "*IDMP/IDMPAUTO specified multiple times*"
    assert_error(twice, r, "XADD", "mystream", "IDMPAUTO", "p1", "IDMPAUTO", "p2", "*", "f", "v")
    assert_error(
        twice, r, "XADD", "mystream", "IDMPAUTO", "p1", "IDMP", "p2", "iid1", "*", "f", "v"
    )
    assert_error(
        twice, r, "XADD", "mystream", "IDMP", "p1", "iid1", "IDMPAUTO", "p2", "*", "f", "v"
    )
    assert_error(
        "*IDMP/IDMPAUTO can be used only with auto-generated IDs*",
        r,
        *("XADD", "mystream", "IDMPAUTO", "p1", "1-1", "f", "v"),
    )


def test_xadd_idmpauto_basic_deduplication_based_on_field_value_pairs(r: Client) -> None:
    """XADD IDMPAUTO basic deduplication based on field-value pairs"""
    r("DEL", "mystream")
    id1 = auto(r, "amount", "100", "currency", "USD")
    assert ID.match(id1)
    assert auto(r, "amount", "100", "currency", "USD") == id1
    assert r("XLEN", "mystream") == 1
    assert auto(r, "amount", "200", "currency", "USD") != id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_deduplicates_regardless_of_field_order(r: Client) -> None:
    """XADD IDMPAUTO deduplicates regardless of field order"""
    r("DEL", "mystream")
    id1 = auto(r, "field1", "a", "field2", "b", "field3", "c")
    assert auto(r, "field2", "b", "field3", "c", "field1", "a") == id1
    assert r("XLEN", "mystream") == 1
    assert auto(r, "field3", "c", "field1", "x", "field2", "b") != id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_different_field_value_pairs_create_different_entries(r: Client) -> None:
    """XADD IDMPAUTO different field-value pairs create different entries"""
    r("DEL", "mystream")
    ids = {
        auto(r, "user", "alice", "action", "login"),
        auto(r, "user", "bob", "action", "login"),
        auto(r, "user", "alice", "action", "logout"),
    }
    assert len(ids) == 3
    assert r("XLEN", "mystream") == 3


def test_xadd_idmpauto_with_single_field_value_pair(r: Client) -> None:
    """XADD IDMPAUTO with single field-value pair"""
    r("DEL", "mystream")
    id1 = auto(r, "status", "active")
    assert auto(r, "status", "active") == id1
    assert auto(r, "status", "inactive") != id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_with_many_field_value_pairs(r: Client) -> None:
    """XADD IDMPAUTO with many field-value pairs"""
    r("DEL", "mystream")
    pairs = [x for n in range(1, 9) for x in (f"f{n}", f"v{n}")]
    id1 = auto(r, *pairs)
    assert auto(r, *pairs) == id1
    assert auto(r, *pairs[:-1], "different") != id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_with_binary_safe_values(r: Client) -> None:
    """XADD IDMPAUTO with binary-safe values"""
    r("DEL", "mystream")
    add = ("XADD", "mystream", "IDMPAUTO", "p1", "*", "field", b"\x00\x01\x02\xff")
    assert r(*add) == r(*add)
    assert r("XLEN", "mystream") == 1


def test_xadd_idmpauto_with_unicode_values(r: Client) -> None:
    """XADD IDMPAUTO with unicode values"""
    r("DEL", "mystream")
    id1 = auto(r, "message", "hello世界")
    assert auto(r, "message", "hello世界") == id1
    assert auto(r, "message", "héllo") != id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_with_long_values(r: Client) -> None:
    """XADD IDMPAUTO with long values"""
    r("DEL", "mystream")
    assert auto(r, "data", "x" * 10000) == auto(r, "data", "x" * 10000)
    assert r("XLEN", "mystream") == 1


def test_xadd_idmpauto_with_empty_string_values(r: Client) -> None:
    """XADD IDMPAUTO with empty string values"""
    r("DEL", "mystream")
    id1 = auto(r, "field", "")
    assert auto(r, "field", "") == id1
    assert auto(r, "field", "value") != id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_with_maxlen_option(r: Client) -> None:
    """XADD IDMPAUTO with MAXLEN option"""
    r("DEL", "mystream")
    maxlen = ("IDMPAUTO", "p1", "MAXLEN", "~", 100, "*")
    id1 = r("XADD", "mystream", *maxlen, "field", "value1")
    r("XADD", "mystream", *maxlen, "field", "value2")
    assert r("XADD", "mystream", *maxlen, "field", "value1") == id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_with_minid_option(r: Client) -> None:
    """XADD IDMPAUTO with MINID option"""
    r("DEL", "mystream")
    minid = ("IDMPAUTO", "p1", "MINID", "~", "1000000000-0", "*", "field", "value1")
    assert r("XADD", "mystream", *minid) == r("XADD", "mystream", *minid)
    assert r("XLEN", "mystream") == 1


def test_xadd_idmpauto_with_nomkstream_option(r: Client) -> None:
    """XADD IDMPAUTO with NOMKSTREAM option"""
    r("DEL", "mystream")
    assert r("XADD", "mystream", "NOMKSTREAM", "IDMPAUTO", "p1", "*", "field", "value") == ""
    r("XADD", "mystream", "*", "field", "initial")
    assert ID.match(r("XADD", "mystream", "NOMKSTREAM", "IDMPAUTO", "p1", "*", "field", "test"))


def test_xadd_idmpauto_with_keepref_option(r: Client) -> None:
    """XADD IDMPAUTO with KEEPREF option"""
    r("DEL", "mystream")
    add = ("XADD", "mystream", "KEEPREF", "IDMPAUTO", "p1", "*", "field", "value1")
    assert r(*add) == r(*add)
    assert r("XLEN", "mystream") == 1


def test_xadd_idmpauto_argument_order_variations(r: Client) -> None:
    """XADD IDMPAUTO argument order variations"""
    r("DEL", "mystream")
    ids = [
        r("XADD", "mystream", "IDMPAUTO", "p1", "*", "field", "test"),
        r("XADD", "mystream", "IDMPAUTO", "p1", "MAXLEN", "~", 100, "*", "field", "test2"),
        r("XADD", "mystream", "MAXLEN", "~", 100, "IDMPAUTO", "p1", "*", "field", "test3"),
        r("XADD", "mystream", "KEEPREF", "IDMPAUTO", "p1", "*", "field", "test4"),
        r("XADD", "mystream", "IDMPAUTO", "p1", "KEEPREF", "*", "field", "test5"),
    ]
    assert all(ID.match(i) for i in ids)
    assert r("XLEN", "mystream") == 5


def test_xadd_idmpauto_with_consumer_groups(r: Client) -> None:
    """XADD IDMPAUTO with consumer groups"""
    r("DEL", "mystream")
    r("XADD", "mystream", "*", "initial", "value")
    r("XGROUP", "CREATE", "mystream", "mygroup", "0")
    id1 = auto(r, "event", "login", "user", "alice")
    auto(r, "event", "logout", "user", "bob")
    assert auto(r, "event", "login", "user", "alice") == id1
    messages = r(
        "XREADGROUP", "GROUP", "mygroup", "consumer1", "COUNT", 10, "STREAMS", "mystream", ">"
    )
    assert len(messages[0][1]) == 3


def test_xadd_idmpauto_field_names_matter(r: Client) -> None:
    """XADD IDMPAUTO field names matter"""
    r("DEL", "mystream")
    assert auto(r, "field1", "value") != auto(r, "field2", "value")
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_with_numeric_field_names_and_values(r: Client) -> None:
    """XADD IDMPAUTO with numeric field names and values"""
    r("DEL", "mystream")
    id1 = auto(r, "123", "456", "789", "012")
    assert auto(r, "123", "456", "789", "012") == id1
    assert auto(r, "123", "999", "789", "012") != id1
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_multiple_producers_have_isolated_namespaces(r: Client) -> None:
    """XADD IDMPAUTO multiple producers have isolated namespaces"""
    r("DEL", "mystream")
    pair = ("amount", "100", "currency", "USD")
    id1, id2 = auto(r, *pair, pid="producer1"), auto(r, *pair, pid="producer2")
    assert id1 != id2
    assert auto(r, *pair, pid="producer1") == id1 and auto(r, *pair, pid="producer2") == id2
    assert r("XLEN", "mystream") == 2


def test_xadd_idmpauto_multiple_producers(r: Client) -> None:
    """XADD IDMPAUTO multiple producers"""
    r("DEL", "mystream")
    pair = ("event", "login", "user", "alice")
    ids = [auto(r, *pair, pid=app) for app in ("app1", "app2", "app3")]
    assert len(set(ids)) == 3
    assert auto(r, *pair, pid="app1") == ids[0]
    assert info(r, "pids-tracked") == 3


# --- the window -----------------------------------------------------------------------------------


def test_xidmp_entries_expire_after_duration_seconds(r: Client) -> None:
    """XIDMP entries expire after DURATION seconds"""
    r("DEL", "mystream")
    idmp(r, "p1", "req-1", "field", "value1")
    r("XCFGSET", "mystream", "IDMP-DURATION", 1)
    id1 = idmp(r, "p1", "req-1", "field", "value1")
    assert idmp(r, "p1", "req-1", "field", "value2") == id1
    after(2500)
    assert idmp(r, "p1", "req-1", "field", "value3") != id1


def test_xidmp_set_evicts_entries_when_maxsize_is_reached(r: Client) -> None:
    """XIDMP set evicts entries when MAXSIZE is reached"""
    r("DEL", "mystream")
    idmp(r, "p1", "init", "field", "init")
    r("XCFGSET", "mystream", "IDMP-MAXSIZE", 3, "IDMP-DURATION", 60)
    ids = {n: idmp(r, "p1", f"req-{n}", "field", f"v{n}") for n in (1, 2, 3)}
    for n, first in ids.items():
        assert idmp(r, "p1", f"req-{n}", "field", "dup") == first
    idmp(r, "p1", "req-4", "field", "v4")
    assert idmp(r, "p1", "req-1", "field", "new") != ids[1]
    assert idmp(r, "p1", "req-3", "field", "dup2") == ids[3]
    assert r("XLEN", "mystream") == 6


def test_xcfgset_idmp_maxsize_wraparound_keeps_last_8_entries(r: Client) -> None:
    """XCFGSET IDMP-MAXSIZE wraparound keeps last 8 entries"""
    r("DEL", "mystream")
    idmp(r, "p1", "init", "field", "init")
    r("XCFGSET", "mystream", "IDMP-MAXSIZE", 8, "IDMP-DURATION", 60)
    ids = [idmp(r, "p1", f"req-{i}", "field", f"v{i}") for i in range(1, 101)]
    for i in range(93, 101):
        assert idmp(r, "p1", f"req-{i}", "field", "dup") == ids[i - 1]
    for i in range(1, 93):
        assert idmp(r, "p1", f"req-{i}", "field", "new") != ids[i - 1]
    assert r("XLEN", "mystream") == 193
