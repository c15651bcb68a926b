"""Dependencies point down (docs/architecture.md, "Layers"): checked on what a fresh interpreter
imports, so an indirect import counts too. A new arrow against these rules fails here."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import streams

_FORK_SERVER = """
import importlib, json, os, sys
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
for module in sys.argv[2:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(module)
            answer = {"modules": sorted(sys.modules)}
        except BaseException as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        with os.fdopen(write, "w") as out:
            json.dump(answer, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as got:
        answer = json.load(got)
    os.waitpid(pid, 0)
    print(json.dumps([module, answer]), flush=True)
"""
"""One interpreter, a fork per module: each child imports one module into the parent's fresh
state, so nothing imported for another module counts (an interpreter per module took 30-90 s
for the whole package on 2 cores)."""

PRELOAD = ["streams", "confluent_kafka", "redis", "fastavro", "sortedcontainers"]
"""Imported before the forks: the package root (its modules are `PACKAGE_ROOT`) and third-party
libraries, which `_imported_by` does not look at; `_imported_all` preloads the root only."""


SERVERS = 2
"""Fork servers run side by side, each on every SERVERS-th module: the imports are CPU work, and
one server left the second core idle (the whole-package check took 26-33 s in CI)."""


def _fork_imports(modules: tuple[str, ...], preload: list[str]) -> dict[str, set[str]]:
    servers = [
        subprocess.Popen(
            [sys.executable, "-c", _FORK_SERVER, json.dumps(preload), *modules[k::SERVERS]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(min(SERVERS, len(modules)))
    ]
    out = {}
    errors = []
    for server in servers:
        stdout, stderr = server.communicate()
        assert server.returncode == 0, stderr
        errors.append(stderr)
        for line in stdout.splitlines():
            module, answer = json.loads(line)
            assert "error" not in answer, f"importing {module}: {answer['error']}"
            out[module] = set(answer["modules"])
    assert set(out) == set(modules), errors
    return out


def _imported_by(*modules: str) -> dict[str, set[str]]:
    """For each module, every module of ours a fresh interpreter holds after importing it."""
    return {
        module: {m for m in imported if m.startswith(("streams", "topology"))} - PACKAGE_ROOT
        for module, imported in _fork_imports(modules, PRELOAD).items()
    }


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


# --- the node's three rooms (docs/architecture.md, "The region node") ---------------------------


def _imported_all(*modules: str) -> dict[str, set[str]]:
    """As `_imported_by`, with third-party modules too (confluent_kafka, ...)."""
    return {
        module: imported - PACKAGE_ROOT
        for module, imported in _fork_imports(modules, ["streams"]).items()
    }


def _under(imported: set[str], *packages: str) -> set[str]:
    return {m for m in imported if any(m == p or m.startswith(p + ".") for p in packages)}


def test_the_shard_runtime_loads_neither_kafka_nor_the_pipeline() -> None:
    """The runtime speaks to its log through the port (`runtime/oplog.py`) only: the in-memory log
    of the unit tests runs it without the Kafka client, and the pipeline sits above it."""
    for module, imported in _imported_all(*_package_modules("streams.node.runtime")).items():
        wrong = _under(
            imported,
            "confluent_kafka",
            "streams.node.pipeline",
            "streams.node.kafka",
            "streams.resp.server",
        )
        assert not wrong, (module, wrong)


def test_the_request_pipeline_does_not_load_the_kafka_adapters() -> None:
    for module, imported in _imported_all(*_package_modules("streams.node.pipeline")).items():
        wrong = _under(imported, "confluent_kafka", "streams.node.kafka")
        assert not wrong, (module, wrong)


def test_the_kafka_adapters_do_not_load_the_pipeline() -> None:
    for module, imported in _imported_by(*_package_modules("streams.node.kafka")).items():
        assert not _under(imported, "streams.node.pipeline", "streams.resp"), module


def test_replay_serve_does_not_load_the_shard_writer() -> None:
    imported = _imported_by("streams.replay.serve")["streams.replay.serve"]
    assert not _under(imported, "streams.node.kafka"), imported


KAFKA_ROOMS = (
    "streams.kafka",
    "streams.node.kafka",
    "streams.replay",
    "streams.pipeline",
    "streams.importer",
    "topology",
)
"""Where the Kafka client may be imported: the op log's Kafka library, the node's adapters, the
tools that read op logs (replay, the Spark source, the importer) and deployment."""


def test_only_the_kafka_rooms_import_the_kafka_client() -> None:
    root = Path(streams.__path__[0]).parent
    for path in sorted(
        [*root.joinpath("streams").rglob("*.py"), *root.joinpath("topology").rglob("*.py")]
    ):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        if (
            "confluent_kafka" in path.read_text()
            and "import confluent_kafka" in path.read_text()
            or ("from confluent_kafka" in path.read_text())
        ):
            assert any(module == r or module.startswith(r + ".") for r in KAFKA_ROOMS), module


def test_the_pure_kafka_helpers_do_not_load_the_kafka_client() -> None:
    for module, imported in _imported_all("streams.kafka.sizes", "streams.kafka.headers").items():
        assert "confluent_kafka" not in imported, module


ENTRY_POINTS = {"streams.cli"}
"""The command-line entry points: the only modules of `streams` that may reach `topology`
(deployment: launching brokers, mirrors and nodes), which sits on the top floor."""


def test_topology_is_imported_only_by_the_command_line_entry_points() -> None:
    modules = [
        m.name
        for m in pkgutil.walk_packages(streams.__path__, "streams.")
        if m.name not in ENTRY_POINTS and not m.name.startswith(("streams.pipeline", "streams._"))
    ]
    for module, imported in _imported_by(*modules).items():
        assert not _under(imported, "topology"), module


def test_no_module_is_over_500_lines() -> None:
    root = Path(streams.__path__[0]).parent
    for path in _sources(root):
        lines = path.read_text().count("\n")
        assert lines <= 500, f"{path.relative_to(root)}: {lines} lines"


def _sources(root: Path) -> list[Path]:
    return sorted(
        [*root.joinpath("streams").rglob("*.py"), *root.joinpath("topology").rglob("*.py")]
    )
