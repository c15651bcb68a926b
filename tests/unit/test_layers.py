"""Dependencies point down (docs/architecture.md, "Layers"): checked on what a fresh interpreter
imports, so an indirect import counts too. A new arrow against these rules fails here."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import streams


def _imported_by(*modules: str) -> dict[str, set[str]]:
    """For each module, every module of ours a fresh interpreter holds after importing it."""
    code = (
        "import importlib, json, sys; importlib.import_module(sys.argv[1]); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = {}
    for module in modules:  # one interpreter each: nothing imported for another counts
        run = subprocess.run(
            [sys.executable, "-c", code, module], capture_output=True, text=True, check=True
        )
        ours = {m for m in json.loads(run.stdout) if m.startswith(("streams", "topology"))}
        out[module] = ours - PACKAGE_ROOT
    return out


PACKAGE_ROOT = {"streams.native", "streams._native__mypyc"}
"""What `import streams` itself brings: the choice between the compiled core and its sources
(`streams.native`) and, compiled, mypyc's shared library. Part of the root, like `streams`."""


def _package_modules(package: str) -> list[str]:
    path = streams.__path__[0] + "/" + package.split(".", 1)[1].replace(".", "/")
    return [package] + [f"{package}.{m.name}" for m in pkgutil.iter_modules([path])]


def _outside(imported: set[str], allowed: tuple[str, ...]) -> set[str]:
    return {m for m in imported if not any(m == a or m.startswith(a + ".") for a in allowed)}


def test_the_core_imports_nothing_of_ours_but_ids_numbers_and_errors() -> None:
    allowed = ("streams", "streams.crdt", "streams.ids", "streams.numbers", "streams.errors")
    for module, imported in _imported_by(*_package_modules("streams.crdt")).items():
        assert not _outside(imported, allowed), module


def test_the_node_imports_neither_replay_nor_the_pipeline() -> None:
    for module, imported in _imported_by(*_package_modules("streams.node")).items():
        wrong = {m for m in imported if m.startswith(("streams.replay", "streams.pipeline"))}
        assert not wrong, (module, wrong)


def test_resp_does_not_import_the_commands() -> None:
    for module, imported in _imported_by(*_package_modules("streams.resp")).items():
        assert not {m for m in imported if m.startswith("streams.commands")}, module


def test_the_sdk_imports_only_its_own_package() -> None:
    for module, imported in _imported_by(*_package_modules("streams.sdk")).items():
        assert not _outside(imported, ("streams", "streams.sdk")), module


@pytest.mark.parametrize("leaf", ["streams.reply", "streams.errors", "streams.slots"])
def test_leaves_import_nothing_of_ours(leaf: str) -> None:
    imported = _imported_by(leaf)[leaf]
    assert imported <= {"streams", leaf, "streams.errors"}, imported
