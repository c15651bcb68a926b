"""The new commands in COMMAND INFO / DOCS / LIST and in ACL categories, as their
`src/commands/*.json` in redis/redis describe them (`redis8_commands.json`), and the table's
handlers accept exactly what their arity admits."""

from __future__ import annotations

from redis8.tcl import Client, assert_error
from streams.commands import catalogue
from streams.commands.table import TABLE

NEW = ("xackdel", "xcfgset", "xdelex", "xidmprecord", "xnack")


def test_every_new_command_has_a_row_a_handler_and_its_catalogue_entry() -> None:
    for name in NEW:
        assert TABLE[name].handler is not None
        assert TABLE[name].spec is catalogue.spec(name)
        assert catalogue.is_redis_command(name)
        assert TABLE[name].spec.group == "stream" and "@stream" in TABLE[name].spec.acl


def test_command_info_docs_and_list_describe_them(r: Client) -> None:
    infos = r("COMMAND", "INFO", *NEW)
    for name, info in zip(NEW, infos, strict=True):
        spec = catalogue.spec(name)
        assert info[:6] == [name, spec.arity, list(spec.flags), 1, 1, 1]
        assert info[6] == list(spec.acl)
    docs = r("COMMAND", "DOCS", "xnack")
    fields = dict(zip(docs[1][::2], docs[1][1::2], strict=True))
    assert fields["since"] == "8.8.0" and fields["group"] == "stream"
    assert set(NEW) <= set(r("COMMAND", "LIST", "FILTERBY", "ACLCAT", "stream"))


def test_arity_is_checked_before_the_handler_runs(r: Client) -> None:
    for name in NEW:
        spec = catalogue.spec(name)
        short = max(0, abs(spec.arity) - 2)
        assert_error(f"ERR wrong number of arguments for '{name}' command", r, name, *["x"] * short)
