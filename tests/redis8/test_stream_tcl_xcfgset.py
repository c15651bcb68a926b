"""stream.tcl's XCFGSET, XINFO STREAM IDMP-field and CONFIG stream-idmp-* cases, ported one for
one (see test_stream_tcl.py)."""

from __future__ import annotations

from redis8.tcl import Client, assert_error, dict_get


def info(r: Client, field: str, *more: str) -> object:
    return dict_get(r("XINFO", "STREAM", "mystream", *more), field)


def idmp(r: Client, pid: str, iid: str, *fields: str) -> str:
    reply: str = r("XADD", "mystream", "IDMP", pid, iid, "*", *fields)
    return reply


def fresh(r: Client) -> None:
    """A stream with one IDMP entry (most of these tests start so)."""
    r("DEL", "mystream")
    idmp(r, "p1", "req-1", "field", "value")


def test_xcfgset_set_idmp_duration_successfully(r: Client) -> None:
    """XCFGSET set IDMP-DURATION successfully"""
    fresh(r)
    assert r("XCFGSET", "mystream", "IDMP-DURATION", 5) == "OK"
    assert info(r, "idmp-duration") == 5


def test_xcfgset_set_idmp_maxsize_successfully(r: Client) -> None:
    """XCFGSET set IDMP-MAXSIZE successfully"""
    fresh(r)
    assert r("XCFGSET", "mystream", "IDMP-MAXSIZE", 5000) == "OK"
    assert info(r, "idmp-maxsize") == 5000


def test_xcfgset_set_both_idmp_duration_and_idmp_maxsize(r: Client) -> None:
    """XCFGSET set both IDMP-DURATION and IDMP-MAXSIZE (and: XINFO STREAM shows IDMP
    configuration parameters, the same test under another name)"""
    fresh(r)
    assert r("XCFGSET", "mystream", "IDMP-DURATION", 3, "IDMP-MAXSIZE", 10000) == "OK"
    assert info(r, "idmp-duration") == 3 and info(r, "idmp-maxsize") == 10000


def test_xinfo_stream_shows_default_idmp_parameters(r: Client) -> None:
    """XINFO STREAM shows default IDMP parameters"""
    fresh(r)
    assert info(r, "idmp-duration") == 100 and info(r, "idmp-maxsize") == 100


def test_xcfgset_error_on_non_existent_stream(r: Client) -> None:
    """XCFGSET error on non-existent stream"""
    r("DEL", "mystream")
    assert_error("*no such key*", r, "XCFGSET", "mystream", "IDMP-DURATION", 5)


def test_xcfgset_idmp_duration_maximum_value_validation(r: Client) -> None:
    """XCFGSET IDMP-DURATION maximum value validation"""
    fresh(r)
    assert r("XCFGSET", "mystream", "IDMP-DURATION", 86400) == "OK"
    assert info(r, "idmp-duration") == 86400
    assert_error("*ERR IDMP-DURATION must be*", r, "XCFGSET", "mystream", "IDMP-DURATION", 86401)
    assert info(r, "idmp-duration") == 86400


def test_xcfgset_idmp_duration_minimum_value_validation(r: Client) -> None:
    """XCFGSET IDMP-DURATION minimum value validation"""
    fresh(r)
    between = "*ERR IDMP-DURATION must be between*"
    assert_error(between, r, "XCFGSET", "mystream", "IDMP-DURATION", 0)
    assert_error(between, r, "XCFGSET", "mystream", "IDMP-DURATION", -100)
    assert r("XCFGSET", "mystream", "IDMP-DURATION", 1) == "OK"
    assert info(r, "idmp-duration") == 1


def test_xcfgset_idmp_maxsize_maximum_value_validation(r: Client) -> None:
    """XCFGSET IDMP-MAXSIZE maximum value validation"""
    fresh(r)
    assert r("XCFGSET", "mystream", "IDMP-MAXSIZE", 10000) == "OK"
    assert info(r, "idmp-maxsize") == 10000
    assert_error(
        "*ERR IDMP-MAXSIZE must be between*", r, "XCFGSET", "mystream", "IDMP-MAXSIZE", 10001
    )
    assert info(r, "idmp-maxsize") == 10000


def test_xcfgset_idmp_maxsize_minimum_value_validation(r: Client) -> None:
    """XCFGSET IDMP-MAXSIZE minimum value validation"""
    fresh(r)
    between = "*ERR IDMP-MAXSIZE must be between*"
    assert_error(between, r, "XCFGSET", "mystream", "IDMP-MAXSIZE", 0)
    assert_error(between, r, "XCFGSET", "mystream", "IDMP-MAXSIZE", -50)
    assert r("XCFGSET", "mystream", "IDMP-MAXSIZE", 1) == "OK"
    assert info(r, "idmp-maxsize") == 1


def test_xcfgset_invalid_syntax(r: Client) -> None:
    """XCFGSET invalid syntax"""
    fresh(r)
    assert_error("*ERR At least one parameter*", r, "XCFGSET", "mystream")
    assert_error("*syntax*", r, "XCFGSET", "mystream", "IDMP-DURATION")
    assert_error("*syntax*", r, "XCFGSET", "mystream", "IDMP-MAXSIZE")
    for option in ("IDMP-DURATION", "IDMP-MAXSIZE"):
        for bad in ("A", "AAA", "*", "-", "+", "120-5", "3.14", "000000000", option):
            assert_error("*ERR value is not an integer*", r, "XCFGSET", "mystream", option, bad)
        assert_error(
            "*ERR value is not an integer*", r, "XCFGSET", "mystream", option, option, option
        )
    assert_error("*syntax*", r, "XCFGSET", "mystream", "INVALID")
    assert_error(
        "*ERR value is not an integer*",
        r,
        *("XCFGSET", "mystream", "IDMP-DURATION", "INVALID", "IDMP-MAXSIZE"),
    )
    assert_error(
        "*ERR value is not an integer*",
        r,
        *("XCFGSET", "mystream", "IDMP-MAXSIZE", "INVALID", "IDMP-DURATION"),
    )


def test_xcfgset_multiple_configuration_changes(r: Client) -> None:
    """XCFGSET multiple configuration changes"""
    fresh(r)
    for duration in (1, 2, 3):
        r("XCFGSET", "mystream", "IDMP-DURATION", duration)
    for maxsize in (100, 200):
        r("XCFGSET", "mystream", "IDMP-MAXSIZE", maxsize)
    assert info(r, "idmp-duration") == 3 and info(r, "idmp-maxsize") == 200


def test_xcfgset_changing_idmp_duration_clears_all_iids_history(r: Client) -> None:
    """XCFGSET changing IDMP-DURATION clears all iids history"""
    r("DEL", "mystream")
    id1 = idmp(r, "p1", "req-1", "field", "value1")
    idmp(r, "p1", "req-2", "field", "value2")
    assert idmp(r, "p1", "req-1", "field", "dup") == id1
    r("XCFGSET", "mystream", "IDMP-DURATION", 5)
    assert idmp(r, "p1", "req-1", "field", "new1") != id1
    assert r("XLEN", "mystream") == 3


def test_xcfgset_changing_idmp_maxsize_clears_all_iids_history(r: Client) -> None:
    """XCFGSET changing IDMP-MAXSIZE clears all iids history"""
    r("DEL", "mystream")
    idmp(r, "p1", "req-1", "field", "value1")
    id2 = idmp(r, "p1", "req-2", "field", "value2")
    assert idmp(r, "p1", "req-2", "field", "dup") == id2
    r("XCFGSET", "mystream", "IDMP-MAXSIZE", 5000)
    assert idmp(r, "p1", "req-2", "field", "new2") != id2
    assert r("XLEN", "mystream") == 3


def test_xcfgset_history_cleared_then_new_deduplication_works(r: Client) -> None:
    """XCFGSET history cleared then new deduplication works"""
    r("DEL", "mystream")
    id1 = idmp(r, "p1", "req-1", "field", "value1")
    r("XCFGSET", "mystream", "IDMP-DURATION", 6)
    new1 = idmp(r, "p1", "req-1", "field", "new1")
    assert new1 != id1
    assert idmp(r, "p1", "req-1", "field", "dup1") == new1
    assert r("XLEN", "mystream") == 2


def test_xcfgset_history_cleared_preserves_stream_entries(r: Client) -> None:
    """XCFGSET history cleared preserves stream entries"""
    r("DEL", "mystream")
    id1 = idmp(r, "p1", "req-1", "field", "value1", "data", "data1")
    idmp(r, "p1", "req-2", "field", "value2", "data", "data2")
    assert len(r("XRANGE", "mystream", "-", "+")) == 2
    r("XCFGSET", "mystream", "IDMP-DURATION", 7)
    after_cfg = r("XRANGE", "mystream", "-", "+")
    assert len(after_cfg) == 2
    assert dict_get(after_cfg[0][1], "field") == "value1"
    assert dict_get(after_cfg[0][1], "data") == "data1"
    assert idmp(r, "p1", "req-1", "field", "new1") != id1


def test_xcfgset_setting_same_idmp_duration_does_not_clear_iids_history(r: Client) -> None:
    """XCFGSET setting same IDMP-DURATION does not clear iids history"""
    r("DEL", "mystream")
    id1 = idmp(r, "p1", "req-1", "field", "value1")
    id2 = idmp(r, "p1", "req-2", "field", "value2")
    assert idmp(r, "p1", "req-1", "field", "dup") == id1
    assert info(r, "idmp-duration") == 100
    r("XCFGSET", "mystream", "IDMP-DURATION", 100)
    assert idmp(r, "p1", "req-1", "field", "dup2") == id1
    assert idmp(r, "p1", "req-2", "field", "dup3") == id2
    assert r("XLEN", "mystream") == 2


def test_xcfgset_setting_same_idmp_maxsize_does_not_clear_iids_history(r: Client) -> None:
    """XCFGSET setting same IDMP-MAXSIZE does not clear iids history"""
    r("DEL", "mystream")
    id1 = idmp(r, "p1", "req-1", "field", "value1")
    id2 = idmp(r, "p1", "req-2", "field", "value2")
    assert idmp(r, "p1", "req-2", "field", "dup") == id2
    assert info(r, "idmp-maxsize") == 100
    r("XCFGSET", "mystream", "IDMP-MAXSIZE", 100)
    assert idmp(r, "p1", "req-1", "field", "dup2") == id1
    assert idmp(r, "p1", "req-2", "field", "dup3") == id2
    assert r("XLEN", "mystream") == 2


def test_xcfgset_repeated_same_value_calls_preserve_idmp_history(r: Client) -> None:
    """XCFGSET repeated same-value calls preserve IDMP history"""
    r("DEL", "mystream")
    r("XADD", "mystream", "*", "field", "init")
    r("XCFGSET", "mystream", "IDMP-DURATION", 10, "IDMP-MAXSIZE", 5000)
    id1 = idmp(r, "p1", "req-1", "field", "value1")
    for _ in range(3):
        r("XCFGSET", "mystream", "IDMP-DURATION", 10, "IDMP-MAXSIZE", 5000)
    assert idmp(r, "p1", "req-1", "field", "dup") == id1
    id2 = idmp(r, "p2", "req-2", "field", "value2")
    assert idmp(r, "p2", "req-2", "field", "dup2") == id2
    assert r("XLEN", "mystream") == 3


def test_xcfgset_changing_value_after_same_value_sets_still_clears_history(r: Client) -> None:
    """XCFGSET changing value after same-value sets still clears history"""
    r("DEL", "mystream")
    id1 = idmp(r, "p1", "req-1", "field", "value1")
    r("XCFGSET", "mystream", "IDMP-DURATION", 100)
    r("XCFGSET", "mystream", "IDMP-DURATION", 100)
    assert idmp(r, "p1", "req-1", "field", "dup") == id1
    r("XCFGSET", "mystream", "IDMP-DURATION", 50)
    assert idmp(r, "p1", "req-1", "field", "new") != id1
    assert r("XLEN", "mystream") == 2


def test_xcfgset_setting_same_value_preserves_iids_tracked_count(r: Client) -> None:
    """XCFGSET setting same value preserves iids-tracked count"""
    r("DEL", "mystream")
    idmp(r, "p1", "req-1", "field", "value1")
    idmp(r, "p1", "req-2", "field", "value2")
    idmp(r, "p2", "req-3", "field", "value3")
    assert info(r, "iids-tracked") == 3 and info(r, "iids-added") == 3
    r("XCFGSET", "mystream", "IDMP-DURATION", 100, "IDMP-MAXSIZE", 100)
    assert info(r, "iids-tracked") == 3 and info(r, "iids-added") == 3


def test_xinfo_stream_returns_iids_tracked_and_iids_added_fields(r: Client) -> None:
    """XINFO STREAM returns iids-tracked and iids-added fields"""
    r("DEL", "mystream")
    r("XADD", "mystream", "*", "field", "value")
    assert info(r, "iids-tracked") == 0 and info(r, "iids-added") == 0
    idmp(r, "p1", "req-1", "field", "value1")
    assert info(r, "iids-tracked") == 1 and info(r, "iids-added") == 1
    idmp(r, "p1", "req-2", "field", "value2")
    assert info(r, "iids-tracked") == 2 and info(r, "iids-added") == 2
    idmp(r, "p1", "req-1", "field", "duplicate")
    assert info(r, "iids-tracked") == 2 and info(r, "iids-added") == 2
    assert info(r, "iids-tracked", "FULL") == 2 and info(r, "iids-added", "FULL") == 2


def test_xinfo_stream_iids_added_is_lifetime_counter_even_after_eviction(r: Client) -> None:
    """XINFO STREAM iids-added is lifetime counter even after eviction"""
    r("DEL", "mystream")
    idmp(r, "p1", "init", "field", "init")
    r("XCFGSET", "mystream", "IDMP-MAXSIZE", 3)
    for n in (1, 2, 3):
        idmp(r, "p1", f"req-{n}", "field", f"v{n}")
    assert info(r, "iids-tracked") == 3 and info(r, "iids-added") == 4
    for n in (4, 5):
        idmp(r, "p1", f"req-{n}", "field", f"v{n}")
    assert info(r, "iids-tracked") == 3 and info(r, "iids-added") == 6


def test_xinfo_stream_iids_duplicates_is_lifetime_counter(r: Client) -> None:
    """XINFO STREAM iids-duplicates is lifetime counter"""
    r("DEL", "mystream")
    idmp(r, "p1", "req-1", "field", "v1")
    assert info(r, "iids-duplicates") == 0 and info(r, "iids-added") == 1
    idmp(r, "p1", "req-1", "field", "v1-dup")
    assert info(r, "iids-duplicates") == 1 and info(r, "iids-added") == 1
    idmp(r, "p1", "req-1", "field", "v1-dup2")
    assert info(r, "iids-duplicates") == 2 and info(r, "iids-added") == 1
    idmp(r, "p1", "req-2", "field", "v2")
    assert info(r, "iids-duplicates") == 2 and info(r, "iids-added") == 2
    idmp(r, "p1", "req-1", "field", "v1-dup3")
    assert info(r, "iids-duplicates") == 3 and info(r, "iids-added") == 2


def test_xinfo_stream_iids_duplicates_persists_after_eviction(r: Client) -> None:
    """XINFO STREAM iids-duplicates persists after eviction"""
    r("DEL", "mystream")
    idmp(r, "p1", "init", "field", "init")
    r("XCFGSET", "mystream", "IDMP-MAXSIZE", 3)
    for iid, value in (("req-1", "v1"), ("req-1", "v1-dup"), ("req-2", "v2"), ("req-2", "v2-dup")):
        idmp(r, "p1", iid, "field", value)
    assert info(r, "iids-tracked") == 2
    assert info(r, "iids-added") == 3 and info(r, "iids-duplicates") == 2
    idmp(r, "p1", "req-3", "field", "v3")
    idmp(r, "p1", "req-4", "field", "v4")
    assert info(r, "iids-tracked") == 3
    assert info(r, "iids-added") == 5 and info(r, "iids-duplicates") == 2
    idmp(r, "p1", "req-3", "field", "v3-dup")
    idmp(r, "p1", "req-4", "field", "v4-dup")
    assert info(r, "iids-tracked") == 3
    assert info(r, "iids-added") == 5 and info(r, "iids-duplicates") == 4


def test_xinfo_stream_iids_duplicates_with_multiple_producers(r: Client) -> None:
    """XINFO STREAM iids-duplicates with multiple producers"""
    r("DEL", "mystream")
    idmp(r, "p1", "req-1", "field", "v1-p1")
    idmp(r, "p2", "req-1", "field", "v1-p2")
    assert info(r, "pids-tracked") == 2
    assert info(r, "iids-added") == 2 and info(r, "iids-duplicates") == 0
    idmp(r, "p1", "req-1", "field", "v1-p1-dup")
    idmp(r, "p2", "req-1", "field", "v1-p2-dup")
    assert info(r, "pids-tracked") == 2
    assert info(r, "iids-added") == 2 and info(r, "iids-duplicates") == 2


def test_xinfo_stream_iids_counters_after_cfgset_clears_history(r: Client) -> None:
    """XINFO STREAM iids counters after CFGSET clears history"""
    r("DEL", "mystream")
    for iid, value in (
        ("req-1", "v1"),
        ("req-2", "v2"),
        ("req-3", "v3"),
        ("req-1", "v1-dup"),
        ("req-2", "v2-dup"),
    ):
        idmp(r, "p1", iid, "field", value)
    assert info(r, "iids-tracked") == 3
    assert info(r, "iids-added") == 3 and info(r, "iids-duplicates") == 2
    r("XCFGSET", "mystream", "IDMP-DURATION", 60)
    assert info(r, "iids-tracked") == 0
    assert info(r, "iids-added") == 3 and info(r, "iids-duplicates") == 2
    idmp(r, "p1", "req-4", "field", "v4")
    assert info(r, "iids-tracked") == 1 and info(r, "iids-added") == 4


def test_xinfo_stream_returns_pids_tracked_field(r: Client) -> None:
    """XINFO STREAM returns pids-tracked field"""
    r("DEL", "mystream")
    r("XADD", "mystream", "*", "field", "value")
    assert info(r, "pids-tracked") == 0
    for pid, iid, expected in (
        ("p1", "req-1", 1),
        ("p1", "req-2", 1),
        ("p2", "req-1", 2),
        ("producer3", "req-1", 3),
    ):
        idmp(r, pid, iid, "field", "v")
        assert info(r, "pids-tracked") == expected


def test_xinfo_stream_full_returns_pids_tracked_field(r: Client) -> None:
    """XINFO STREAM FULL returns pids-tracked field"""
    r("DEL", "mystream")
    for pid in ("prod-a", "prod-b", "prod-c"):
        idmp(r, pid, "req-1", "field", "v")
    assert info(r, "pids-tracked", "FULL") == 3


def test_xinfo_stream_iids_tracked_counts_across_all_producers(r: Client) -> None:
    """XINFO STREAM iids-tracked counts across all producers"""
    r("DEL", "mystream")
    for pid, n in (("p1", 1), ("p1", 2), ("p2", 1), ("p2", 2), ("p2", 3)):
        idmp(r, pid, f"req-{n}", "field", "v")
    assert info(r, "pids-tracked") == 2
    assert info(r, "iids-tracked") == 5 and info(r, "iids-added") == 5
    idmp(r, "p1", "req-1", "field", "dup")
    idmp(r, "p2", "req-2", "field", "dup")
    assert info(r, "pids-tracked") == 2
    assert info(r, "iids-tracked") == 5 and info(r, "iids-added") == 5


def test_xinfo_stream_returns_idmp_duration_and_idmp_maxsize_fields(r: Client) -> None:
    """XINFO STREAM returns idmp-duration and idmp-maxsize fields"""
    fresh(r)
    duration = r("CONFIG", "GET", "stream-idmp-duration")[1]
    maxsize = r("CONFIG", "GET", "stream-idmp-maxsize")[1]
    assert str(info(r, "idmp-duration")) == duration and str(info(r, "idmp-maxsize")) == maxsize
    r("XCFGSET", "mystream", "IDMP-DURATION", 300, "IDMP-MAXSIZE", 50)
    assert info(r, "idmp-duration") == 300 and info(r, "idmp-maxsize") == 50
    assert info(r, "idmp-duration", "FULL") == 300 and info(r, "idmp-maxsize", "FULL") == 50
    r("XCFGSET", "mystream", "IDMP-DURATION", 600)
    assert info(r, "idmp-duration") == 600 and info(r, "idmp-maxsize") == 50
    r("XCFGSET", "mystream", "IDMP-MAXSIZE", 100)
    assert info(r, "idmp-duration") == 600 and info(r, "idmp-maxsize") == 100


def test_xcfgset_clears_all_producer_histories(r: Client) -> None:
    """XCFGSET clears all producer histories"""
    r("DEL", "mystream")
    id1 = idmp(r, "p1", "req-1", "field", "v1")
    idmp(r, "p2", "req-1", "field", "v2")
    idmp(r, "p3", "req-1", "field", "v3")
    assert info(r, "pids-tracked") == 3 and info(r, "iids-tracked") == 3
    r("XCFGSET", "mystream", "IDMP-DURATION", 60)
    assert info(r, "pids-tracked") == 0 and info(r, "iids-tracked") == 0
    assert info(r, "iids-added") == 3
    assert idmp(r, "p1", "req-1", "field", "new") != id1


def test_config_set_stream_idmp_duration_and_stream_idmp_maxsize_validation(r: Client) -> None:
    """CONFIG SET stream-idmp-duration and stream-idmp-maxsize validation"""
    for name, bad in (
        ("stream-idmp-duration", (86401, 100000, 0, -1, -100)),
        ("stream-idmp-maxsize", (10001, 50000, 0, -1, -100)),
    ):
        for value in bad:
            assert_error("*must be between*", r, "CONFIG", "SET", name, value)
    for name, value in (
        ("stream-idmp-duration", "86400"),
        ("stream-idmp-maxsize", "10000"),
        ("stream-idmp-duration", "1"),
        ("stream-idmp-maxsize", "1"),
    ):
        assert r("CONFIG", "SET", name, value) == "OK"
        assert r("CONFIG", "GET", name)[1] == value
    for name in ("stream-idmp-duration", "stream-idmp-maxsize"):
        assert r("CONFIG", "SET", name, 100) == "OK"
