"""XDELEX (stream.tcl) and XACKDEL (stream-cgroups.tcl) cases, with the stream-cgroups.tcl cases
of XGROUP DESTROY that concern ACKED and XINFO FULL's new length, ported one for one (see
test_stream_tcl.py)."""

from __future__ import annotations

from redis8.tcl import Client, assert_error, dict_get

EMPTY_PEL = [0, "", "", ""]


def two_groups_read_both(r: Client, *groups: str) -> None:
    r("DEL", "mystream")
    r("XADD", "mystream", "1-0", "f", "v")
    r("XADD", "mystream", "2-0", "f", "v")
    for n, group in enumerate(groups, 1):
        r("XGROUP", "CREATE", "mystream", group, "0")
        r("XREADGROUP", "GROUP", group, f"consumer{n}", "STREAMS", "mystream", ">")


# --- XDELEX -------------------------------------------------------------------------------------


def test_xdelex_wrong_number_of_args(r: Client) -> None:
    """XDELEX wrong number of args"""
    assert_error("*wrong number of arguments for 'xdelex' command", r, "XDELEX", "s", "DELREF")


def test_xdelex_should_return_empty_array_when_key_doesnt_exist(r: Client) -> None:
    """XDELEX should return empty array when key doesn't exist"""
    r("DEL", "nonexist")
    assert r("XDELEX", "nonexist", "IDS", 2, "1-1", "2-2") == [-1, -1]


def test_xdelex_ids_parameter_validation(r: Client) -> None:
    """XDELEX IDS parameter validation"""
    r("DEL", "s")
    r("XADD", "s", "1-0", "f", "v")
    r("XGROUP", "CREATE", "s", "g", "0")
    for bad in ("abc", 0, -5):
        assert_error(
            "*Number of IDs must be a positive integer*", r, "XDELEX", "s", "IDS", bad, "1-1"
        )
    assert_error(
        "*The `numids` parameter must match the number of arguments*",
        r,
        *("XDELEX", "s", "IDS", 3, "1-1", "2-2"),
    )
    assert_error("*syntax error*", r, "XDELEX", "s", "IDS", 1, "1-1", "2-2")
    assert r("XDELEX", "s", "IDS", 2, "1-1", "2-2") == [-1, -1]


def test_xdelex_keepref_delref_acked_parameter_validation(r: Client) -> None:
    """XDELEX KEEPREF/DELREF/ACKED parameter validation"""
    for first, second in (("KEEPREF", "DELREF"), ("KEEPREF", "ACKED"), ("ACKED", "DELREF")):
        assert_error("*syntax error*", r, "XDELEX", "s", first, second, "IDS", 1, "1-1")


def test_xdelex_with_delref_option_acknowledges_will_remove_entry_from_all_pels(r: Client) -> None:
    """XDELEX with DELREF option acknowledges will remove entry from all PELs"""
    two_groups_read_both(r, "group1", "group2")
    assert r("XDELEX", "mystream", "DELREF", "IDS", 2, "1-0", "2-0") == [1, 1]
    assert r("XLEN", "mystream") == 0
    assert r("XPENDING", "mystream", "group1") == EMPTY_PEL
    assert r("XPENDING", "mystream", "group2") == EMPTY_PEL


def test_xdelex_with_acked_option_only_deletes_messages_acknowledged_by_all_groups(
    r: Client,
) -> None:
    """XDELEX with ACKED option only deletes messages acknowledged by all groups"""
    two_groups_read_both(r, "group1", "group2")
    r("XGROUP", "CREATE", "mystream", "group3", "0")
    r("XACK", "mystream", "group1", "1-0", "2-0")
    assert r("XDELEX", "mystream", "ACKED", "IDS", 2, "1-0", "2-0") == [2, 2]
    assert r("XLEN", "mystream") == 2
    r("XACK", "mystream", "group2", "1-0", "2-0")
    assert r("XDELEX", "mystream", "ACKED", "IDS", 2, "1-0", "2-0") == [2, 2]
    assert r("XLEN", "mystream") == 2
    r("XREADGROUP", "GROUP", "group3", "consumer3", "STREAMS", "mystream", ">")
    assert r("XDELEX", "mystream", "ACKED", "IDS", 2, "1-0", "2-0") == [2, 2]
    assert r("XLEN", "mystream") == 2
    r("XACK", "mystream", "group3", "1-0", "2-0")
    r("XDELEX", "mystream", "ACKED", "IDS", 2, "1-0", "2-0")
    assert r("XLEN", "mystream") == 0


def test_xdelex_with_acked_option_wont_delete_messages_when_new_consumer_groups_are_created(
    r: Client,
) -> None:
    """XDELEX with ACKED option won't delete messages when new consumer groups are created"""
    r("DEL", "mystream")
    for i in (1, 2, 3):
        r("XADD", "mystream", f"{i}-0", "f", "v")
    r("XGROUP", "CREATE", "mystream", "group1", "0")
    r("XREADGROUP", "GROUP", "group1", "consumer1", "STREAMS", "mystream", ">")
    assert r("XACK", "mystream", "group1", "1-0", "2-0", "3-0") == 3
    assert r("XDELEX", "mystream", "ACKED", "IDS", 1, "1-0") == [1]
    r("XGROUP", "CREATE", "mystream", "group2", "0")
    assert r("XDELEX", "mystream", "ACKED", "IDS", 1, "2-0") == [2]
    r("XREADGROUP", "GROUP", "group2", "consumer1", "STREAMS", "mystream", ">")
    assert r("XACK", "mystream", "group2", "2-0", "3-0") == 2
    assert r("XDELEX", "mystream", "ACKED", "IDS", 2, "2-0", "3-0") == [1, 1]


def test_xdelex_with_keepref(r: Client) -> None:
    """XDELEX with KEEPREF"""
    two_groups_read_both(r, "group1", "group2")
    assert r("XDELEX", "mystream", "KEEPREF", "IDS", 2, "1-0", "2-0") == [1, 1]
    assert r("XLEN", "mystream") == 0
    assert r("XPENDING", "mystream", "group1") == [2, "1-0", "2-0", [["consumer1", "2"]]]
    assert r("XPENDING", "mystream", "group2") == [2, "1-0", "2-0", [["consumer2", "2"]]]


# --- XACKDEL ------------------------------------------------------------------------------------


def test_xackdel_wrong_number_of_args(r: Client) -> None:
    """XACKDEL wrong number of args"""
    for args in (("XACKDEL",), ("XACKDEL", "s"), ("XACKDEL", "s", "g")):
        assert_error("*wrong number of arguments for 'xackdel' command", r, *args)


def test_xackdel_should_return_empty_array_when_key_doesnt_exist_or_group_doesnt_exist(
    r: Client,
) -> None:
    """XACKDEL should return empty array when key doesn't exist or group doesn't exist"""
    r("DEL", "s")
    assert r("XACKDEL", "s", "g", "IDS", 2, "1-1", "2-2") == [-1, -1]
    r("XADD", "s", "1-0", "f", "v")
    assert r("XACKDEL", "s", "g", "IDS", 2, "1-1", "2-2") == [-1, -1]


def test_xackdel_ids_parameter_validation(r: Client) -> None:
    """XACKDEL IDS parameter validation"""
    r("DEL", "s")
    r("XADD", "s", "1-0", "f", "v")
    r("XGROUP", "CREATE", "s", "g", "0")
    for bad in ("abc", 0, -5):
        assert_error(
            "*Number of IDs must be a positive integer*", r, "XACKDEL", "s", "g", "IDS", bad, "1-1"
        )
    assert_error(
        "*The `numids` parameter must match the number of arguments*",
        r,
        *("XACKDEL", "s", "g", "IDS", 3, "1-1", "2-2"),
    )
    assert_error("*syntax error*", r, "XACKDEL", "s", "g", "IDS", 1, "1-1", "2-2")


def test_xackdel_keepref_delref_acked_parameter_validation(r: Client) -> None:
    """XACKDEL KEEPREF/DELREF/ACKED parameter validation"""
    for first, second in (("KEEPREF", "DELREF"), ("KEEPREF", "ACKED"), ("DELREF", "ACKED")):
        assert_error("*syntax error*", r, "XACKDEL", "s", "g", first, second, "IDS", 1, "1-1")


def test_xackdel_with_delref_option_acknowledges_will_remove_entry_from_all_pels(
    r: Client,
) -> None:
    """XACKDEL with DELREF option acknowledges will remove entry from all PELs"""
    two_groups_read_both(r, "group1", "group2")
    assert r("XACKDEL", "mystream", "group1", "DELREF", "IDS", 2, "1-0", "2-0") == [1, 1]
    assert r("XLEN", "mystream") == 0
    assert r("XPENDING", "mystream", "group1") == EMPTY_PEL
    assert r("XPENDING", "mystream", "group2") == EMPTY_PEL
    assert r("XACKDEL", "mystream", "group2", "DELREF", "IDS", 2, "1-0", "2-0") == [-1, -1]


def test_xackdel_with_acked_option_only_deletes_messages_acknowledged_by_all_groups(
    r: Client,
) -> None:
    """XACKDEL with ACKED option only deletes messages acknowledged by all groups"""
    two_groups_read_both(r, "group1", "group2")
    assert r("XACKDEL", "mystream", "group1", "ACKED", "IDS", 2, "1-0", "2-0") == [2, 2]
    assert r("XLEN", "mystream") == 2
    assert r("XPENDING", "mystream", "group1") == EMPTY_PEL
    assert r("XPENDING", "mystream", "group2") == [2, "1-0", "2-0", [["consumer2", "2"]]]
    assert r("XACKDEL", "mystream", "group2", "ACKED", "IDS", 2, "1-0", "2-0") == [1, 1]
    assert r("XLEN", "mystream") == 0
    assert r("XPENDING", "mystream", "group1") == EMPTY_PEL
    assert r("XPENDING", "mystream", "group2") == EMPTY_PEL


def test_xackdel_with_keepref(r: Client) -> None:
    """XACKDEL with KEEPREF"""
    two_groups_read_both(r, "group1", "group2")
    assert r("XACKDEL", "mystream", "group1", "KEEPREF", "IDS", 2, "1-0", "2-0") == [1, 1]
    assert r("XLEN", "mystream") == 0
    assert r("XPENDING", "mystream", "group1") == EMPTY_PEL
    assert r("XPENDING", "mystream", "group2") == [2, "1-0", "2-0", [["consumer2", "2"]]]
    assert r("XACKDEL", "mystream", "group2", "KEEPREF", "IDS", 2, "1-0", "2-0") == [1, 1]
    assert r("XPENDING", "mystream", "group1") == EMPTY_PEL
    assert r("XPENDING", "mystream", "group2") == EMPTY_PEL


def test_xackdel_with_ids_exceeding_streamid_static_vector_len_for_heap_allocation(
    r: Client,
) -> None:
    """XACKDEL with IDs exceeding STREAMID_STATIC_VECTOR_LEN for heap allocation"""
    r("DEL", "mystream")
    r("XGROUP", "CREATE", "mystream", "mygroup", "$", "MKSTREAM")
    ids = [f"{i}-1" for i in range(50)]
    assert len(r("XACKDEL", "mystream", "mygroup", "IDS", 50, *ids)) == 50
    assert r("PING") == "PONG"


# --- XGROUP DESTROY and references; XINFO FULL ---------------------------------------------------


def test_xgroup_destroy_removes_all_consumer_group_references(r: Client) -> None:
    """XGROUP DESTROY removes all consumer group references"""
    r("DEL", "mystream")
    for j in range(5):
        r("XADD", "mystream", f"{j}-1", "item", j)
    r("XGROUP", "CREATE", "mystream", "mygroup", "0")
    r("XREADGROUP", "GROUP", "mygroup", "consumer1", "STREAMS", "mystream", ">")
    assert r("XPENDING", "mystream", "mygroup")[0] == 5
    ids = [f"{j}-1" for j in range(5)]
    assert r("XDELEX", "mystream", "ACKED", "IDS", 5, *ids) == [2, 2, 2, 2, 2]
    r("XGROUP", "DESTROY", "mystream", "mygroup")
    assert r("XDELEX", "mystream", "ACKED", "IDS", 5, *ids) == [1, 1, 1, 1, 1]
    assert r("XLEN", "mystream") == 0


def test_xgroup_destroy_correctly_manage_min_cgroup_last_id_cache(r: Client) -> None:
    """XGROUP DESTROY correctly manage min_cgroup_last_id cache"""
    r("DEL", "mystream")
    for i in range(1, 6):
        r("XADD", "mystream", f"{i}-0", f"f{i}", f"v{i}")
    r("XGROUP", "CREATE", "mystream", "group1", "1-0")
    r("XGROUP", "CREATE", "mystream", "group2", "3-0")
    assert r("XDELEX", "mystream", "ACKED", "IDS", 1, "1-0") == [1]
    assert r("XDELEX", "mystream", "ACKED", "IDS", 1, "2-0") == [2]
    r("XGROUP", "DESTROY", "mystream", "group1")
    assert r("XDELEX", "mystream", "ACKED", "IDS", 1, "2-0") == [1]


def test_xinfo_full_output(r: Client) -> None:
    """XINFO FULL output (the newest Redis's 30 elements: the IDMP fields of 8.6)"""
    r("DEL", "x")
    for ms, field in ((100, "a"), (101, "b"), (102, "c"), (103, "e"), (104, "f")):
        r("XADD", "x", ms, field, 1)
    r("XGROUP", "CREATE", "x", "g1", "0")
    r("XGROUP", "CREATE", "x", "g2", "0")
    r("XREADGROUP", "GROUP", "g1", "Alice", "COUNT", 1, "STREAMS", "x", ">")
    r("XREADGROUP", "GROUP", "g1", "Bob", "COUNT", 1, "STREAMS", "x", ">")
    r("XREADGROUP", "GROUP", "g1", "Bob", "NOACK", "COUNT", 1, "STREAMS", "x", ">")
    r("XREADGROUP", "GROUP", "g2", "Charlie", "COUNT", 4, "STREAMS", "x", ">")
    r("XDEL", "x", 103)
    reply = r("XINFO", "STREAM", "x", "FULL")
    assert len(reply) == 30
    assert dict_get(reply, "length") == 4
    assert dict_get(reply, "entries") == [
        ["100-0", ["a", "1"]],
        ["101-0", ["b", "1"]],
        ["102-0", ["c", "1"]],
        ["104-0", ["f", "1"]],
    ]
    g1, g2 = dict_get(reply, "groups")
    assert dict_get(g1, "name") == "g1" and dict_get(g1, "pending")[0][0] == "100-0"
    alice = dict_get(g1, "consumers")[0]
    assert dict_get(alice, "name") == "Alice" and dict_get(alice, "pending")[0][0] == "100-0"
    assert dict_get(g2, "name") == "g2"
    charlie = dict_get(g2, "consumers")[0]
    assert dict_get(charlie, "name") == "Charlie"
    assert [p[0] for p in dict_get(charlie, "pending")[:2]] == ["100-0", "101-0"]
    reply = r("XINFO", "STREAM", "x", "FULL", "COUNT", 1)
    assert len(reply) == 30
    assert dict_get(reply, "length") == 4
    assert dict_get(reply, "entries") == [["100-0", ["a", "1"]]]
