"""The SDK on a server with the Redis 8 stream commands (a node of one region, in-process):
`Producer` deduplicates through XADD IDMP, `GroupConsumer` reclaims through `XREADGROUP ...
CLAIM` and hands entries back with XNACK on stop; and, against redis-server 7.0, the fallbacks
(`_idk`, XAUTOCLAIM, XCLAIM IDLE)."""

from __future__ import annotations

import time

import redis
from differential.redis_server import RedisServer

from redis8.conftest import NodeThread
from streams.sdk import GroupConsumer, Producer
from streams.sdk.capabilities import REDIS7, Features, features_of


def url(port: int) -> str:
    return f"redis://127.0.0.1:{port}"


def test_features_are_read_from_command_info() -> None:
    assert features_of([None, None]) == REDIS7
    assert features_of([[b"xcfgset"], None]) == Features(idmp=True, claim=True, nack=False)
    assert features_of([[b"xcfgset"], [b"xnack"]]) == Features(True, True, True)
    assert features_of("junk") == REDIS7


def test_the_producer_retries_through_idmp_and_writes_no_idk_field(
    node: NodeThread, py: redis.Redis
) -> None:
    py.delete("orders")
    with Producer(url(node.port), "orders", producer_id="shop-1") as producer:
        first = producer.send({"total": 10}, idempotency_key="order-7")
        again = producer.send({"total": 10}, idempotency_key="order-7")
        many = producer.send_many([{"n": 1}, {"n": 2}], idempotency_keys=["a", "order-7"])
    assert again == first and many[1] == first
    rows = py.xrange("orders")
    assert [r[0].decode() for r in rows] == [first, many[0]]
    assert all(b"_idk" not in fields for _id, fields in rows)
    info = py.xinfo_stream("orders")
    assert info["iids-added"] == 2 and info["iids-duplicates"] == 2


def test_the_consumer_reclaims_idle_entries_with_xreadgroup_claim(
    node: NodeThread, py: redis.Redis
) -> None:
    py.delete("jobs")
    py.xgroup_create("jobs", "g", "0", mkstream=True)
    ids = [py.xadd("jobs", {"n": n}).decode() for n in range(3)]
    py.xreadgroup("g", "crashed", {"jobs": ">"})  # read, never acked: its consumer died
    py.config_resetstat()
    handled: list[str] = []
    with GroupConsumer(
        url(node.port),
        "jobs",
        "g",
        "c2",
        lambda i, f: handled.append(i),
        claim_idle_ms=50,
        block_ms=100,
    ) as consumer:
        time.sleep(0.1)
        deadline = time.monotonic() + 10
        while len(handled) < 3 and time.monotonic() < deadline:
            consumer.run_once()
    assert handled == ids
    stats = py.info("commandstats")
    assert "cmdstat_xautoclaim" not in stats
    assert py.xpending("jobs", "g")["pending"] == 0


def test_the_consumer_hands_unhandled_entries_back_with_xnack_on_stop(
    node: NodeThread, py: redis.Redis
) -> None:
    py.delete("work")
    py.xgroup_create("work", "g", "0", mkstream=True)
    ids = [py.xadd("work", {"n": n}).decode() for n in range(5)]
    consumer = GroupConsumer(url(node.port), "work", "g", "c1", lambda i, f: consumer.stop())
    with consumer:
        consumer.run_once()
    pending = py.xpending_range("work", "g", "-", "+", 10)
    handed_back = [p for p in pending if p["consumer"] == b""]
    assert [p["message_id"].decode() for p in handed_back] == ids[1:]
    assert all(p["time_since_delivered"] == -1 and p["times_delivered"] == 0 for p in handed_back)


def test_against_redis_7_the_sdk_falls_back_to_idk_xautoclaim_and_xclaim(
    redis_server: RedisServer,
) -> None:
    r = redis.Redis(port=redis_server.port)
    r.delete("fb")
    with Producer(url(redis_server.port), "fb") as producer:
        producer.send({"n": 1}, idempotency_key="k1")
        assert producer.aio.capabilities._known[url(redis_server.port)] == REDIS7
    assert r.xrange("fb")[0][1][b"_idk"] == b"k1"
    r.xgroup_create("fb", "g", "0")
    r.xadd("fb", {"n": 2})
    consumer = GroupConsumer(url(redis_server.port), "fb", "g", "c1", lambda i, f: consumer.stop())
    with consumer:
        consumer.run_once()
    pending = r.xpending_range("fb", "g", "-", "+", 10)
    assert len(pending) == 1 and pending[0]["consumer"] == b"c1"  # XCLAIM IDLE kept it its own
    assert pending[0]["time_since_delivered"] >= 30000
    r.close()
