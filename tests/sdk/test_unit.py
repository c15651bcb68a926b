"""Pure unit tests of the SDK's input checks, error classification and MOVED routing (no server)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aredis
import redis.exceptions

from streams.sdk import GroupConsumer, Producer, SdkError, is_transient
from streams.sdk.endpoints import Endpoint, make_client, normalize, slot_of
from streams.sdk.lru import BoundedSet
from streams.sdk.producer import encode_fields


def test_endpoints_accept_urls_and_host_port_and_refuse_junk() -> None:
    assert normalize("127.0.0.1:6380") == ["redis://127.0.0.1:6380"]
    assert normalize(["redis://a:1", "b:2"]) == ["redis://a:1", "redis://b:2"]
    for bad in ([], [""], ["http://x:1"], ["a:1", "redis://a:1"]):
        with pytest.raises(SdkError):
            normalize(bad)


def test_fields_are_encoded_with_the_idempotency_key_last() -> None:
    assert encode_fields({"a": 1, b"b": "x", "c": 1.5}, "k1") == [
        b"a",
        b"1",
        b"b",
        b"x",
        b"c",
        b"1.5",
        b"_idk",
        b"k1",
    ]
    with pytest.raises(SdkError, match="at least one field"):
        encode_fields({}, None)
    with pytest.raises(SdkError, match="str, bytes, int or float"):
        encode_fields({"a": None}, None)  # type: ignore[dict-item]
    with pytest.raises(SdkError, match="either"):
        encode_fields({"_idk": "x"}, "y")


def test_transient_errors_are_connection_loss_timeouts_and_op_log_refusals() -> None:
    assert is_transient(redis.exceptions.ConnectionError("gone"))
    assert is_transient(redis.exceptions.TimeoutError("slow"))
    assert is_transient(
        redis.exceptions.ResponseError("writes refused until the op log is re-read: broker down")
    )
    assert is_transient(
        redis.exceptions.ResponseError(
            "the op log did not acknowledge the write: x; "
            "writes are refused until the log is re-read"
        )
    )
    assert not is_transient(redis.exceptions.ResponseError("WRONGTYPE Operation against a key"))
    assert not is_transient(ValueError("handler bug"))


def test_bad_consumer_options_are_refused_with_the_reason() -> None:
    def handler(entry_id: str, fields: dict[bytes, bytes]) -> None:
        return None

    with pytest.raises(SdkError, match="block_ms"):
        GroupConsumer("a:1", "s", "g", "c", handler, block_ms=0)
    with pytest.raises(SdkError, match="max_deliveries"):
        GroupConsumer("a:1", "s", "g", "c", handler, max_deliveries=0)
    with pytest.raises(SdkError, match="dead-letter"):
        GroupConsumer("a:1", "s", "g", "c", handler, dead_letter="s")
    with pytest.raises(SdkError, match="consumer"):
        GroupConsumer("a:1", "s", "g", "", handler)
    with pytest.raises(SdkError, match="maxlen"):
        Producer("a:1", "s", maxlen=-1)


def test_bounded_set_forgets_the_oldest() -> None:
    seen: BoundedSet[str] = BoundedSet(2)
    for item in "abc":
        seen.add(item)
    assert "a" not in seen and "b" in seen and "c" in seen and len(seen) == 2


def test_a_hash_tagged_dead_letter_stream_shares_the_streams_slot() -> None:
    assert slot_of("{orders}:dead") == slot_of("orders") == slot_of(b"orders")
    assert slot_of("orders:dead") != slot_of("orders")


def _port(client: aredis.Redis) -> int:
    return int(client.connection_pool.connection_kwargs["port"])


def test_an_endpoint_follows_moved_remembers_the_route_and_forgets_it_on_failure() -> None:
    """Routing without a server: `run` stands for the node behind the client it is given."""

    async def main() -> None:
        ep = Endpoint("redis://127.0.0.1:1", make_client("redis://127.0.0.1:1", 1.0))
        slot = slot_of("s")
        sent: list[int] = []

        async def run(client: aredis.Redis) -> int:
            sent.append(_port(client))
            if _port(client) == 1:  # the seed serves other slots
                raise redis.exceptions.MovedError(f"{slot} 127.0.0.1:2")
            return _port(client)

        assert await ep.call("s", run) == 2
        assert await ep.call("s", run) == 2
        assert sent == [1, 2, 2] and ep.routes == {slot: "127.0.0.1:2"}

        async def gone(client: aredis.Redis) -> int:
            raise redis.exceptions.ConnectionError("node down")

        with pytest.raises(redis.exceptions.ConnectionError):
            await ep.call("s", gone)
        assert ep.routes == {}  # the next attempt asks the seed again
        assert await ep.call("s", run) == 2 and sent[-2:] == [1, 2]

        async def empty_host(client: aredis.Redis) -> int:
            if _port(client) != 3:
                raise redis.exceptions.MovedError(f"{slot_of('t')} :3")
            return int(client.connection_pool.connection_kwargs["host"] == "127.0.0.1")

        assert await ep.call("t", empty_host) == 1  # ":3" is the answering node's host

        async def endless(client: aredis.Redis) -> int:
            raise redis.exceptions.MovedError(f"{slot} 127.0.0.1:{_port(client) + 10}")

        with pytest.raises(SdkError, match="MOVED"):
            await ep.call("s", endless)
        await ep.close()

    asyncio.run(main())
