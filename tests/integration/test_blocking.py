"""XREAD / XREADGROUP BLOCK on real nodes: timeouts, wake-ups by local and replicated entries,
`$` and `>`, many blocked clients, clients that leave while blocked.

Blocked requests go over raw sockets, so a test can see that no reply has come yet and read the
exact reply bytes (`*-1` in RESP2, `_` in RESP3). The count of blocked clients is CRDT.INFO's
`blocked_clients` (the node's waiters): a client that disconnected must not stay in it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from support import RawClient, wait_until

from topology.local import LocalTopology


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    with LocalTopology(regions=2, manual_sync=True) as topology:
        yield topology


def info(client: redis.Redis) -> dict[bytes, object]:
    flat = client.execute_command("CRDT.INFO")  # type: ignore[no-untyped-call]
    return dict(zip(flat[::2], flat[1::2], strict=True))


def blocked(client: redis.Redis) -> int:
    value = info(client)[b"blocked_clients"]
    assert isinstance(value, int)
    return value


def test_block_timeout_answers_the_resp2_null_array_after_the_timeout(
    topo: LocalTopology,
) -> None:
    c = topo.client(1)
    c.xgroup_create("timeouts", "g", "$", mkstream=True)
    raw = RawClient(topo.ports[1], timeout_s=15)
    for request in (
        ("XREAD", "BLOCK", "100", "STREAMS", "nothing-here", "$"),
        ("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "100", "STREAMS", "timeouts", ">"),
    ):
        started = time.monotonic()
        raw.send(*request)
        (reply,), data = raw.replies()
        elapsed = time.monotonic() - started
        assert data == b"*-1\r\n" and reply is None
        assert 0.095 <= elapsed < 1.5, elapsed
    raw.close()
    assert blocked(c) == 0


def test_block_timeout_answers_the_resp3_null(topo: LocalTopology) -> None:
    raw = RawClient(topo.ports[1], timeout_s=15)
    raw.send("HELLO", "3")
    raw.reply()
    raw.send("XREAD", "BLOCK", "50", "STREAMS", "nothing-here", "$")
    assert raw.replies()[1] == b"_\r\n"
    raw.close()


def test_block_0_waits_until_a_local_xadd(topo: LocalTopology) -> None:
    c = topo.client(1)
    raw = RawClient(topo.ports[1], timeout_s=15)
    raw.send("XREAD", "BLOCK", "0", "STREAMS", "forever", "$")
    wait_until(lambda: blocked(c) == 1)
    assert not raw.ready(0.3)
    sid = c.xadd("forever", {"f": "v"})
    assert raw.reply() == [[b"forever", [[sid, [b"f", b"v"]]]]]
    assert blocked(c) == 0
    raw.close()


def test_dollar_means_entries_after_the_last_id_when_the_call_was_made(
    topo: LocalTopology,
) -> None:
    c = topo.client(1)
    c.xadd("dollar", {"n": "1"})
    raw = RawClient(topo.ports[1], timeout_s=15)
    raw.send("XREAD", "BLOCK", "0", "STREAMS", "dollar", "$")
    wait_until(lambda: blocked(c) == 1)
    second = c.xadd("dollar", {"n": "2"})
    third = c.xadd("dollar", {"n": "3"})
    reply = raw.reply()
    assert isinstance(reply, list)
    served = [sid for sid, _fields in reply[0][1]]
    assert served[0] == second and set(served) <= {second, third}
    raw.close()


def test_several_blocked_clients_on_one_key_all_wake(topo: LocalTopology) -> None:
    c = topo.client(1)
    clients = [RawClient(topo.ports[1], timeout_s=15) for _ in range(5)]
    for i, raw in enumerate(clients):
        if i % 2:
            raw.send("XREAD", "BLOCK", "0", "STREAMS", "many", "$")
        else:
            raw.send("XREAD", "COUNT", "10", "BLOCK", "5000", "STREAMS", "other", "many", "$", "$")
    wait_until(lambda: blocked(c) == 5)
    sid = c.xadd("many", {"f": "v"})
    for raw in clients:
        assert raw.reply() == [[b"many", [[sid, [b"f", b"v"]]]]]
        raw.close()
    assert blocked(c) == 0


def test_a_client_disconnecting_while_blocked_leaves_no_waiter(topo: LocalTopology) -> None:
    c = topo.client(1)
    c.xgroup_create("leaving", "g", "$", mkstream=True)
    reader = RawClient(topo.ports[1], timeout_s=15)
    reader.send("XREAD", "BLOCK", "0", "STREAMS", "leaving", "$")
    grouped = RawClient(topo.ports[1], timeout_s=15)
    grouped.send("XREADGROUP", "GROUP", "g", "ghost", "BLOCK", "0", "STREAMS", "leaving", ">")
    wait_until(lambda: blocked(c) == 2)
    reader.close()
    grouped.close()
    wait_until(lambda: blocked(c) == 0, timeout=5)
    c.xadd("leaving", {"f": "v"})
    # the group's entry was not delivered to the consumer that left
    assert c.xpending("leaving", "g")["pending"] == 0
    assert c.ping()


def test_xreadgroup_gt_block_gets_entries_that_arrive_later(topo: LocalTopology) -> None:
    c = topo.client(1)
    c.xgroup_create("later", "g", "$", mkstream=True)
    raw = RawClient(topo.ports[1], timeout_s=15)
    raw.send(
        "XREADGROUP", "GROUP", "g", "alice", "COUNT", "5", "BLOCK", "0", "STREAMS", "later", ">"
    )
    wait_until(lambda: blocked(c) == 1)
    assert not raw.ready(0.2)
    sid = c.xadd("later", {"job": "1"})
    assert raw.reply() == [[b"later", [[sid, [b"job", b"1"]]]]]
    pending = c.xpending_range("later", "g", "-", "+", 10)
    assert [(p["message_id"], p["consumer"]) for p in pending] == [(sid, b"alice")]
    raw.close()


def test_replies_around_a_blocked_read_keep_their_order(topo: LocalTopology) -> None:
    """`PING; XREAD BLOCK 0; PING` in one packet: the first PONG comes at once, the second only
    after the blocked read was answered."""
    c = topo.client(1)
    raw = RawClient(topo.ports[1], timeout_s=15)
    raw.sock.sendall(b"PING\r\nXREAD BLOCK 0 STREAMS ordered $\r\nPING\r\n")
    assert raw.reply() == b"PONG"
    wait_until(lambda: blocked(c) == 1)
    assert not raw.ready(0.2)
    sid = c.xadd("ordered", {"f": "v"})
    replies, _ = raw.replies(2)
    assert replies == [[[b"ordered", [[sid, [b"f", b"v"]]]]], b"PONG"]
    raw.close()


def test_the_timeout_holds_while_other_keys_change(topo: LocalTopology) -> None:
    c = topo.client(1)
    raw = RawClient(topo.ports[1], timeout_s=15)
    started = time.monotonic()
    raw.send("XREAD", "BLOCK", "300", "STREAMS", "quiet", "$")
    wait_until(lambda: blocked(c) == 1)
    for _ in range(5):
        c.xadd("noisy", {"f": "v"})
    assert raw.replies()[1] == b"*-1\r\n"
    assert 0.29 <= time.monotonic() - started < 2.0
    raw.close()


def test_a_blocked_read_in_r2_wakes_on_an_entry_replicated_from_r1(topo: LocalTopology) -> None:
    c1, c2 = topo.client(1), topo.client(2)
    raw = RawClient(topo.ports[2], timeout_s=15)
    raw.send("XREAD", "BLOCK", "0", "STREAMS", "from-r1", "$")
    wait_until(lambda: blocked(c2) == 1)
    sid = c1.xadd("from-r1", {"origin": "r1"})
    assert not raw.ready(0.2)  # manual sync: nothing replicated yet
    topo.sync()
    assert raw.reply() == [[b"from-r1", [[sid, [b"origin", b"r1"]]]]]
    raw.close()


def test_with_replication_running_blocked_reads_in_r2_wake_on_r1_xadds(
    topo: LocalTopology,
) -> None:
    """Last in this module: it turns continuous replication on."""
    c1, c2 = topo.client(1), topo.client(2)
    c2.xgroup_create("live", "g", "$", mkstream=True)
    topo.sync()
    topo.resume()
    reader = RawClient(topo.ports[2], timeout_s=15)
    reader.send("XREAD", "BLOCK", "0", "STREAMS", "live", "$")
    grouped = RawClient(topo.ports[2], timeout_s=15)
    grouped.send("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0", "STREAMS", "live", ">")
    wait_until(lambda: blocked(c2) == 2)
    started = time.monotonic()
    sid = c1.xadd("live", {"origin": "r1"})
    expected = [[b"live", [[sid, [b"origin", b"r1"]]]]]
    assert reader.reply() == expected
    assert grouped.reply() == expected
    assert time.monotonic() - started < 5
    reader.close()
    grouped.close()
    assert blocked(c2) == 0
