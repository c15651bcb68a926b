"""`streams.cluster.command` and `replies`: CLUSTER's replies and errors without a server.

The shapes were taken from redis-server 7.0.15 (tests/differential/test_cluster_vs_redis.py
compares them with a real two-master cluster); here they are pinned for layouts a real cluster
is awkward to build: several runs per node, single-slot runs, a node without slots, three nodes.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from streams import errors
from streams.cluster import Layout, cluster_command, flag_command, info_section
from streams.cluster.replies import HELP
from streams.errors import CommandError
from streams.reply import OK, Map, Reply, Status, to_resp2_python
from streams.resp.encode import encode
from streams.slots import key_slot, shard_ranges

TWO = Layout.build("r1", 2, [("127.0.0.1", 7001), ("127.0.0.1", 7002)], myself=0)
ID0, ID1 = (n.node_id.encode() for n in TWO.nodes)


def _no_keys() -> Iterable[bytes]:
    raise AssertionError("only COUNTKEYSINSLOT and GETKEYSINSLOT read the keys")


def run(layout: Layout, *args: bytes, keys: list[bytes] | None = None, now_ms: int = 0) -> Reply:
    source = _no_keys if keys is None else (lambda: keys)
    return cluster_command(list(args), layout, source, now_ms)


def error_of(layout: Layout, *args: bytes) -> str:
    with pytest.raises(CommandError) as caught:
        run(layout, *args)
    return caught.value.text


def test_slots_of_two_nodes() -> None:
    assert run(TWO, b"CLUSTER", b"SLOTS") == [
        [0, 8191, [b"127.0.0.1", 7001, ID0, Map(())]],
        [8192, 16383, [b"127.0.0.1", 7002, ID1, Map(())]],
    ]
    assert encode(run(TWO, b"cluster", b"slots"), 2).endswith(b"%s\r\n*0\r\n" % ID1)
    assert encode(run(TWO, b"cluster", b"slots"), 3).endswith(b"%s\r\n%%0\r\n" % ID1)


def test_shards_are_maps_of_slot_edges_and_node_details() -> None:
    first = run(TWO, b"CLUSTER", b"SHARDS")[0]  # type: ignore[index]
    assert to_resp2_python(first) == [
        b"slots",
        [0, 8191],
        b"nodes",
        [
            [
                b"id", ID0, b"port", 7001, b"ip", b"127.0.0.1", b"endpoint", b"127.0.0.1",
                b"role", b"master", b"replication-offset", 0, b"health", b"online",
            ]
        ],
    ]  # fmt: skip
    assert encode(first, 3).startswith(b"%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:8191\r\n")


def test_nodes_lines() -> None:
    text = run(TWO, b"CLUSTER", b"NODES", now_ms=1700000000123)
    assert text == (
        b"%s 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-8191\n"
        b"%s 127.0.0.1:7002@17002 master - 0 1700000000123 2 connected 8192-16383\n" % (ID0, ID1)
    )


# 16384 shards of one slot each: node 0 owns slots 5 and 7..9, node 1 nothing, node 2 the rest.
FINE = Layout.build(
    "r2",
    16384,
    [("10.0.0.1", 6379), ("10.0.0.2", 6379), ("10.0.0.3", 6380)],
    myself=1,
    owners=[(5, 7, 8, 9), (), [s for s in range(16384) if s not in (5, 7, 8, 9)]],
)


def test_single_slot_runs_and_a_node_without_slots() -> None:
    lines = run(FINE, b"CLUSTER", b"NODES", now_ms=9).decode().splitlines()  # type: ignore[union-attr]
    assert [line.split(" ", 8)[2:] for line in lines] == [
        ["master", "-", "0", "9", "1", "connected", "5 7-9"],
        ["myself,master", "-", "0", "0", "2", "connected"],
        ["master", "-", "0", "9", "3", "connected", "0-4 6 10-16383"],
    ]
    slots = run(FINE, b"CLUSTER", b"SLOTS")
    assert [(s[0], s[1], s[2][0]) for s in slots] == [  # type: ignore[index,union-attr]
        (0, 4, b"10.0.0.3"),
        (5, 5, b"10.0.0.1"),
        (6, 6, b"10.0.0.3"),
        (7, 9, b"10.0.0.1"),
        (10, 16383, b"10.0.0.3"),
    ]
    shards = [to_resp2_python(s) for s in run(FINE, b"CLUSTER", b"SHARDS")]  # type: ignore[union-attr]
    assert [s[1] for s in shards] == [[5, 5, 7, 9], [], [0, 4, 6, 6, 10, 16383]]  # type: ignore[index]


def test_info_of_a_region_with_a_node_without_slots() -> None:
    text = run(FINE, b"CLUSTER", b"INFO")
    assert isinstance(text, bytes)
    fields = dict(line.split(":") for line in text.decode().split("\r\n") if line)
    assert text.endswith(b"\r\n") and list(fields)[0] == "cluster_state"
    assert fields == {
        "cluster_state": "ok",
        "cluster_slots_assigned": "16384",
        "cluster_slots_ok": "16384",
        "cluster_slots_pfail": "0",
        "cluster_slots_fail": "0",
        "cluster_known_nodes": "3",
        "cluster_size": "2",
        "cluster_current_epoch": "3",
        "cluster_my_epoch": "2",
        "cluster_stats_messages_sent": "0",
        "cluster_stats_messages_received": "0",
        "total_cluster_links_buffer_limit_exceeded": "0",
    }


def test_myid_and_keyslot() -> None:
    assert run(FINE, b"CLUSTER", b"MYID") == FINE.nodes[1].node_id.encode()
    assert run(TWO, b"CLUSTER", b"KEYSLOT", b"{user1000}.following") == 3443
    assert run(TWO, b"CLUSTER", b"KEYSLOT", b"") == 0


KEYS = [b"{t}%d" % i for i in range(5)] + [b"a", b"b"]


def test_keys_in_slot_count_and_list_the_slot_keys_in_the_order_given() -> None:
    slot = b"%d" % key_slot(b"t")
    assert run(TWO, b"CLUSTER", b"COUNTKEYSINSLOT", slot, keys=KEYS) == 5
    assert run(TWO, b"CLUSTER", b"COUNTKEYSINSLOT", b"0", keys=KEYS) == 0
    assert run(TWO, b"CLUSTER", b"GETKEYSINSLOT", slot, b"3", keys=KEYS) == KEYS[:3]
    assert run(TWO, b"CLUSTER", b"GETKEYSINSLOT", slot, b"0", keys=KEYS) == []
    assert run(TWO, b"CLUSTER", b"GETKEYSINSLOT", slot, b"99", keys=KEYS) == KEYS[:5]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ([b"CLUSTER"], "ERR wrong number of arguments for 'cluster' command"),
        ([b"CLUSTER", b"nope"], "ERR unknown subcommand 'nope'. Try CLUSTER HELP."),
        ([b"CLUSTER", b"slots", b"x"], "ERR wrong number of arguments for 'cluster|slots' command"),
        ([b"CLUSTER", b"COUNTKEYSINSLOT", b"x"], errors.NOT_INTEGER),
        ([b"CLUSTER", b"COUNTKEYSINSLOT", b"16384"], errors.INVALID_SLOT),
        ([b"CLUSTER", b"COUNTKEYSINSLOT", b"-1"], errors.INVALID_SLOT),
        ([b"CLUSTER", b"GETKEYSINSLOT", b"1", b"x"], errors.NOT_INTEGER),
        ([b"CLUSTER", b"GETKEYSINSLOT", b"1", b"-1"], errors.INVALID_SLOT_OR_COUNT),
        ([b"CLUSTER", b"GETKEYSINSLOT", b"16384", b"0"], errors.INVALID_SLOT_OR_COUNT),
        ([b"CLUSTER", b"REPLICAS", b"x\x00y"], "ERR Unknown node x"),
        ([b"CLUSTER", b"COUNT-FAILURE-REPORTS", ID0 + b"0"], f"ERR Unknown node {ID0.decode()}0"),
        (
            [b"CLUSTER", b"MEET", b"127.0.0.1", b"7003"],
            "ERR unsupported command 'cluster|meet': not available in this database",
        ),
        (
            [b"CLUSTER", b"ADDSLOTS", b"1"],
            "ERR unsupported command 'cluster|addslots': not available in this database",
        ),
    ],
)
def test_errors(args: list[bytes], text: str) -> None:
    assert error_of(TWO, *args) == text


def test_peer_queries_of_a_replica_free_cluster() -> None:
    assert run(TWO, b"CLUSTER", b"REPLICAS", ID1) == []
    assert run(TWO, b"CLUSTER", b"SLAVES", ID0) == []
    assert run(TWO, b"CLUSTER", b"COUNT-FAILURE-REPORTS", ID1) == 0


def test_help_names_the_command_as_typed() -> None:
    reply = run(TWO, b"cluster", b"help")
    assert isinstance(reply, list) and len(reply) == len(HELP) + 3
    assert reply[0] == Status("CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    assert reply[-2:] == [Status("HELP"), Status("    Prints this help.")]


def test_flags_and_info_section() -> None:
    assert flag_command([b"READONLY"]) is OK
    assert info_section() == {"cluster_enabled": 1}


def test_three_nodes_from_each_point_of_view() -> None:
    endpoints = [("127.0.0.1", 7001 + i) for i in range(3)]
    for me in range(3):
        layout = Layout.build("r3", 3, endpoints, myself=me)
        lines = run(layout, b"CLUSTER", b"NODES").splitlines()  # type: ignore[union-attr]
        assert [b"myself" in line for line in lines] == [i == me for i in range(3)]
        ranges = shard_ranges(3)
        assert [line.rsplit(b" ", 1)[1] for line in lines] == [
            b"%d-%d" % (r.start, r.stop - 1) for r in ranges
        ]
        assert run(layout, b"CLUSTER", b"SLOTS") == run(
            Layout.build("r3", 3, endpoints, myself=(me + 1) % 3), b"CLUSTER", b"SLOTS"
        )
