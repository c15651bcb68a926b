"""Consumer-group commands over pure regions: replies, ops, PEL, consumers, errors, and the
multi-region rules of docs/architecture.md, "Replicated state" (replicated existence, local PEL,
`>` never skips, consecutive-XACK effects)."""

from __future__ import annotations

import pytest

from streams.commands.base import BlockRequest
from streams.commands.execute import Executed, run
from streams.commands.readargs import parse_read_args
from streams.crdt import ops
from streams.crdt.groups import Group
from streams.crdt.lag import estimate_distance, group_lag, range_has_tombstones
from streams.crdt.region import Region
from streams.crdt.state import KeyState
from streams.errors import CommandError
from streams.ids import IdMode
from streams.reply import NULL_ARRAY, Map, Status, to_resp2_python

NOW = 1_000_000


class Net:
    """Regions plus every replicated op each has issued, for explicit syncs."""

    def __init__(self, n: int, mode: IdMode = IdMode.LIBERAL) -> None:
        self.regions = {i: Region(i, mode) for i in range(1, n + 1)}
        self.log: dict[int, list[ops.Op]] = {i: [] for i in self.regions}
        self.local: dict[int, list[ops.LocalOp]] = {i: [] for i in self.regions}

    def __call__(self, region: int, line: str, now: int = NOW) -> Executed:
        done = run(self.regions[region], [w.encode() for w in line.split()], now)
        self.log[region].extend(done.replicated)
        self.local[region].extend(done.local)
        return done

    def reply(self, region: int, line: str, now: int = NOW) -> object:
        return to_resp2_python(self(region, line, now).reply)

    def flush_acks(self, region: int, now: int = NOW) -> list[ops.Op]:
        issued = self.regions[region].flush_acks(now)
        self.log[region].extend(issued)
        return issued

    def sync(self, *only: int) -> None:
        ids = only or tuple(self.regions)
        for dst in ids:
            for src in ids:
                if src != dst:
                    for op in self.log[src]:
                        self.regions[dst].receive(op)


def group_info(net: Net, region: int, key: str) -> list[dict[bytes, object]]:
    rows = net.reply(region, f"XINFO GROUPS {key}")
    assert isinstance(rows, list)
    return [dict(zip(r[::2], r[1::2], strict=True)) for r in rows]


def ids_of(read_reply: object) -> list[bytes]:
    """The entry IDs of an XREADGROUP reply (RESP2 shape), all keys together."""
    if read_reply is None:
        return []
    assert isinstance(read_reply, list)
    return [entry[0] for _key, entries in read_reply for entry in entries]


def state_group(net: Net, region: int, key: bytes, name: bytes) -> Group:
    group = net.regions[region].state.group(key, name)
    assert group is not None
    return group


# --- XGROUP --------------------------------------------------------------------------------------


def test_create_is_replicated_and_local_parts_are_not() -> None:
    net = Net(2)
    net(1, "XADD x 110-0 f v")
    created = net(1, "XGROUP CREATE x g 0")
    assert created.reply == Status("OK")
    assert [type(op.body) for op in created.replicated] == [ops.GroupCreate]
    read = net(1, "XREADGROUP GROUP g alice STREAMS x >")
    assert not read.replicated and [type(r.body) for r in read.local] == [ops.Deliver]
    net.sync()
    assert [g[b"name"] for g in group_info(net, 2, "x")] == [b"g"]
    assert group_info(net, 2, "x")[0][b"consumers"] == 0
    assert group_info(net, 2, "x")[0][b"pending"] == 0
    assert net.reply(2, "XINFO CONSUMERS x g") == []
    assert net.reply(2, "XPENDING x g - + 1") == []
    assert net.reply(1, "XPENDING x g - + 1") == [[b"110-0", b"alice", 0, 1]]
    assert net.reply(1, "XINFO CONSUMERS x g") == [[b"name", b"alice", b"pending", 1, b"idle", 0]]


def test_create_errors_and_mkstream() -> None:
    net = Net(1)
    assert net.reply(1, "XGROUP CREATE x g 0") == CommandError(
        "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want "
        "to use the MKSTREAM option to create an empty stream automatically."
    )
    assert net.reply(1, "XGROUP CREATE x g 0 MKSTREAM") == b"OK"
    assert net.reply(1, "EXISTS x") == 1
    assert net.reply(1, "XGROUP CREATE x g 0") == CommandError(
        "BUSYGROUP Consumer Group name already exists"
    )
    assert net.reply(1, "XGROUP CREATE x h 0 ENTRIESREAD -2") == CommandError(
        "ERR value for ENTRIESREAD must be positive or -1"
    )
    assert net.reply(1, "XGROUP CREATE x h 0 BOGUS") == CommandError(
        "ERR unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."
    )
    assert net.reply(1, "XGROUP SETID x nope 0") == CommandError(
        "NOGROUP No such consumer group 'nope' for key name 'x'"
    )
    assert net.reply(1, "XGROUP CREATE x") == CommandError(
        "ERR wrong number of arguments for 'xgroup|create' command"
    )


def test_dollar_is_the_end_of_each_origin_log() -> None:
    net = Net(3, IdMode.STRICT)
    net(1, "XADD x 100 f v", now=100)
    net(2, "XADD x 200 f v", now=200)
    net(3, "XADD x 150 f v", now=150)
    net.sync(1, 2)
    net(1, "XGROUP CREATE x g $")
    group = state_group(net, 1, b"x", b"g")
    assert group.cursors == {1: (200, 2), 2: (200, 2)} and group.default_cursor == (0, 0)
    assert group_info(net, 1, "x")[0][b"last-delivered-id"] == b"200-2"
    net.sync()  # region 3's 150-3 arrives: its origin was not observed, so it is delivered
    assert ids_of(net.reply(1, "XREADGROUP GROUP g c STREAMS x >")) == [b"150-3"]


def test_dollar_in_one_region_equals_redis_last_id() -> None:
    net = Net(1)
    net(1, "XADD x 5-0 f v")
    net(1, "XADD x 7-0 f v")
    net(1, "XDEL x 7-0")
    net(1, "XGROUP CREATE x g $")
    assert group_info(net, 1, "x")[0][b"last-delivered-id"] == b"7-0"
    net(1, "XADD x 8-0 f v")
    assert ids_of(net.reply(1, "XREADGROUP GROUP g c STREAMS x >")) == [b"8-0"]


def test_setid_createconsumer_delconsumer_are_local() -> None:
    net = Net(2)
    net(1, "XADD x 1-0 f v")
    net(1, "XADD x 2-0 f v")
    net(1, "XGROUP CREATE x g 0")
    net.sync()
    assert net(1, "XGROUP CREATECONSUMER x g bob").reply == 1
    assert net(1, "XGROUP CREATECONSUMER x g bob").reply == 0
    net(1, "XREADGROUP GROUP g bob STREAMS x >")
    setid = net(1, "XGROUP SETID x g 1-0 ENTRIESREAD 1")
    assert not setid.replicated and [type(r.body) for r in setid.local] == [ops.SetId]
    assert group_info(net, 1, "x")[0][b"last-delivered-id"] == b"1-0"
    # SETID back: 2-0 is delivered again, and moves to the reader with a fresh count.
    assert ids_of(net.reply(1, "XREADGROUP GROUP g amy STREAMS x >")) == [b"2-0"]
    assert net.reply(1, "XPENDING x g - + 10") == [
        [b"1-0", b"bob", 0, 1],
        [b"2-0", b"amy", 0, 1],
    ]
    assert net.reply(1, "XGROUP DELCONSUMER x g bob") == 1
    assert net.reply(1, "XPENDING x g") == [1, b"2-0", b"2-0", [[b"amy", b"1"]]]
    net.sync()
    assert group_info(net, 2, "x")[0][b"last-delivered-id"] == b"0-0"
    assert group_info(net, 2, "x")[0][b"consumers"] == 0


def test_destroy_is_replicated_and_answers_like_redis() -> None:
    net = Net(2)
    net(1, "XADD x 1-0 f v")
    net(1, "XGROUP CREATE x g 0")
    net.sync()
    gone = net(2, "XGROUP DESTROY x g")
    assert gone.reply == 1 and [type(op.body) for op in gone.replicated] == [ops.GroupDestroy]
    assert net(2, "XGROUP DESTROY x g").reply == 0
    net.sync()
    assert net.reply(1, "XINFO GROUPS x") == []


# --- XREADGROUP ----------------------------------------------------------------------------------


def test_gt_never_skips_an_entry_that_arrives_late() -> None:
    net = Net(2, IdMode.STRICT)
    net(1, "XADD x 110 f v", now=110)
    net(2, "XADD x 115 f v", now=115)
    net(1, "XADD x 120 f v", now=120)
    net(1, "XADD x 130 f v", now=130)
    net(1, "XGROUP CREATE x g 0")
    assert ids_of(net.reply(1, "XREADGROUP GROUP g c COUNT 2 STREAMS x >")) == [
        b"110-1",
        b"120-1",
    ]
    net.sync()
    assert ids_of(net.reply(1, "XREADGROUP GROUP g c STREAMS x >")) == [b"115-2", b"130-1"]
    assert net.reply(1, "XREADGROUP GROUP g c STREAMS x >") is None
    info = group_info(net, 1, "x")[0]
    assert info[b"last-delivered-id"] == b"130-1"
    assert info[b"entries-read"] == 4 and info[b"lag"] == 0


def test_late_entry_below_last_delivered_is_still_delivered() -> None:
    net = Net(2, IdMode.STRICT)
    net(2, "XADD x 115 f v", now=115)
    net(1, "XADD x 110 f v", now=110)
    net(1, "XADD x 130 f v", now=130)
    net(1, "XGROUP CREATE x g 0")
    assert ids_of(net.reply(1, "XREADGROUP GROUP g c STREAMS x >")) == [b"110-1", b"130-1"]
    net.sync()
    assert group_info(net, 1, "x")[0][b"lag"] == 1
    assert ids_of(net.reply(1, "XREADGROUP GROUP g c STREAMS x >")) == [b"115-2"]
    info = group_info(net, 1, "x")[0]
    assert info[b"last-delivered-id"] == b"130-1" and info[b"lag"] == 0


def test_history_reads_count_deliveries_and_show_deleted_entries() -> None:
    net = Net(1)
    for sid in ("1-0", "2-0", "3-0"):
        net(1, f"XADD x {sid} f v")
    net(1, "XGROUP CREATE x g 0")
    net(1, "XREADGROUP GROUP g c STREAMS x >", now=NOW)
    net(1, "XDEL x 2-0")
    history = net(1, "XREADGROUP GROUP g c STREAMS x 0", now=NOW + 50)
    assert history.reply == Map(
        ((b"x", [[b"1-0", [b"f", b"v"]], [b"2-0", NULL_ARRAY], [b"3-0", [b"f", b"v"]]]),),
        nested=True,
    )
    assert [type(r.body) for r in history.local] == [ops.TouchConsumer]
    assert net.reply(1, "XPENDING x g - + 10", now=NOW + 60) == [
        [b"1-0", b"c", 10, 2],
        [b"2-0", b"c", 60, 1],
        [b"3-0", b"c", 10, 2],
    ]
    assert net.reply(1, "XREADGROUP GROUP g other STREAMS x 0") == [[b"x", []]]


def test_noack_advances_without_pending() -> None:
    net = Net(1)
    net(1, "XADD x 1-0 f v")
    net(1, "XGROUP CREATE x g 0")
    assert ids_of(net.reply(1, "XREADGROUP GROUP g c NOACK STREAMS x >")) == [b"1-0"]
    assert net.reply(1, "XPENDING x g") == [0, None, None, None]
    assert group_info(net, 1, "x")[0][b"last-delivered-id"] == b"1-0"


def test_nothing_new_blocks_without_ops() -> None:
    net = Net(1)
    net(1, "XADD x 1-0 f v")
    net(1, "XGROUP CREATE x g $")
    done = net(1, "XREADGROUP GROUP g c BLOCK 250 STREAMS x >")
    assert done.reply is NULL_ARRAY and not done.local
    assert done.block == BlockRequest(
        (b"x",), 250, tuple(b"XREADGROUP GROUP g c BLOCK 250 STREAMS x >".split())
    )
    assert net.reply(1, "XINFO CONSUMERS x g") == []  # Redis 7.0: consumer made when served
    plain = net(1, "XREADGROUP GROUP g c STREAMS x >")
    assert plain.reply is NULL_ARRAY and plain.block is None


def test_same_key_twice_sees_its_own_first_read() -> None:
    net = Net(1)
    net(1, "XADD x 1-0 f v")
    net(1, "XADD x 2-0 f v")
    net(1, "XGROUP CREATE x g 0")
    assert ids_of(net.reply(1, "XREADGROUP GROUP g c COUNT 1 STREAMS x x > >")) == [
        b"1-0",
        b"2-0",
    ]
    assert net.reply(1, "XPENDING x g - + 10") == [[b"1-0", b"c", 0, 1], [b"2-0", b"c", 0, 1]]


def test_xreadgroup_errors() -> None:
    net = Net(1)
    net(1, "XADD x 1-0 f v")
    net(1, "XGROUP CREATE x g 0")
    assert net.reply(1, "XREADGROUP GROUP nope c STREAMS x >") == CommandError(
        "NOGROUP No such key 'x' or consumer group 'nope' in XREADGROUP with GROUP option"
    )
    assert net.reply(1, "XREADGROUP GROUP g c STREAMS x $") == CommandError(
        "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history "
        "of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ "
        "ID would just return an empty result set."
    )
    assert net.reply(1, "XREADGROUP GROUP g c STREAMS x y >") == CommandError(
        "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
    )
    assert net.reply(1, "XREADGROUP COUNT 1 NOACK STREAMS x >") == CommandError(
        "ERR Missing GROUP option for XREADGROUP"
    )


# --- XACK and the consecutive-XACK effect ------------------------------------------------------


def test_consecutive_xack_table() -> None:
    net = Net(2, IdMode.SEMI_STRICT)
    for sid in ("110-0", "120-0", "130-0"):
        net(1, f"XADD x {sid} f1 v1")
    net(1, "XGROUP CREATE x group1 0")
    assert ids_of(net.reply(1, "XREADGROUP GROUP group1 Alice STREAMS x >")) == [
        b"110-0",
        b"120-0",
        b"130-0",
    ]
    net.sync()
    assert group_info(net, 2, "x")[0][b"last-delivered-id"] == b"0-0"

    assert net.reply(1, "XACK x group1 110-0") == 1
    effects = net.flush_acks(1)
    assert [op.body for op in effects] == [ops.AckEffect(b"x", b"group1", ((1, (110, 0)),))]
    net.sync()
    assert group_info(net, 2, "x")[0][b"last-delivered-id"] == b"110-0"

    assert net.reply(1, "XACK x group1 130-0") == 1
    assert net.flush_acks(1) == []
    net.sync()
    assert group_info(net, 2, "x")[0][b"last-delivered-id"] == b"110-0"

    assert net.reply(1, "XACK x group1 120-0") == 1
    effects = net.flush_acks(1)
    assert [op.body for op in effects] == [ops.AckEffect(b"x", b"group1", ((1, (130, 0)),))]
    net.sync()
    info = group_info(net, 2, "x")[0]
    assert info[b"last-delivered-id"] == b"130-0" and info[b"pending"] == 0
    # Redirected to region 2, the group does not re-read the acknowledged entries.
    assert net.reply(2, "XREADGROUP GROUP group1 Bob STREAMS x >") is None


def test_xack_counts_and_is_local() -> None:
    net = Net(1)
    net(1, "XADD x 1-0 f v")
    net(1, "XADD x 2-0 f v")
    assert net.reply(1, "XACK x g 1-0") == 0  # no group: 0 before the IDs are parsed
    assert net.reply(1, "XACK x g junk") == 0
    net(1, "XGROUP CREATE x g 0")
    assert net.reply(1, "XACK x g junk") == CommandError(
        "ERR Invalid stream ID specified as stream command argument"
    )
    net(1, "XREADGROUP GROUP g c STREAMS x >")
    done = net(1, "XACK x g 1-0 1-0 9-0")
    assert done.reply == 1 and not done.replicated
    assert [r.body for r in done.local] == [ops.Ack(b"x", b"g", ((1, 0),))]
    assert net(1, "XACK x g 1-0").local == []


def test_duplicate_ids_name_every_entry() -> None:
    net = Net(2, IdMode.SEMI_STRICT)
    net(1, "XADD x 100-1 f r1")
    net(2, "XADD x 100-1 f r2")
    net.sync()
    net(1, "XGROUP CREATE x g 0")
    read = net.reply(1, "XREADGROUP GROUP g c STREAMS x >")
    assert read == [[b"x", [[b"100-1", [b"f", b"r1"]], [b"100-1", [b"f", b"r2"]]]]]
    assert net.reply(1, "XPENDING x g") == [2, b"100-1", b"100-1", [[b"c", b"2"]]]
    assert net.reply(1, "XCLAIM x g d 0 100-1 JUSTID") == [b"100-1", b"100-1"]
    assert net.reply(1, "XPENDING x g - + 10 d") == [
        [b"100-1", b"d", 0, 1],
        [b"100-1", b"d", 0, 1],
    ]
    assert net.reply(1, "XACK x g 100-1") == 2
    assert net.reply(1, "XPENDING x g") == [0, None, None, None]


# --- XPENDING / XCLAIM / XAUTOCLAIM --------------------------------------------------------------


def _three_pending(net: Net) -> None:
    for sid in ("1-0", "2-0", "3-0"):
        net(1, f"XADD x {sid} f v")
    net(1, "XGROUP CREATE x g 0")
    net(1, "XREADGROUP GROUP g alice STREAMS x >", now=NOW)


def test_xclaim_rules() -> None:
    net = Net(1)
    _three_pending(net)
    later = NOW + 1000
    assert net.reply(1, "XCLAIM x g bob 5000 1-0", now=later) == []  # not idle long enough
    assert net.reply(1, "XCLAIM x g bob 500 1-0 JUSTID", now=later) == [b"1-0"]
    assert net.reply(1, "XCLAIM x g bob 0 2-0 RETRYCOUNT 9 TIME 5", now=later) == [
        [b"2-0", [b"f", b"v"]]
    ]
    assert net.reply(1, "XCLAIM x g bob 0 3-0 IDLE 400", now=later) == [[b"3-0", [b"f", b"v"]]]
    assert net.reply(1, "XPENDING x g - + 10", now=later) == [
        [b"1-0", b"bob", 0, 1],  # JUSTID does not count a delivery
        [b"2-0", b"bob", later - 5, 9],
        [b"3-0", b"bob", 400, 2],
    ]
    assert net.reply(1, "XCLAIM x g bob 0 1-0 bogus") == CommandError(
        "ERR Unrecognized XCLAIM option 'bogus'"
    )
    assert net.reply(1, "XCLAIM x nope bob 0 1-0") == CommandError(
        "NOGROUP No such key 'x' or consumer group 'nope'"
    )


def test_xclaim_force_lastid_and_deleted_entries() -> None:
    net = Net(1)
    for sid in ("1-0", "2-0", "3-0"):
        net(1, f"XADD x {sid} f v")
    net(1, "XGROUP CREATE x g 0")
    net(1, "XREADGROUP GROUP g alice COUNT 1 STREAMS x >")
    assert net.reply(1, "XCLAIM x g bob 0 3-0 FORCE JUSTID LASTID 2-0") == [b"3-0"]
    assert net.reply(1, "XPENDING x g - + 10 bob") == [[b"3-0", b"bob", 0, 1]]
    assert group_info(net, 1, "x")[0][b"last-delivered-id"] == b"2-0"
    assert ids_of(net.reply(1, "XREADGROUP GROUP g alice STREAMS x >")) == [b"3-0"]
    net(1, "XDEL x 1-0")
    done = net(1, "XCLAIM x g bob 0 1-0")
    assert done.reply == [] and done.local[0].body.dropped == ((1, (1, 0)),)  # type: ignore[union-attr]
    assert net.reply(1, "XPENDING x g") == [1, b"3-0", b"3-0", [[b"alice", b"1"]]]


def test_xautoclaim_cursor_and_deleted() -> None:
    net = Net(1)
    for i in range(1, 6):
        net(1, f"XADD x {i}-0 f v")
    net(1, "XGROUP CREATE x g 0")
    net(1, "XREADGROUP GROUP g alice STREAMS x >")
    net(1, "XDEL x 2-0")
    assert net.reply(1, "XAUTOCLAIM x g bob 0 0 COUNT 2 JUSTID") == [b"3-0", [b"1-0"], [b"2-0"]]
    assert net.reply(1, "XAUTOCLAIM x g bob 0 3-0 COUNT 5") == [
        b"0-0",
        [[b"3-0", [b"f", b"v"]], [b"4-0", [b"f", b"v"]], [b"5-0", [b"f", b"v"]]],
        [],
    ]
    assert net.reply(1, "XPENDING x g") == [4, b"1-0", b"5-0", [[b"bob", b"4"]]]
    assert net.reply(1, "XAUTOCLAIM x g bob 0 0 COUNT 0") == CommandError("ERR COUNT must be > 0")


# --- XINFO ---------------------------------------------------------------------------------------


def test_xinfo_stream_shapes() -> None:
    net = Net(1)
    net(1, "XADD x 1-0 a 1")
    net(1, "XADD x 2-0 b 2")
    net(1, "XGROUP CREATE x g 0")
    reply = net(1, "XINFO STREAM x").reply
    assert isinstance(reply, Map)
    assert [k for k, _ in reply.pairs] == [
        b"length",
        b"radix-tree-keys",
        b"radix-tree-nodes",
        b"last-generated-id",
        b"max-deleted-entry-id",
        b"entries-added",
        b"recorded-first-entry-id",
        b"idmp-duration",
        b"idmp-maxsize",
        b"pids-tracked",
        b"iids-tracked",
        b"iids-added",
        b"iids-duplicates",
        b"groups",
        b"first-entry",
        b"last-entry",
    ]
    full = net(1, "XINFO STREAM x FULL").reply
    assert isinstance(full, Map)
    assert [k for k, _ in full.pairs][-2:] == [b"entries", b"groups"]
    assert net.reply(1, "XINFO STREAM nope") == CommandError("ERR no such key")
    assert net.reply(1, "XINFO CONSUMERS x nope") == CommandError(
        "NOGROUP No such consumer group 'nope' for key name 'x'"
    )


def test_xinfo_help_lists_the_subcommands() -> None:
    net = Net(1)
    lines = net.reply(1, "XINFO HELP")
    assert isinstance(lines, list) and lines[0].startswith(b"XINFO <subcommand>")
    assert lines[-2:] == [b"HELP", b"    Prints this help."]


# --- local ops replay ----------------------------------------------------------------------------


def test_local_ops_rebuild_the_pel_on_replay() -> None:
    """A restarted node folds its op log and its local log and gets its PEL back."""
    net = Net(1)
    _three_pending(net)
    for line in (
        "XACK x g 2-0",
        "XCLAIM x g bob 0 3-0 TIME 7",
        "XREADGROUP GROUP g alice STREAMS x 0",
        "XGROUP CREATECONSUMER x g zed",
    ):
        net(1, line, now=NOW + 5)
    assert net.local[1][-2].body == ops.TouchConsumer(b"x", b"g", b"alice", NOW + 5, ((1, (1, 0)),))
    replayed = Region(1)
    for op in net.log[1]:
        replayed.receive(op)
    for record in net.local[1]:
        replayed.apply_local(record)
    assert _pel(replayed) == _pel(net.regions[1])
    assert _pel(replayed) == {
        (1, 0, 1): (b"alice", NOW + 5, 2),
        (3, 0, 1): (b"bob", 7, 2),
    }
    assert sorted(state_group(net, 1, b"x", b"g").consumers) == [b"alice", b"bob", b"zed"]


def _pel(region: Region) -> dict[object, object]:
    group = region.state.group(b"x", b"g")
    assert group is not None
    return {key: (e.consumer, e.delivery_time, e.delivery_count) for key, e in group.pel.items()}


# --- pure parts ----------------------------------------------------------------------------------


def test_parse_read_args() -> None:
    parsed = parse_read_args(
        [
            b"XREADGROUP",
            b"GROUP",
            b"g",
            b"c",
            b"COUNT",
            b"-1",
            b"BLOCK",
            b"0",
            b"NOACK",
            b"STREAMS",
            b"a",
            b"b",
            b">",
            b"0",
        ],
        group=True,
    )
    assert parsed.count is None and parsed.block_ms == 0 and parsed.noack
    assert (parsed.group, parsed.consumer) == (b"g", b"c")
    assert parsed.keys == (b"a", b"b") and parsed.ids == (b">", b"0")
    plain = parse_read_args([b"XREAD", b"COUNT", b"2", b"STREAMS", b"a", b"$"], group=False)
    assert plain.count == 2 and plain.block_ms is None and plain.group is None
    for args, text in (
        ([b"XREAD", b"GROUP", b"g", b"c", b"STREAMS", b"a", b"0"], "GROUP option is only"),
        ([b"XREAD", b"NOACK", b"STREAMS", b"a", b"0"], "NOACK option is only"),
        ([b"XREAD", b"BLOCK", b"-1", b"STREAMS", b"a", b"0"], "timeout is negative"),
        ([b"XREAD", b"COUNT", b"1", b"a", b"0"], "syntax error"),
    ):
        with pytest.raises(CommandError, match=text):
            parse_read_args(args, group=False)


def _stream(ids: list[tuple[int, int]], *, deleted: tuple[int, int] = (0, 0)) -> KeyState:
    ks = KeyState()
    for i, sid in enumerate(ids):
        ks.entries.add(1, i + 1, sid, (b"f", b"v"))
        ks.last_id = max(ks.last_id, sid)
        ks.entries_added += 1
    ks.max_deleted_id = deleted
    return ks


def test_lag_estimates_follow_redis() -> None:
    ks = _stream([(2, 0), (3, 0)])
    ks.entries_added = 3  # 1-0 was trimmed
    assert estimate_distance(ks, (3, 0)) == 3
    assert estimate_distance(ks, (2, 0)) == 2
    assert estimate_distance(ks, (1, 5)) == 1
    assert estimate_distance(ks, (2, 5)) is None
    assert estimate_distance(ks, (9, 0)) is None
    fragmented = _stream([(1, 0), (3, 0)], deleted=(2, 0))
    fragmented.entries_added = 3
    assert estimate_distance(fragmented, (0, 0)) is None
    assert range_has_tombstones(fragmented, (1, 0), None)
    assert not range_has_tombstones(fragmented, (3, 0), None)
    group = Group(b"g", (0, 0), {}, None)
    assert group_lag(fragmented, group) is None
    group.entries_read = 1
    group.cursors = {1: (1, 0)}
    assert group_lag(fragmented, group) is None  # a tombstone ahead: the counter is unusable
    group.cursors = {1: (3, 0)}
    assert group_lag(fragmented, group) == 2  # no tombstone ahead: Redis trusts the counter
    group.entries_read = None
    assert group_lag(fragmented, group) == 0  # unknown counter: exact at the last ID
    empty = KeyState()
    assert group_lag(empty, Group(b"g", (0, 0), {}, None)) == 0
