"""stream-cgroups.tcl's XNACK cases (and nacked-count), ported one for one (see
test_stream_tcl.py)."""

from __future__ import annotations

from redis8.tcl import Client, after, assert_error, dict_get, wait_for_blocked_clients_count

LLONG_MAX = 9223372036854775807


def setup(r: Client, count: int, *, read: bool = True, count_read: int | None = None) -> None:
    r("DEL", "mystream")
    for i in range(1, count + 1):
        r("XADD", "mystream", f"{i}-0", "f", f"v{i}")
    r("XGROUP", "CREATE", "mystream", "grp", "0")
    if read:
        opts = () if count_read is None else ("COUNT", count_read)
        r("XREADGROUP", "GROUP", "grp", "c1", *opts, "STREAMS", "mystream", ">")


def pending(r: Client, *consumer: str) -> list[list[object]]:
    found: list[list[object]] = r("XPENDING", "mystream", "grp", "-", "+", 10, *consumer)
    return found


def group_info(r: Client, at: int = 0) -> object:
    return dict_get(r("XINFO", "STREAM", "mystream", "FULL"), "groups")[at]


def claim_first(r: Client) -> object:
    reply = r(
        "XREADGROUP", "GROUP", "grp", "c2", "COUNT", 1, "CLAIM", 5, "STREAMS", "mystream", ">"
    )
    return reply[0][1][0][0]


def test_xnack_argument_and_error_validation(r: Client) -> None:
    """XNACK argument and error validation (but WRONGTYPE: no other data type here)"""
    for args in (
        ("XNACK",),
        ("XNACK", "key"),
        ("XNACK", "key", "group"),
        ("XNACK", "key", "group", "SILENT"),
        ("XNACK", "key", "group", "SILENT", "IDS"),
        ("XNACK", "key", "group", "SILENT", "IDS", 1),
    ):
        assert_error("*wrong number of arguments*", r, *args)
    r("DEL", "nosuchkey")
    assert_error("*NOGROUP*", r, "XNACK", "nosuchkey", "grp", "SILENT", "IDS", 1, "1-0")
    r("DEL", "mystream")
    r("XADD", "mystream", "1-0", "f", "v")
    assert_error("*NOGROUP*", r, "XNACK", "mystream", "nogroup", "SILENT", "IDS", 1, "1-0")
    setup(r, 2)
    x = ("XNACK", "mystream", "grp")
    unrecognized = "ERR Unrecognized XNACK option*"
    for args in (
        ("FAIL", "BADOPT", "IDS", 1, "1-0"),
        ("FAIL", "IDS", 1, "1-0", "BADOPT"),
        ("SILENT", "BADOPT", "IDS", 1, "1-0", "FORCE"),
        ("SILENT", "FORCE", "BADOPT", "IDS", 1, "1-0"),
        ("FAIL", "RETRYCOUNT", 5, "BADOPT", "IDS", 1, "1-0"),
        ("FAIL", "IDS", 1, "1-0", "RETRYCOUNT", 5, "BADOPT"),
        ("FAIL", "FORCE", "IDS", 1, "1-0", "BADOPT", "RETRYCOUNT", 5),
        ("FAIL", "FATAL", "IDS", 1, "1-0"),
        ("SILENT", "FAIL", "IDS", 1, "1-0"),
        ("FATAL", "SILENT", "IDS", 1, "1-0"),
        ("FAIL", "SILENT", "FATAL", "IDS", 1, "1-0"),
        ("SILENT", "NOTIDS", 1, "1-0"),
        ("FAIL", "IDS", 1, "1-0", "RETRYCOUNT"),
        ("FAIL", "IDS", 1, "1-0", "2-0"),
    ):
        assert_error(unrecognized, r, *x, *args)
    assert_error("ERR mode must be SILENT, FAIL, or FATAL", r, *x, "BADMODE", "IDS", 1, "1-0")
    assert_error(
        "ERR syntax error, expected IDS keyword", r, *x, "SILENT", "FORCE", "RETRYCOUNT", 5
    )
    for bad in ("abc", 0, -1):
        assert_error("ERR numids must be a positive integer*", r, *x, "SILENT", "IDS", bad, "1-0")
    assert_error("ERR number of IDs doesn't match numids", r, *x, "SILENT", "IDS", 2, "1-0")
    assert_error("ERR Invalid stream ID*", r, *x, "FAIL", "IDS", 1, "not-a-valid-id")
    not_int = "ERR value is not an integer or out of range"
    assert_error(not_int, r, *x, "FAIL", "IDS", 1, "1-0", "RETRYCOUNT", "abc")
    assert_error(
        "ERR Invalid RETRYCOUNT value, must be >= 0",
        r,
        *(*x, "FAIL", "IDS", 1, "1-0", "RETRYCOUNT", -1),
    )
    assert_error(not_int, r, *x, "FAIL", "IDS", 1, "1-0", "RETRYCOUNT", "99999999999999999999")
    assert_error("ERR wrong number of arguments for 'xnack' command", r, *x, "FAIL", "RETRYCOUNT")


def test_xnack_silent_mode_delivery_count_behavior(r: Client) -> None:
    """XNACK SILENT mode delivery_count behavior"""
    setup(r, 1)
    assert pending(r)[0][3] == 1
    assert r("XNACK", "mystream", "grp", "SILENT", "IDS", 1, "1-0") == 1
    assert pending(r) == [["1-0", "", -1, 0]]
    r("XCLAIM", "mystream", "grp", "c2", 0, "1-0", "RETRYCOUNT", 0)
    r("XNACK", "mystream", "grp", "SILENT", "IDS", 1, "1-0")
    assert pending(r)[0][3] == 0
    for _ in range(3):
        r("XCLAIM", "mystream", "grp", "c1", 0, "1-0")
    assert pending(r)[0][3] == 3
    assert r("XNACK", "mystream", "grp", "SILENT", "IDS", 1, "1-0") == 1
    assert pending(r) == [["1-0", "", -1, 2]]


def test_xnack_fail_mode_keeps_delivery_count_unchanged(r: Client) -> None:
    """XNACK FAIL mode keeps delivery_count unchanged"""
    setup(r, 1)
    assert pending(r)[0][3] == 1
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0") == 1
    assert pending(r) == [["1-0", "", -1, 1]]


def test_xnack_fatal_mode_sets_delivery_count_to_max(r: Client) -> None:
    """XNACK FATAL mode sets delivery_count to max"""
    setup(r, 1)
    assert r("XNACK", "mystream", "grp", "FATAL", "IDS", 1, "1-0") == 1
    assert pending(r) == [["1-0", "", -1, LLONG_MAX]]


def test_xnack_releases_entries_and_removes_from_consumer_pel(r: Client) -> None:
    """XNACK releases entries and removes from consumer PEL"""
    setup(r, 3, count_read=2)
    r("XREADGROUP", "GROUP", "grp", "c2", "COUNT", 1, "STREAMS", "mystream", ">")
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "3-0") == 1
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0") == 1
    found = pending(r)
    assert len(found) == 3
    assert found[0] == ["1-0", "", -1, 1] and found[2] == ["3-0", "", -1, 1]
    assert [p[0] for p in pending(r, "c1")] == ["2-0"]
    assert pending(r, "c2") == []
    assert dict_get(r("XINFO", "GROUPS", "mystream")[0], "consumers") == 2


def test_xnack_return_count_and_edge_cases(r: Client) -> None:
    """XNACK return count and edge cases"""
    setup(r, 3)
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "9-9") == 0
    assert r("XNACK", "mystream", "grp", "SILENT", "IDS", 3, "1-0", "2-0", "3-0") == 3
    assert pending(r) == [["1-0", "", -1, 0], ["2-0", "", -1, 0], ["3-0", "", -1, 0]]
    r("XCLAIM", "mystream", "grp", "c1", 0, "1-0", "2-0", "3-0")
    ids = ("1-0", "9-9", "2-0", "8-8", "3-0")
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 5, *ids) == 3
    assert all(p[1] == "" for p in pending(r))
    r("XCLAIM", "mystream", "grp", "c1", 0, "1-0")
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 2, "1-0", "1-0") == 2
    found = pending(r)
    assert len(found) == 3 and found[0] == ["1-0", "", -1, 2]
    r("XACK", "mystream", "grp", "1-0", "2-0", "3-0")
    assert r("XPENDING", "mystream", "grp")[0] == 0
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0") == 0


def test_xnack_on_already_nacked_entry_idempotency_and_mode_changes(r: Client) -> None:
    """XNACK on already-NACKed entry: idempotency and mode changes"""
    setup(r, 1)
    for _ in range(2):
        assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0") == 1
    assert pending(r) == [["1-0", "", -1, 1]]
    assert r("XNACK", "mystream", "grp", "SILENT", "IDS", 1, "1-0") == 1
    assert pending(r)[0][3] == 0
    assert r("XNACK", "mystream", "grp", "FATAL", "IDS", 1, "1-0") == 1
    assert pending(r) == [["1-0", "", -1, LLONG_MAX]]
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0") == 1


def test_xnack_ordering_nacked_entries_at_head_of_pel_with_fifo_order(r: Client) -> None:
    """XNACK ordering: NACKed entries at head of PEL with FIFO order"""
    setup(r, 4)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "3-0")
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    for entry in pending(r):
        if entry[0] in ("3-0", "1-0"):
            assert entry[1] == "" and entry[2] == -1
        else:
            assert entry[1] == "c1"
    pel = dict_get(group_info(r), "pending")
    assert pel[0] == ["1-0", "", 0, 1] and pel[2] == ["3-0", "", 0, 1]
    assert pel[1][0] == "2-0" and pel[1][1] == "c1" and pel[1][3] == 1
    assert pel[3][0] == "4-0" and pel[3][1] == "c1" and pel[3][3] == 1


def test_xnack_nacked_entries_persist_after_xdel_and_xtrim(r: Client) -> None:
    """XNACK NACKed entries persist after XDEL and XTRIM"""
    setup(r, 2)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    r("XDEL", "mystream", "1-0")
    found = pending(r)
    assert len(found) == 2 and found[0] == ["1-0", "", -1, 1]
    setup(r, 3)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    r("XTRIM", "mystream", "MAXLEN", 1)
    found = pending(r)
    assert len(found) == 3 and found[0] == ["1-0", "", -1, 1]


def test_xnack_with_ids_exceeding_streamid_static_vector_len_for_heap_allocation(
    r: Client,
) -> None:
    """XNACK with IDs exceeding STREAMID_STATIC_VECTOR_LEN for heap allocation"""
    r("DEL", "mystream")
    r("XGROUP", "CREATE", "mystream", "grp", "$", "MKSTREAM")
    ids = []
    for i in range(1, 51):
        r("XADD", "mystream", f"{i}-0", "f", f"v{i}")
        ids.append(f"{i}-0")
    r("XREADGROUP", "GROUP", "grp", "c1", "COUNT", 50, "STREAMS", "mystream", ">")
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 50, *ids) == 50
    found = r("XPENDING", "mystream", "grp", "-", "+", 100)
    assert len(found) == 50 and all(p[1] == "" for p in found)


def test_xnack_retrycount_overrides_delivery_count(r: Client) -> None:
    """XNACK RETRYCOUNT overrides delivery_count"""
    setup(r, 1)
    assert r("XNACK", "mystream", "grp", "FATAL", "IDS", 1, "1-0", "RETRYCOUNT", 42) == 1
    assert pending(r) == [["1-0", "", -1, 42]]
    r("XCLAIM", "mystream", "grp", "c1", 0, "1-0")
    assert r("XNACK", "mystream", "grp", "SILENT", "IDS", 1, "1-0", "RETRYCOUNT", 10) == 1
    assert pending(r)[0][3] == 10
    r("XCLAIM", "mystream", "grp", "c1", 0, "1-0")
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0", "RETRYCOUNT", 0) == 1
    assert pending(r) == [["1-0", "", -1, 0]]
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0", "RETRYCOUNT", 99) == 1
    assert pending(r) == [["1-0", "", -1, 99]]


def test_xnack_force_behavior(r: Client) -> None:
    """XNACK FORCE behavior"""
    setup(r, 3, read=False)
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0", "FORCE") == 1
    assert pending(r) == [["1-0", "", -1, 0]]
    claimed = r("XCLAIM", "mystream", "grp", "c1", 0, "1-0")
    assert len(claimed) == 1 and claimed[0][0] == "1-0"
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "9-9", "FORCE") == 0
    r("XACK", "mystream", "grp", "1-0")
    assert r("XNACK", "mystream", "grp", "FATAL", "IDS", 1, "1-0", "FORCE") == 1
    assert pending(r)[0] == ["1-0", "", -1, LLONG_MAX]
    r("XACK", "mystream", "grp", "1-0")
    assert r("XNACK", "mystream", "grp", "SILENT", "IDS", 2, "1-0", "2-0", "FORCE") == 2
    assert pending(r) == [["1-0", "", -1, 0], ["2-0", "", -1, 0]]
    r("XACK", "mystream", "grp", "1-0", "2-0")
    r("XREADGROUP", "GROUP", "grp", "c1", "STREAMS", "mystream", ">")
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 3, "1-0", "2-0", "3-0", "FORCE") == 3
    assert pending(r) == [["1-0", "", -1, 1], ["2-0", "", -1, 1], ["3-0", "", -1, 1]]
    assert pending(r, "c1") == []
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0", "FORCE") == 1
    found = pending(r)
    assert len(found) == 3 and found[0] == ["1-0", "", -1, 1]
    r("DEL", "mystream")
    r("XGROUP", "CREATE", "mystream", "grp", "$", "MKSTREAM")
    assert r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0", "FORCE") == 0
    assert r("XPENDING", "mystream", "grp")[0] == 0


def test_xnack_force_retrycount_combination(r: Client) -> None:
    """XNACK FORCE + RETRYCOUNT combination"""
    setup(r, 3, read=False)
    for mode, sid, count in (("FAIL", "1-0", 7), ("SILENT", "2-0", 5), ("FATAL", "3-0", 99)):
        assert r("XNACK", "mystream", "grp", mode, "IDS", 1, sid, "RETRYCOUNT", count, "FORCE") == 1
    assert pending(r) == [["1-0", "", -1, 7], ["2-0", "", -1, 5], ["3-0", "", -1, 99]]


def test_xnack_flexible_ids_position_options_accepted_before_and_after_ids_block(
    r: Client,
) -> None:
    """XNACK flexible IDS position - options accepted before and after IDS block"""
    setup(r, 3, read=False)
    x = ("XNACK", "mystream", "grp", "FAIL")
    for opts in (
        ("FORCE", "IDS", 1, "1-0"),
        ("FORCE", "RETRYCOUNT", 42, "IDS", 1, "1-0"),
        ("RETRYCOUNT", 5, "IDS", 1, "1-0", "FORCE"),
        ("FORCE", "IDS", 1, "1-0", "RETRYCOUNT", 3),
    ):
        assert r(*x, *opts) == 1
        r("XACK", "mystream", "grp", "1-0")
    assert r(*x, "RETRYCOUNT", 10, "IDS", 3, "1-0", "2-0", "3-0", "FORCE") == 3
    r("XACK", "mystream", "grp", "1-0", "2-0", "3-0")
    assert r(*x, "IDS", 1, "1-0", "RETRYCOUNT", 20, "FORCE") == 1


def test_xnack_re_nack_moves_entry_to_end_of_nack_zone(r: Client) -> None:
    """XNACK re-NACK moves entry to end of NACK zone"""
    setup(r, 3)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 3, "1-0", "2-0", "3-0")
    assert dict_get(group_info(r), "nacked-count") == 3
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    assert dict_get(group_info(r), "nacked-count") == 3
    assert dict_get(group_info(r), "pel-count") == 3
    for expected in ("2-0", "3-0", "1-0"):
        after(10)
        assert claim_first(r) == expected


def test_xnack_nacked_entries_claimable_via_xclaim_xautoclaim_and_xreadgroup_claim(
    r: Client,
) -> None:
    """XNACK NACKed entries claimable via XCLAIM, XAUTOCLAIM, and XREADGROUP CLAIM"""
    for count, how in ((2, "xclaim-99999"), (2, "xautoclaim-99999"), (1, "xclaim-0")):
        setup(r, count)
        r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
        if how.startswith("xclaim"):
            claimed = r("XCLAIM", "mystream", "grp", "c2", how.split("-")[1], "1-0")
        else:
            claimed = r("XAUTOCLAIM", "mystream", "grp", "c2", 99999, "0-0")[1]
        assert len(claimed) == 1 and claimed[0][0] == "1-0"
        if how != "xautoclaim-99999":
            assert [p[0] for p in pending(r, "c2")] == ["1-0"]
    setup(r, 1)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    claimed = r("XAUTOCLAIM", "mystream", "grp", "c2", 0, "0-0")[1]
    assert len(claimed) == 1 and claimed[0][0] == "1-0"
    assert [p[0] for p in pending(r, "c2")] == ["1-0"]
    setup(r, 1)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    after(10)
    r("XREADGROUP", "GROUP", "grp", "c2", "CLAIM", 5, "STREAMS", "mystream", ">")
    assert [p[0] for p in pending(r, "c2")] == ["1-0"]


def test_xnack_xclaim_xautoclaim_of_deleted_nacked_entries_cleans_pel(r: Client) -> None:
    """XNACK XCLAIM/XAUTOCLAIM of deleted NACKed entries cleans PEL"""
    setup(r, 3)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 2, "1-0", "3-0")
    r("XDEL", "mystream", "1-0")
    r("XDEL", "mystream", "3-0")
    assert r("XCLAIM", "mystream", "grp", "c2", 0, "1-0") == []
    found = pending(r)
    assert len(found) == 2
    assert found[0][0] == "2-0" and found[0][1] == "c1" and found[0][3] == 1
    assert found[1] == ["3-0", "", -1, 1]
    reply = r("XAUTOCLAIM", "mystream", "grp", "c2", 0, "0-0")
    assert [m[0] for m in reply[1]] == ["2-0"] and reply[2] == ["3-0"]
    found = pending(r)
    assert len(found) == 1 and found[0][0] == "2-0" and found[0][1] == "c2" and found[0][3] == 2


def test_xnack_xreadgroup_block_claim_wakes_up_on_nacked_entries(r: Client) -> None:
    """XNACK XREADGROUP BLOCK CLAIM wakes up on NACKed entries"""
    setup(r, 2)
    rd = r.deferring()
    rd.send(
        *("XREADGROUP", "GROUP", "grp", "c2", "BLOCK", 5000, "CLAIM", 1000),
        *("STREAMS", "mystream", ">"),
    )
    wait_for_blocked_clients_count(r, 1)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 2, "1-0", "2-0")
    wait_for_blocked_clients_count(r, 0)
    result = rd.read()
    assert len(result) == 1 and result[0][0] == "mystream"
    assert [m[0] for m in result[0][1]] == ["1-0", "2-0"]
    assert [p[0] for p in pending(r, "c2")] == ["1-0", "2-0"]
    rd.close()


def test_xnack_xreadgroup_pending_read_excludes_nacked_entries(r: Client) -> None:
    """XNACK XREADGROUP pending read excludes NACKed entries"""
    setup(r, 3)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 2, "1-0", "3-0")
    result = r("XREADGROUP", "GROUP", "grp", "c1", "STREAMS", "mystream", "0-0")
    assert [m[0] for m in result[0][1]] == ["2-0"]


def test_xnack_effect_on_consumer_state_and_xinfo_consumers(r: Client) -> None:
    """XNACK effect on consumer state and XINFO CONSUMERS"""
    setup(r, 3)
    assert dict_get(r("XINFO", "CONSUMERS", "mystream", "grp")[0], "pending") == 3
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 2, "1-0", "2-0")
    assert dict_get(r("XINFO", "CONSUMERS", "mystream", "grp")[0], "pending") == 1
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "3-0")
    assert pending(r, "c1") == []
    assert dict_get(r("XINFO", "GROUPS", "mystream")[0], "consumers") == 1


def test_xnack_xgroup_destroy_cleans_up_nacked_entries(r: Client) -> None:
    """XNACK XGROUP DESTROY cleans up NACKed entries"""
    setup(r, 2)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 2, "1-0", "2-0")
    assert r("XPENDING", "mystream", "grp")[0] == 2
    r("XGROUP", "DESTROY", "mystream", "grp")
    r("XGROUP", "CREATE", "mystream", "grp2", "0")
    assert r("XPENDING", "mystream", "grp2")[0] == 0


def test_xnack_xgroup_delconsumer_works_when_group_pel_has_nacked_entries(r: Client) -> None:
    """XNACK XGROUP DELCONSUMER works when group PEL has NACKed entries"""
    setup(r, 2)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    assert r("XGROUP", "DELCONSUMER", "mystream", "grp", "c1") == 1
    assert r("XPENDING", "mystream", "grp")[0] == 1
    assert pending(r) == [["1-0", "", -1, 1]]
    assert dict_get(group_info(r), "nacked-count") == 1
    assert len(r("XCLAIM", "mystream", "grp", "c2", 0, "1-0")) == 1


def test_xnack_xinfo_stream_full_nacked_count_reflects_nack_zone_size(r: Client) -> None:
    """XNACK XINFO STREAM FULL nacked-count reflects nack zone size"""
    setup(r, 4, count_read=4)

    def counts(at: int = 0) -> tuple[object, object]:
        group = group_info(r, at)
        return dict_get(group, "nacked-count"), dict_get(group, "pel-count")

    assert counts() == (0, 4)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    assert counts() == (1, 4)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 2, "2-0", "3-0")
    assert counts() == (3, 4)
    r("XCLAIM", "mystream", "grp", "c1", 0, "1-0")
    assert counts() == (2, 4)
    r("XACK", "mystream", "grp", "2-0")
    assert counts() == (1, 3)
    r("XACK", "mystream", "grp", "3-0")
    assert counts() == (0, 2)
    r("XNACK", "mystream", "grp", "FAIL", "IDS", 1, "1-0")
    r("XGROUP", "CREATE", "mystream", "grp2", "0")
    r("XREADGROUP", "GROUP", "grp2", "c2", "COUNT", 4, "STREAMS", "mystream", ">")
    assert counts(0)[0] == 1 and counts(1)[0] == 0
