"""Issue 27, item 7: ACL rules in the Redis way. `--user NAME:PASS:RULES` (Redis's command rules:
+@category, -@category, +command, -command|sub, allcommands, nocommands) withholds commands
with Redis's NOPERM text, byte for byte as redis-server 7.0.15 with `ACL SETUSER` alike; admin
commands (CRDT.*, FLUSHALL, CONFIG) can be kept from application users (on main before this,
every authenticated user could run every command). `streams status` authenticates with
--user / --password."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator

import pytest
from differential.redis_server import RedisServer, require_redis_server
from support import RawClient

from security.served import ServedNode
from streams import cli
from streams.config import dump
from streams.node.pipeline.auth import AuthConfig, Rules

USERS = {
    "reader": ("rp", "+@read"),
    "app": ("ap", "+@all -@admin -@dangerous"),
    "ops": ("op", "nocommands +config|get +crdt.info +ping"),
}


@pytest.fixture(scope="module")
def node() -> Iterator[ServedNode]:
    users = [f"{name}:{pw}:{rules}" for name, (pw, rules) in USERS.items()]
    with ServedNode(requirepass="admin", users=users) as served:
        yield served


@pytest.fixture(scope="module")
def auth_server() -> Iterator[RedisServer]:
    require_redis_server()
    with RedisServer() as server:
        conn = server.connect()
        for name, (pw, rules) in USERS.items():
            setuser = [b"ACL", b"SETUSER", name.encode(), b"on", b">" + pw.encode(), b"~*"]
            known = [r.encode() for r in rules.split() if "crdt." not in r]  # Redis has no CRDT.*
            assert conn.call(setuser + known) == b"+OK\r\n"
        conn.call([b"CONFIG", b"SET", b"requirepass", b"admin"])
        conn.close()
        yield server


REDIS_COMMANDS = [
    "FLUSHALL",
    "CONFIG GET maxclients",
    "CONFIG SET timeout 0",
    "PING",
    "XRANGE acl-s - +",
    "XLEN acl-s",
    "XADD acl-s * f v",
    "XDEL acl-s 1-1",
    "KEYS *",
    "CLIENT ID",
    "DBSIZE",
    "MULTI",
    "FLUSHALL",
    "EXEC",
    "HELLO 2",
]


@pytest.mark.parametrize("user", list(USERS))
def test_acl_rules_withhold_commands_with_redis_noperm(
    user: str, node: ServedNode, auth_server: RedisServer
) -> None:
    replies = []
    for port in (auth_server.port, node.port):
        conn = RawClient(port)
        assert conn.call([b"AUTH", user.encode(), USERS[user][0].encode()]) == b"+OK\r\n"
        got = [conn.call([w.encode() for w in line.split()]) for line in REDIS_COMMANDS]
        conn.close()
        replies.append(dict(zip(REDIS_COMMANDS, got, strict=True)))
    redis_replies, node_replies = replies
    for line in REDIS_COMMANDS:
        mine, theirs = node_replies[line], redis_replies[line]
        if theirs.startswith(b"-"):
            assert mine == theirs, line
        else:  # the reply of an allowed command may differ (an ID, the connection's id)
            assert mine[:1] == theirs[:1], line


@pytest.mark.parametrize(
    ("user", "allowed"),
    # CRDT.VECTOR / DIGEST / SHARDS read figures: they are in @read (and @admin)
    [("reader", {"crdt.vector"}), ("app", set()), ("ops", {"crdt.info"})],
)
def test_crdt_admin_commands_are_withheld_from_users_without_them(
    user: str, allowed: set[str], node: ServedNode
) -> None:
    conn = RawClient(node.port)
    conn.call([b"AUTH", user.encode(), USERS[user][0].encode()])
    for name in ("crdt.snapshot", "crdt.flush", "crdt.info", "crdt.vector"):
        reply = conn.call([name.encode()])
        noperm = f"-NOPERM this user has no permissions to run the '{name}' command\r\n".encode()
        assert (reply != noperm) == (name in allowed), (name, reply)
    conn.close()
    admin = RawClient(node.port)
    admin.call([b"AUTH", b"admin"])
    assert admin.call([b"CRDT.VECTOR"]).startswith(b"*")  # the default user has every command
    admin.close()


def test_user_specs_with_and_without_rules() -> None:
    config = AuthConfig.build(None, ["plain:pa:ss", "ruled:pw:+@read -xrange", "colon:a:b:+ping"])
    assert config.passwords == {b"plain": b"pa:ss", b"ruled": b"pw", b"colon": b"a:b"}
    assert set(config.rules) == {b"ruled", b"colon"}
    assert config.credentials() == (b"plain", b"pa:ss")  # node-to-node: a user with every command
    with pytest.raises(ValueError, match="not an ACL command rule"):
        Rules.parse("+@read +bad/name")
    with pytest.raises(ValueError, match="no user may run every command"):
        AuthConfig.build(None, ["only:pw:+@read"]).credentials()


def _status(node: ServedNode, tmp: str, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli._main(["status", "--topology", tmp, *args])
    return code, out.getvalue()


def test_streams_status_authenticates_with_user_and_password(
    node: ServedNode, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = f"{tmp_path}/topology.toml"
    dump(node.topology, path)
    monkeypatch.delenv("REDISCLI_AUTH", raising=False)
    code, text = _status(node, path)
    assert code != 0 and "Authentication required" in text
    code, text = _status(node, path, "--password", "admin")
    assert code == 0 and f"r1 (id 1, strict) on 127.0.0.1:{node.port}" in text, text
    code, text = _status(node, path, "--user", "ops", "--password", "op")
    assert code == 0 and "applied vector" in text, text
    code, text = _status(node, path, "--user", "reader", "--password", "rp")
    assert code != 0 and "no permissions to run the 'crdt.info' command" in text, text
    monkeypatch.setenv("REDISCLI_AUTH", "admin")
    assert _status(node, path)[0] == 0
