"""The command catalogue is redis-server's own metadata, and the command tables agree with it."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from differential.redis_server import RedisServer

from streams import REDIS_COMPAT_VERSION
from streams.commands import catalogue, table
from streams.commands.base import Command, command, container
from streams.node.pipeline import router

REPO = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    path = REPO / "scripts" / "gen_command_catalogue.py"
    spec = importlib.util.spec_from_file_location("gen_command_catalogue", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_data_file_is_what_redis_server_answers(redis_server: RedisServer) -> None:
    """Regenerating from the live redis-server gives the file byte for byte (else: run
    scripts/gen_command_catalogue.py)."""
    assert redis_server.version() == REDIS_COMPAT_VERSION
    gen = _generator()
    fresh = gen.render(gen.catalogue(gen.Conn(redis_server.port)), REDIS_COMPAT_VERSION)
    assert fresh == (REPO / "streams" / "commands" / catalogue.DATA_FILE).read_text()


def test_every_row_takes_its_metadata_from_the_catalogue() -> None:
    for cmd in router.TABLE.values():
        for row in (cmd, *(cmd.subcommands or {}).values()):
            assert row.spec is catalogue.spec(row.name)
            assert (row.name in catalogue.REDIS) != (row.name in catalogue.OWN), row.name
    assert router.TABLE["xadd"].arity == -5 and router.TABLE["xadd"].spec.keys == (1, 1, 1)
    assert "no_auth" in router.TABLE["hello"].flags
    assert "no_multi" in router.TABLE["crdt.flush"].flags


def test_own_commands_are_not_redis_commands_and_are_all_served() -> None:
    assert not set(catalogue.OWN) & set(catalogue.REDIS)
    rows = [(c, *(c.subcommands or {}).values()) for c in router.TABLE.values()]
    served = {row.name for group in rows for row in group}
    assert set(catalogue.OWN) <= served


def test_a_row_that_disagrees_with_the_catalogue_is_refused() -> None:
    xlen = command("xlen", lambda ctx, args: table.Result(0))
    forged = dataclasses.replace(xlen, spec=dataclasses.replace(xlen.spec, arity=3))
    with pytest.raises(RuntimeError, match="catalogue entry"):
        table.check({"xlen": forged})
    with pytest.raises(RuntimeError, match="holds"):
        table.check({"xlen2": xlen})
    not_a_sub = Command(catalogue.spec("xgroup"), None, {"kill": command("client|kill")})
    with pytest.raises(RuntimeError, match="files client"):
        table.check({"xgroup": not_a_sub})
    foreign = container("xgroup", [command("client|kill")])
    with pytest.raises(RuntimeError):
        table.check({"xgroup": foreign})
    with pytest.raises(KeyError):
        command("nosuch")


def test_the_node_binds_exactly_the_builtins() -> None:
    handlers = {name: object() for name in router.BUILTINS}
    assert router.bind(handlers) == handlers
    with pytest.raises(RuntimeError, match="missing"):
        router.bind({k: v for k, v in handlers.items() if k != "ping"})
    with pytest.raises(RuntimeError, match="unknown"):
        router.bind({**handlers, "xadd": object()})


def test_resolve_finds_rows_and_names_unimplemented_redis_commands() -> None:
    assert (
        router.resolve([b"XGROUP", b"CREATE", b"s", b"g", b"$"])
        is router.TABLE["xgroup"].subcommands["create"]
    )  # type: ignore[index]
    assert router.resolve([b"set", b"k", b"v"]) == "set"
    assert router.resolve([b"CLIENT", b"KILL", b"x"]) == "client|kill"
    assert router.resolve([b"CLIENT"]) is router.TABLE["client"]  # its arity check fails later
    with pytest.raises(catalogue.CommandError, match="unknown command"):
        router.resolve([b"nosuch"])
    with pytest.raises(catalogue.CommandError, match="unknown subcommand"):
        router.resolve([b"xgroup", b"nosuch"])
    assert catalogue.unsupported("set").text.startswith("ERR unsupported command 'set': this")


@pytest.mark.parametrize("spelled", [b"xadd", b"XADD", b"xAdd", b"Ping", b"PING"])
def test_resolve_finds_a_command_however_its_name_is_cased(spelled: bytes) -> None:
    assert router.resolve([spelled]) is router.TABLE[spelled.decode().lower()]


def test_the_cased_names_cover_every_row_without_subcommands() -> None:
    plain = {name for name, cmd in router.TABLE.items() if cmd.subcommands is None}
    assert {cmd.name for cmd in router.PLAIN.values()} == plain
    assert b"XGROUP" not in router.PLAIN  # a container resolves its subcommand
    assert "not available" in catalogue.unsupported("subscribe").text
