"""`streams.cluster` against a real Redis Cluster of two masters (redis-server 7.0.15).

The cluster is formed the way `Layout.build` describes a region of two nodes with one shard
each: master i has config epoch i + 1 and the slots of `shard_ranges(2)[i]`. Our layout for the
same cluster takes the real nodes' ports and ids, so replies compare byte for byte. Normalised
where a real cluster must differ: the order of nodes in NODES and SHARDS (Redis walks a hash
table), a peer's last-pong time, and the bus message counters of CLUSTER INFO (no bus runs here).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace

import pytest
import redis
from redis._parsers.base import BaseParser
from support import RawClient

from differential.cluster_proxy import ProxyCluster
from differential.redis_cluster import RedisCluster
from differential.redis_server import RedisServer, require_redis_server
from streams import errors
from streams.cluster import (
    Layout,
    cluster_command,
    flag_command,
    redirect_command,
    redirect_exec,
)
from streams.cluster.replies import shards_reply
from streams.commands.catalogue import spec
from streams.commands.keyspec import getkeys
from streams.errors import CommandError
from streams.reply import Reply
from streams.resp.encode import encode
from streams.slots import key_slot

LOCAL = [b"b", b"c", b"f", b"{b}x", b"z"]
"""Keys in master 0's slots (0-8191): b 3300, c 7365, f 3168, {b}x 3300, z 8157."""
FOREIGN = [b"a", b"d", b"{a}b"]
"""Keys in master 1's slots: a 15495, d 11298, {a}b 15495."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    require_redis_server()
    running = RedisCluster(2)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def layout_of(cluster: RedisCluster, me: int) -> Layout:
    """Our layout for the real cluster, seen from master `me`: its addresses and ids."""
    base = Layout.build("r1", 2, [("127.0.0.1", port) for port in cluster.ports], me)
    nodes = tuple(replace(n, node_id=cluster.ids[n.index]) for n in base.nodes)
    return replace(base, nodes=nodes)


def ours(layout: Layout, *args: bytes, keys: list[bytes] | None = None) -> Reply:
    try:
        return cluster_command(list(args), layout, lambda: keys or [], now_ms=0)
    except CommandError as e:
        return e


def theirs(cluster: RedisCluster, me: int, *args: bytes, proto: int = 2) -> bytes:
    conn = cluster.connect(me)
    try:
        if proto == 3:
            conn.call([b"HELLO", b"3"])
        return conn.call(list(args))
    finally:
        conn.close()


def test_the_keys_sit_where_the_module_says() -> None:
    assert all(key_slot(k) < 8192 for k in LOCAL)
    assert all(key_slot(k) >= 8192 for k in FOREIGN)


@pytest.mark.parametrize("me", [0, 1])
@pytest.mark.parametrize("proto", [2, 3])
def test_slots_and_myid_are_byte_identical(cluster: RedisCluster, me: int, proto: int) -> None:
    layout = layout_of(cluster, me)
    for sub in (b"SLOTS", b"MYID"):
        assert encode(ours(layout, b"CLUSTER", sub), proto) == theirs(
            cluster, me, b"CLUSTER", sub, proto=proto
        )


@pytest.mark.parametrize("me", [0, 1])
@pytest.mark.parametrize("proto", [2, 3])
def test_shards_are_byte_identical_in_redis_node_order(
    cluster: RedisCluster, me: int, proto: int
) -> None:
    raw = theirs(cluster, me, b"CLUSTER", b"SHARDS", proto=proto)
    order = [cluster.ids.index(i.decode()) for i in re.findall(rb"[0-9a-f]{40}", raw)]
    ours_in_order = [shards_reply(layout_of(cluster, me))[i] for i in order]
    assert encode(ours_in_order, proto) == raw


def _normalised_lines(text: bytes) -> set[tuple[bytes, ...]]:
    """NODES lines with a peer's pong time blanked (it is when its last pong came)."""
    out = set()
    for line in text.splitlines():
        fields = line.split(b" ")
        if b"myself" not in fields[2]:
            fields[5] = b"<pong>"
        out.add(tuple(fields))
    return out


@pytest.mark.parametrize("me", [0, 1])
def test_nodes_lines_match(cluster: RedisCluster, me: int) -> None:
    conn = cluster.connect(me)
    try:
        conn.send(b"CLUSTER", b"NODES")
        [text], raw = conn.replies(1)
    finally:
        conn.close()
    mine = ours(layout_of(cluster, me), b"CLUSTER", b"NODES")
    assert isinstance(text, bytes) and isinstance(mine, bytes)
    assert raw.startswith(b"$%d\r\n" % len(text)) and text.endswith(b"\n")
    assert _normalised_lines(mine) == _normalised_lines(text)
    assert mine.count(b"\n") == text.count(b"\n") == 2


_MESSAGE_KIND = re.compile(r"cluster_stats_messages_[a-z-]+_(sent|received)")


@pytest.mark.parametrize("me", [0, 1])
def test_info_fields_match(cluster: RedisCluster, me: int) -> None:
    raw = theirs(cluster, me, b"CLUSTER", b"INFO")
    text = raw.split(b"\r\n", 1)[1][: -len(b"\r\n")].decode()
    real = [line.split(":", 1) for line in text.split("\r\n") if line]
    mine = ours(layout_of(cluster, me), b"CLUSTER", b"INFO")
    assert isinstance(mine, bytes) and mine.endswith(b"\r\n")
    got = [line.split(":", 1) for line in mine.decode().split("\r\n") if line]
    totals = {"cluster_stats_messages_sent", "cluster_stats_messages_received"}
    assert [k for k, _ in got] == [k for k, _ in real if not _MESSAGE_KIND.fullmatch(k)]
    assert {k: v for k, v in got if k not in totals} == {
        k: v for k, v in real if k not in totals and not _MESSAGE_KIND.fullmatch(k)
    }


def _keyslot_keys() -> list[bytes]:
    rng = random.Random(20240607)
    edge = [
        b"", b"a", b"{a}b", b"{}x", b"a{b", b"{{x}}", b"{x}}", b"}{x}", b"a{}{b}", b"{a{b}c}",
        b"{\x00}z", b"x\x00y", b"{a}", b"{}", b"}", b"{", b"foo{bar}{zap}", b"\xff\xfe{\xc3}",
        b"user:{1000}:following", b"user:{1000}:followers",
    ]  # fmt: skip
    alphabet = b"{}ab\x00\xff"
    shaped = [bytes(rng.choice(alphabet) for _ in range(rng.randrange(8))) for _ in range(300)]
    rand = [rng.randbytes(rng.randrange(40)) for _ in range(300)]
    return edge + shaped + rand


def test_keyslot_matches_over_many_keys(cluster: RedisCluster) -> None:
    keys = _keyslot_keys()
    conn = cluster.connect(0)
    try:
        for key in keys:
            conn.send(b"CLUSTER", b"KEYSLOT", key)
        real, _ = conn.replies(len(keys))
    finally:
        conn.close()
    layout = layout_of(cluster, 0)
    assert [ours(layout, b"CLUSTER", b"KEYSLOT", k) for k in keys] == real


def test_countkeysinslot_and_getkeysinslot_match(cluster: RedisCluster) -> None:
    written = [b"{b}%d" % i for i in range(5)] + [b"c", b"f", b"z"]
    assert all(key_slot(k) < 8192 for k in written)
    conn = cluster.connect(0)
    try:
        conn.call([b"FLUSHALL"])  # only these keys, whatever other tests wrote
        for key in written:
            conn.send(b"XADD", key, b"*", b"f", b"v")
        conn.replies(len(written))
    finally:
        conn.close()
    layout = layout_of(cluster, 0)
    for slot in sorted({key_slot(k) for k in written} | {0, 1, 16383}):
        count = [b"CLUSTER", b"COUNTKEYSINSLOT", b"%d" % slot]
        assert encode(ours(layout, *count, keys=written)) == theirs(cluster, 0, *count)
        for n in (0, 1, 3, 100):
            get = [b"CLUSTER", b"GETKEYSINSLOT", b"%d" % slot, b"%d" % n]
            real = cluster.connect(0)
            try:
                real.send(*get)
                got = real.reply()
            finally:
                real.close()
            mine = ours(layout, *get, keys=written)
            assert isinstance(got, list) and isinstance(mine, list)
            in_slot = [k for k in written if key_slot(k) == slot]
            assert len(mine) == len(got) == min(n, len(in_slot))
            assert set(mine) <= set(in_slot) and set(got) <= set(in_slot)
            if n >= len(in_slot):  # all of them; Redis lists the newest first
                assert set(mine) == set(got)


BAD_CLUSTER_REQUESTS = [
    [b"CLUSTER"],
    [b"CLUSTER", b"nosuch"],
    [b"cluster", b"SlOtS", b"extra"],
    [b"CLUSTER", b"NODES", b"x"],
    [b"CLUSTER", b"KEYSLOT"],
    [b"CLUSTER", b"KEYSLOT", b"a", b"b"],
    [b"CLUSTER", b"COUNTKEYSINSLOT", b"x"],
    [b"CLUSTER", b"COUNTKEYSINSLOT", b"-1"],
    [b"CLUSTER", b"COUNTKEYSINSLOT", b"16384"],
    [b"CLUSTER", b"COUNTKEYSINSLOT", b" 1"],
    [b"CLUSTER", b"COUNTKEYSINSLOT", b"99999999999999999999"],
    [b"CLUSTER", b"COUNTKEYSINSLOT"],
    [b"CLUSTER", b"GETKEYSINSLOT", b"1"],
    [b"CLUSTER", b"GETKEYSINSLOT", b"x", b"1"],
    [b"CLUSTER", b"GETKEYSINSLOT", b"1", b"x"],
    [b"CLUSTER", b"GETKEYSINSLOT", b"16384", b"1"],
    [b"CLUSTER", b"GETKEYSINSLOT", b"-1", b"1"],
    [b"CLUSTER", b"GETKEYSINSLOT", b"1", b"-1"],
    [b"CLUSTER", b"REPLICAS", b"0000000000000000000000000000000000000000"],
    [b"CLUSTER", b"SLAVES", b"nosuch"],
    [b"CLUSTER", b"COUNT-FAILURE-REPORTS", b"nosuch"],
    [b"CLUSTER", b"MYID", b"x"],
    [b"CLUSTER", b"HELP", b"x"],
    [b"CLUSTER", b"INFO", b"x"],
    [b"CLUSTER", b"SHARDS", b"x"],
    [b"CLUSTER", b"\xff\x00x"],
]


@pytest.mark.parametrize(
    "args", BAD_CLUSTER_REQUESTS, ids=[repr(a)[:50] for a in BAD_CLUSTER_REQUESTS]
)
def test_errors_for_bad_arguments_are_byte_identical(
    cluster: RedisCluster, args: list[bytes]
) -> None:
    mine = ours(layout_of(cluster, 0), *args)
    assert isinstance(mine, CommandError)
    assert encode(mine) == theirs(cluster, 0, *args)


@pytest.mark.parametrize("me", [0, 1])
def test_help_and_peer_queries_are_byte_identical(cluster: RedisCluster, me: int) -> None:
    layout = layout_of(cluster, me)
    for args in (
        [b"cluster", b"help"],
        [b"CLUSTER", b"HELP"],
        [b"CLUSTER", b"REPLICAS", cluster.ids[0].encode()],
        [b"CLUSTER", b"SLAVES", cluster.ids[1].encode()],
        [b"CLUSTER", b"COUNT-FAILURE-REPORTS", cluster.ids[1 - me].encode()],
    ):
        assert encode(ours(layout, *args)) == theirs(cluster, me, *args)


@pytest.mark.parametrize("command", [b"READONLY", b"READWRITE", b"ASKING"])
def test_connection_flags_answer_ok(cluster: RedisCluster, command: bytes) -> None:
    assert encode(flag_command([command])) == theirs(cluster, 0, command) == b"+OK\r\n"


def _name(args: list[bytes]) -> str:
    """The catalogue name of a request's command (what the node's router resolves)."""
    name = args[0].lower().decode()
    if spec(name).subcommands and len(args) > 1:
        return f"{name}|{args[1].lower().decode()}"
    return name


a, b, c, d, z = b"a", b"b", b"c", b"d", b"z"
ROUTED_REQUESTS = [
    [b"XADD", a, b"*", b"f", b"v"],
    [b"XADD", b, b"*", b"f", b"v"],
    [b"XLEN", d],
    [b"XRANGE", b"{a}b", b"-", b"+"],
    [b"DEL", a],
    [b"DEL", b, c],
    [b"DEL", a, d],
    [b"DEL", b, b"{b}x"],
    [b"DEL", a, b"{a}b"],
    [b"DEL", a, b],
    [b"DEL", b, a],
    [b"EXISTS", z, a],
    [b"UNLINK", a, a],
    [b"RENAME", a, b],
    [b"RENAME", a, b"{a}b"],
    [b"TYPE", d],
    [b"XREAD", b"STREAMS", a, b"0"],
    [b"XREAD", b"COUNT", b"1", b"STREAMS", b, c, b"0", b"0"],
    [b"XREAD", b"BLOCK", b"10", b"STREAMS", a, b"{a}b", b"0", b"0"],
    [b"XREAD", b"STREAMS", a, b, b"0"],
    [b"XREAD", b"STREAMS", a, b"0", b"0"],
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", a, b">"],
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"NOACK", b"STREAMS", b, c, b">", b">"],
    [b"XREADGROUP", b"GROUP", b"streams", b"c", b"STREAMS", a, b">"],
    [b"XGROUP", b"CREATE", a, b"g", b"$", b"MKSTREAM"],
    [b"XGROUP", b"DESTROY", d, b"g"],
    [b"XINFO", b"STREAM", a],
    [b"XINFO", b"HELP"],
    [b"XACK", a, b"g", b"0-1"],
    [b"XPENDING", d, b"g"],
    [b"XCLAIM", a, b"g", b"c", b"0", b"0-1"],
    [b"XAUTOCLAIM", a, b"g", b"c", b"0", b"0"],
    [b"XTRIM", a, b"MAXLEN", b"0"],
    [b"XDEL", a, b"0-1"],
    [b"XSETID", a, b"0-1"],
    [b"WATCH", a],
    [b"KEYS", b"*"],
    [b"PING"],
]


def _is_redirect(reply: bytes) -> bool:
    return reply.startswith((b"-MOVED ", b"-CROSSSLOT ", b"-ASK ", b"-TRYAGAIN "))


@pytest.mark.parametrize("args", ROUTED_REQUESTS, ids=[repr(a)[:60] for a in ROUTED_REQUESTS])
def test_redirections_are_byte_identical(cluster: RedisCluster, args: list[bytes]) -> None:
    real = theirs(cluster, 0, *args)
    mine = redirect_command(layout_of(cluster, 0), _name(args), args)
    if mine is None:
        assert not _is_redirect(real), real
    else:
        assert encode(mine) == real


TRANSACTIONS = [
    [[b"XADD", b, b"*", b"f", b"v"], [b"XADD", c, b"*", b"f", b"v"]],
    [[b"XADD", b, b"*", b"f", b"v"], [b"XLEN", b"{b}x"]],
    [[b"XADD", b, b"*", b"f", b"v"], [b"XADD", a, b"*", b"f", b"v"]],
    [[b"XADD", a, b"*", b"f", b"v"], [b"XADD", b, b"*", b"f", b"v"], [b"XLEN", c]],
    [[b"DEL", b, c]],
    [[b"PING"], [b"XLEN", z]],
    [],
]


@pytest.mark.parametrize("queue", TRANSACTIONS, ids=[repr(q)[:70] for q in TRANSACTIONS])
def test_transactions_redirect_as_redis(cluster: RedisCluster, queue: list[list[bytes]]) -> None:
    """Each command is checked as it is queued, the whole queue again at EXEC; a command
    after a refused one is answered QUEUED but not queued (queueMultiCommand)."""
    conn = cluster.connect(0)
    try:
        real = [conn.call(args) for args in ([b"MULTI"], *queue, [b"EXEC"])]
    finally:
        conn.close()
    layout = layout_of(cluster, 0)
    queued: list[tuple[str, list[bytes]]] = []
    flagged = False
    for args, got in zip(queue, real[1:], strict=False):
        refused = redirect_command(layout, _name(args), args)
        if refused is None:
            if not flagged:  # Redis queues nothing more once the transaction is flagged
                queued.append((_name(args), args))
            assert got == b"+QUEUED\r\n"
        else:
            flagged = True
            assert encode(refused) == got
    at_exec = redirect_exec(layout, queued)
    if at_exec is not None:
        assert encode(at_exec) == real[-1]
    elif flagged:
        assert real[-1] == encode(CommandError(errors.EXECABORT))
    else:
        assert not _is_redirect(real[-1]) and not real[-1].startswith(b"-EXECABORT")


@pytest.mark.parametrize("request_args", [[b"DEL", a, b], [b"XLEN", a]], ids=["crossslot", "moved"])
def test_redis_py_reads_our_redirections_as_redis(
    cluster: RedisCluster, request_args: list[bytes]
) -> None:
    """redis-py's parser turns our error text into the same exception (class, slot, address)
    as the real one."""
    mine = redirect_command(layout_of(cluster, 0), _name(request_args), request_args)
    assert mine is not None
    real = theirs(cluster, 0, *request_args)
    assert encode(mine) == real
    ours_exc = BaseParser.parse_error(mine.text)
    real_exc = BaseParser.parse_error(real[1:-2].decode())
    assert type(ours_exc) is type(real_exc)
    assert ours_exc.args == real_exc.args


def test_redis_py_cluster_client_follows_the_real_cluster(cluster: RedisCluster) -> None:
    """What redis-py's RedisCluster reads from CLUSTER SLOTS (node per slot) is what our reply
    says, and its CROSSSLOT check agrees with ours."""
    client = redis.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    try:
        layout = layout_of(cluster, 0)
        for key in [*LOCAL, *FOREIGN]:
            node = client.get_node_from_key(key)
            owner = layout.owner(key_slot(key))
            assert (node.host, node.port) == (owner.ip, owner.port)
        client.execute_command("XADD", "{a}b", "*", "f", "v")
        assert client.execute_command("XLEN", "{a}b") == 1
        with pytest.raises(redis.exceptions.RedisClusterException, match="same key slot"):
            client.execute_command("XREAD", "STREAMS", "a", "b", "0", "0")
        assert redirect_command(layout, "xread", [b"XREAD", b"STREAMS", a, b, b"0", b"0"]) == (
            CommandError(errors.CROSSSLOT)
        )
    finally:
        client.close()


GETKEYS_REQUESTS = [
    [b"XREAD", b"STREAMS", a, b"0"],
    [b"XREAD", b"STREAMS", a, b, b"0", b"0"],
    [b"XREAD", b"STREAMS", a, b, b"0"],
    [b"XREAD", b"STREAMS", a, b, c, b"0"],
    [b"XREAD", b"COUNT", b"streams", b"STREAMS", a, b"0"],
    [b"XREAD", b"COUNT", b"1", b"BLOCK", b"0", b"STREAMS", a, b"0"],
    [b"xread", b"streams", b"streams", b"0"],
    [b"XREAD", b"a", b"b", b"STREAMS"],
    [b"XREAD", b"a", b"b", b"c"],
    [b"XREAD", b"STREAMS\x00x", a, b"0"],
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", a, b">"],
    [b"XREADGROUP", b"GROUP", b"streams", b"c", b"STREAMS", a, b">"],
    [b"XREADGROUP", b"GROUP", b"g", b"streams", b"STREAMS", a, b">"],
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"NOACK", b"STREAMS", a, b, b">", b">"],
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"STREAMS", a, b">"],
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"x", b"y", b"z"],
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"streams", b"STREAMS", a],
    [b"XREAD", b"x", b"STREAMS", a],
    [b"XADD", a, b"*", b"f", b"v"],
    [b"XADD", a],
    [b"DEL", a, b, c],
    [b"EXISTS", a],
    [b"RENAME", a, b],
    [b"RENAME", a],
    [b"XGROUP", b"CREATE", a, b"g", b"$"],
    [b"XINFO", b"STREAM", a, b"FULL"],
    [b"XINFO", b"CONSUMERS", a, b"g"],
    [b"XAUTOCLAIM", a, b"g", b"c", b"0", b"0"],
    [b"PING", b"x"],
    [b"KEYS", b"*"],
    [b"EVAL", b"return 1", b"0"],
]


@pytest.mark.parametrize("args", GETKEYS_REQUESTS, ids=[repr(a)[:60] for a in GETKEYS_REQUESTS])
def test_command_getkeys_is_byte_identical(cluster: RedisCluster, args: list[bytes]) -> None:
    real = theirs(cluster, 0, b"COMMAND", b"GETKEYS", *args)
    mine: Reply
    try:
        mine = list(getkeys(_name(args), args))
    except CommandError as e:
        mine = e
    assert encode(mine) == real


def test_raw_client_sees_moved_to_the_owner(cluster: RedisCluster) -> None:
    """Following our MOVED reaches the node that accepts the request (as `redis-cli -c`)."""
    layout = layout_of(cluster, 0)
    moved = redirect_command(layout, "xadd", [b"XADD", a, b"*", b"f", b"v"])
    assert moved is not None
    host_port = moved.text.split(" ")[2]
    conn = RawClient(int(host_port.rsplit(":", 1)[1]))
    try:
        assert conn.call([b"XADD", a, b"*", b"f", b"v"]).startswith(b"$")
    finally:
        conn.close()


# --- real cluster clients against our cluster surface ------------------------------------------


@pytest.fixture(scope="module")
def proxies() -> Iterator[tuple[ProxyCluster, list[RedisServer]]]:
    """Two nodes answering with `streams.cluster`, each in front of its own redis-server."""
    require_redis_server()
    backends = [RedisServer(), RedisServer()]
    proxy: ProxyCluster | None = None
    try:
        for backend in backends:
            backend.start()
        proxy = ProxyCluster([b.port for b in backends])
        proxy.start()
        yield proxy, backends
    finally:
        if proxy is not None:
            proxy.stop()
        for backend in backends:
            backend.stop()


def _holder(backends: list[RedisServer], key: bytes) -> list[int]:
    """Which backends hold `key`."""
    held = []
    for i, backend in enumerate(backends):
        conn = backend.connect()
        try:
            if conn.call([b"EXISTS", key]) == b":1\r\n":
                held.append(i)
        finally:
            conn.close()
    return held


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_cluster_client_works_against_our_replies(
    proxies: tuple[ProxyCluster, list[RedisServer]], protocol: int
) -> None:
    """RedisCluster reads our CLUSTER SLOTS, sends each key to its owner (asking our COMMAND
    GETKEYS for XREAD's keys), and its pipeline splits by our slots."""
    proxy, backends = proxies
    client = redis.RedisCluster(host="127.0.0.1", port=proxy.ports[0], protocol=protocol)
    try:
        assert sorted(n.port for n in client.get_nodes()) == sorted(proxy.ports)
        keys = [b"rp%d:%d" % (protocol, i) for i in range(60)] + [
            b"{rp}a%d" % protocol,
            b"{rp}b%d" % protocol,
        ]
        for key in keys:
            client.xadd(key, {"f": "v"})
        for key in keys:
            assert _holder(backends, key) == [proxy.layouts[0].owner(key_slot(key)).index]
        read = client.xread({keys[-2]: 0, keys[-1]: 0})
        assert len(read) == 2 and all(len(entries) == 1 for entries in _streams_of(read))
        pipe = client.pipeline()
        for key in keys:
            pipe.xlen(key)
        assert pipe.execute() == [1] * len(keys)
        with pytest.raises(redis.exceptions.RedisClusterException, match="same key slot"):
            client.xread({b"rp:1": 0, b"rp:2": 0})
    finally:
        client.close()


def _key_of_node_1(proxy: ProxyCluster, prefix: bytes) -> bytes:
    """A key node 1 serves, so that asking node 0 for it is redirected."""
    keys = (b"%s:%d" % (prefix, i) for i in range(1000))
    return next(k for k in keys if proxy.layouts[0].owner(key_slot(k)).index == 1)


def _streams_of(read: object) -> list[list[object]]:
    """XREAD's entries per stream, from redis-py's RESP2 list or RESP3 dict."""
    if isinstance(read, dict):
        return [entries[0] for entries in read.values()]
    assert isinstance(read, list)
    return [stream[1] for stream in read]


def test_redis_py_follows_our_moved(proxies: tuple[ProxyCluster, list[RedisServer]]) -> None:
    """A request sent to the wrong node (a plain connection) gets MOVED, which redis-py's
    parser reads as the real cluster's; the owner then accepts it."""
    proxy, backends = proxies
    foreign = _key_of_node_1(proxy, b"mv")
    plain = redis.Redis(port=proxy.ports[0])
    try:
        with pytest.raises(redis.exceptions.MovedError) as caught:
            plain.xadd(foreign, {"f": "v"})
        assert (caught.value.slot_id, caught.value.port) == (key_slot(foreign), proxy.ports[1])
    finally:
        plain.close()


def _tool(name: str) -> str:
    """redis-cli / redis-benchmark come with redis-server (Debian's redis-tools)."""
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not on PATH")
    return found


def test_redis_cli_follows_our_moved(proxies: tuple[ProxyCluster, list[RedisServer]]) -> None:
    proxy, backends = proxies
    foreign = _key_of_node_1(proxy, b"cli")
    cli = [_tool("redis-cli"), "-c", "-p", str(proxy.ports[0])]
    run = subprocess.run(
        [*cli, "XADD", foreign.decode(), "*", "f", "v"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert re.fullmatch(r"\d+-\d+\n", run.stdout), run.stdout + run.stderr
    assert _holder(backends, foreign) == [1]


def test_redis_benchmark_cluster_mode_spreads_keys_by_our_nodes(
    proxies: tuple[ProxyCluster, list[RedisServer]],
) -> None:
    """redis-benchmark --cluster reads our CLUSTER NODES and sends each node the keys of its
    slots (it tags keys per node); every key it wrote sits where our layout says."""
    proxy, backends = proxies
    run = subprocess.run(
        [_tool("redis-benchmark"), "--cluster", "-p", str(proxy.ports[0]), "-t", "set", "-n", "400",
         "-c", "4", "-r", "1000", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0 and "SET" in run.stdout, run.stdout + run.stderr
    layout = proxy.layouts[0]
    for i, backend in enumerate(backends):
        conn = backend.connect()
        try:
            conn.send(b"KEYS", b"key:*")
            keys = conn.reply()
        finally:
            conn.close()
        assert isinstance(keys, list) and keys, f"node {i} got no keys"
        assert {layout.owner(key_slot(k)).index for k in keys} == {i}


def test_transactions_through_our_routing(proxies: tuple[ProxyCluster, list[RedisServer]]) -> None:
    proxy, _ = proxies
    conn = RawClient(proxy.ports[0])
    try:
        local = [k for k in (b"b", b"{b}x", b"c") if proxy.layouts[0].owner(key_slot(k)).index == 0]
        assert len(local) == 3
        replies = [
            conn.call(args)
            for args in (
                [b"MULTI"],
                [b"XADD", b"b", b"*", b"f", b"v"],
                [b"XLEN", b"{b}x"],
                [b"EXEC"],
                [b"MULTI"],
                [b"XLEN", b"b"],
                [b"XLEN", b"c"],
                [b"EXEC"],
            )
        ]
        assert replies[1:3] == [b"+QUEUED\r\n"] * 2
        assert replies[3].startswith(b"*2\r\n$")
        assert replies[7] == encode(CommandError(errors.CROSSSLOT))
    finally:
        conn.close()


@pytest.mark.parametrize("args", [[b"CLUSTER", b"INFO"], [b"READONLY"], [b"ASKING"]])
def test_cluster_disabled_text(
    proxies: tuple[ProxyCluster, list[RedisServer]], args: list[bytes]
) -> None:
    """What a node that is not a cluster member (one process per region) answers, as a
    standalone redis-server does."""
    _, backends = proxies
    conn = backends[0].connect()
    try:
        assert conn.call(args) == encode(CommandError(errors.CLUSTER_DISABLED))
    finally:
        conn.close()
