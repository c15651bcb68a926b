"""Any Redis client talks to any region: redis-py over real sockets against real nodes on real
embedded brokers (one 2-region topology for the module, started with passwords).

AUTH flows, MULTI/EXEC (pipelines with and without errors), RENAME and FLUSHALL replicating to the
other region, SCAN, INFO, CONFIG GET, and the clear error for commands of other data types."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from topology.local import LocalTopology

PASSWORD = "s3cret"


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    with LocalTopology(
        regions=2,
        manual_sync=True,
        node_args=["--requirepass", PASSWORD, "--user", "alice:wonderland"],
    ) as t:
        yield t


@pytest.fixture
def r1(topo: LocalTopology) -> redis.Redis:
    client = topo.client(1)
    client.flushall()
    topo.client(2).flushall()
    topo.sync()
    return client


def _client(topo: LocalTopology, i: int = 1, **kwargs: object) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=topo.ports[i], **kwargs)  # type: ignore[arg-type]


def test_auth_flows(topo: LocalTopology) -> None:
    anonymous = _client(topo)
    with pytest.raises(redis.AuthenticationError, match="Authentication required"):
        anonymous.ping()
    with pytest.raises(redis.AuthenticationError, match="invalid username-password pair"):
        _client(topo, password="nope").ping()
    with pytest.raises(redis.AuthenticationError, match="invalid username-password pair"):
        _client(topo, username="alice", password="nope").ping()
    assert _client(topo, username="alice", password="wonderland").ping()
    resp3 = _client(topo, 2, username="alice", password="wonderland", protocol=3)
    assert resp3.ping()  # redis-py authenticates with HELLO 3 AUTH alice wonderland
    assert resp3.client_info()["user"] == "alice"
    assert resp3.execute_command("AUTH", PASSWORD)
    assert resp3.client_info()["user"] == "default"
    anonymous.close()


def test_multi_exec_runs_as_one_unit(r1: redis.Redis) -> None:
    pipe = r1.pipeline(transaction=True)
    pipe.xadd("tx", {"n": "1"})
    pipe.xadd("tx", {"n": "2"})
    pipe.xrange("tx")
    pipe.xread({"tx": "$"}, block=5000)  # BLOCK inside MULTI answers as timed out at once
    first, second, entries, blocked = pipe.execute()
    assert [e[0] for e in entries] == [first, second]
    assert blocked in (None, [], {})

    pipe = r1.pipeline(transaction=True)
    pipe.xadd("tx", {"n": "3"})
    pipe.execute_command("XADD", "tx")  # wrong arity: refused at queue time, EXEC aborts
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'xadd'") as e:
        pipe.execute()
    assert isinstance(e.value.__context__, redis.exceptions.ExecAbortError)
    assert r1.xlen("tx") == 2  # nothing of the aborted transaction ran

    pipe = r1.pipeline(transaction=True)
    pipe.xadd("tx", {"n": "4"})
    pipe.execute_command("XADD", "tx", "1-1", "f", "v")  # runtime error: strict ID mode
    pipe.xlen("tx")
    added, error, length = pipe.execute(raise_on_error=False)
    assert isinstance(added, bytes) and isinstance(error, redis.ResponseError) and length == 3

    with r1.pipeline(transaction=True) as pipe:
        with pytest.raises(redis.ResponseError, match="WATCH is not supported"):
            pipe.watch("tx")


def test_rename_deletes_groups_and_replicates(topo: LocalTopology, r1: redis.Redis) -> None:
    ids = [r1.xadd("src", {"n": str(i)}) for i in range(5)]
    r1.xgroup_create("src", "g", "0")
    r1.xreadgroup("g", "c", {"src": ">"}, count=2)
    r1.xadd("dst", {"old": "content"})
    topo.sync()
    assert r1.rename("src", "dst")
    topo.sync()
    for i in (1, 2):
        client = topo.client(i)
        assert [e[0] for e in client.xrange("dst")] == ids
        assert client.xinfo_groups("dst") == []
        assert client.exists("src") == 0
        assert client.type("dst") == b"stream"
    assert topo.client(2).renamenx("dst", "dst") is False
    digests = {topo.client(i).execute_command("CRDT.DIGEST") for i in (1, 2)}
    assert len(digests) == 1


def test_flushall_is_observed_remove(topo: LocalTopology, r1: redis.Redis) -> None:
    r2 = topo.client(2)
    for key in ("a", "b", "c"):
        r1.xadd(key, {"from": "r1"})
    topo.sync()
    concurrent = r2.xadd("a", {"from": "r2", "concurrent": "yes"})  # r1 has not seen it
    assert r1.flushall() is True
    assert r1.dbsize() == 0
    topo.sync()
    for client in (r1, r2):
        assert client.keys("*") == [b"a"]
        assert [e[0] for e in client.xrange("a")] == [concurrent]


def test_scan_returns_every_key_with_a_small_count(r1: redis.Redis) -> None:
    pipe = r1.pipeline(transaction=False)
    for i in range(60):
        pipe.xadd(f"scan:{i}", {"i": str(i)})
    pipe.xadd("other", {"x": "y"})
    pipe.execute()
    assert sorted(r1.scan_iter(count=2)) == sorted(
        [f"scan:{i}".encode() for i in range(60)] + [b"other"]
    )
    assert len(list(r1.scan_iter(match="scan:*", count=5))) == 60
    assert len(list(r1.scan_iter(_type="STREAM"))) == 61
    assert sorted(r1.keys("scan:[1-2]")) == sorted([b"scan:1", b"scan:2"])
    assert r1.dbsize() == 61


def test_info_config_and_command(topo: LocalTopology, r1: redis.Redis) -> None:
    info = r1.info()
    assert info["redis_version"] == "7.0.15"
    assert info["arch_bits"] == 64
    assert info["redis_mode"] == "standalone"
    assert info["role"] == "master"
    assert info["tcp_port"] == topo.ports[1]
    assert r1.info("cluster") == {"cluster_enabled": 0}
    assert "crdt_peer0" in r1.info("replication")
    r1.xadd("k", {"f": "v"})
    assert r1.info("keyspace")["db0"]["keys"] == 1
    config = r1.config_get("*")
    assert config["port"] == str(topo.ports[1])
    assert config["databases"] == "1"
    assert config["requirepass"] == ""  # never shown
    assert r1.config_get("maxmemory*") == {"maxmemory": "0", "maxmemory-policy": "noeviction"}
    assert r1.config_set("maxmemory-policy", "allkeys-lru")
    r1.config_set("maxmemory-policy", "noeviction")
    assert r1.config_resetstat()
    assert r1.command_count() > 30
    commands = r1.command()
    assert commands["xadd"]["arity"] == -5 and "set" not in commands
    docs = r1.execute_command("COMMAND DOCS", "xadd")  # what redis-cli asks at start
    assert docs[0] == b"xadd" and docs[1][docs[1].index(b"group") + 1] == b"stream"
    assert r1.select(0)
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r1.execute_command("SELECT", "1")


def test_unsupported_commands_answer_clearly_and_the_connection_stays(r1: redis.Redis) -> None:
    for call in (
        lambda: r1.set("a", "b"),
        lambda: r1.lpush("l", "x"),
        lambda: r1.incr("n"),
        lambda: r1.expire("k", 10),
        lambda: r1.hset("h", "f", "v"),
    ):
        with pytest.raises(redis.ResponseError, match="unsupported command .*streams only"):
            call()
        assert r1.ping()
    with pytest.raises(redis.ResponseError, match="unknown command 'NOSUCH'"):
        r1.execute_command("NOSUCH")
    assert r1.echo("still here") == b"still here"
