"""The choice between the compiled core and its sources (`streams.native`): a compiled module is
served from its `.py` when that source changed after the build, when the build is partial, or
when STREAMS_PURE=1 asks; otherwise the extension module is what runs.

On a copy of the package in a temporary folder, with a stand-in extension module that is not a
loadable library: importing it fails, so an import that succeeds proves the source was served,
and the fresh case (import fails) proves the extension module would have run. No compiler needed.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import streams
from streams import native

SOURCE = Path(streams.__file__).parent
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of streams/ whose `ids` is 'compiled' (a stand-in file) by a fresh manifest."""
    dst = tmp_path / "streams"
    shutil.copytree(
        SOURCE,
        dst,
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", native.MANIFEST_NAME),
    )
    (dst / f"ids{SUFFIX}").write_bytes(b"not a shared library")
    _write_manifest(dst, {"streams.ids": native.source_hash(dst / "ids.py")})
    return dst


def _write_manifest(package: Path, modules: dict[str, str]) -> None:
    """`ids` imports `errors`, which stays Python: the build records its source too."""
    depends = {"streams/errors.py": native.source_hash(package / "errors.py")}
    manifest = {"shared_library": "streams._native__mypyc", "modules": modules, "depends": depends}
    (package / native.MANIFEST_NAME).write_text(json.dumps(manifest))


def _import_ids(package: Path, **env: str) -> subprocess.CompletedProcess[str]:
    code = "import streams.ids as m; print(m.__file__); print(getattr(m, 'EDITED', False))"
    environ = {k: v for k, v in os.environ.items() if k not in ("STREAMS_PURE", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=package.parent,
        env={**environ, "PYTHONPATH": str(package.parent), **env},
        capture_output=True,
        text=True,
    )


def _served_from_source(run: subprocess.CompletedProcess[str]) -> bool:
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()[0].endswith("/streams/ids.py")


def test_a_fresh_build_is_what_runs(package: Path) -> None:
    run = _import_ids(package)
    assert run.returncode != 0  # the stand-in extension module was loaded, and is no library
    assert "ImportError" in run.stderr and "NativeBuildWarning" not in run.stderr


def test_a_source_changed_after_the_build_is_served_with_one_warning(package: Path) -> None:
    with (package / "ids.py").open("a") as f:
        f.write("\nEDITED = True\n")
    run = _import_ids(package)
    assert _served_from_source(run)
    assert run.stdout.splitlines()[1] == "True"  # the edited source, not an older copy
    assert run.stderr.count("NativeBuildWarning") == 1
    assert "streams/ids.py changed since compiled" in run.stderr


def test_a_module_the_compiled_ones_import_changed_serves_the_sources(package: Path) -> None:
    with (package / "errors.py").open("a") as f:
        f.write("\n# edited\n")
    run = _import_ids(package)
    assert _served_from_source(run)
    assert "streams/errors.py (imported by the compiled modules)" in run.stderr


def test_streams_pure_serves_the_sources_without_a_warning(package: Path) -> None:
    run = _import_ids(package, STREAMS_PURE="1")
    assert _served_from_source(run)
    assert "Warning" not in run.stderr


def test_streams_pure_0_is_not_pure(package: Path) -> None:
    assert _import_ids(package, STREAMS_PURE="0").returncode != 0


@pytest.mark.parametrize("damage", ["no manifest", "unlisted module", "listed, not built"])
def test_a_partial_build_serves_every_source(package: Path, damage: str) -> None:
    if damage == "no manifest":
        (package / native.MANIFEST_NAME).unlink()
    elif damage == "unlisted module":  # left by an older build
        _write_manifest(package, {})
    else:
        _write_manifest(
            package,
            {
                "streams.ids": native.source_hash(package / "ids.py"),
                "streams.numbers": native.source_hash(package / "numbers.py"),
            },
        )
    run = _import_ids(package)
    assert _served_from_source(run)
    assert run.stderr.count("NativeBuildWarning") == 1


def test_the_package_says_whether_this_process_runs_compiled() -> None:
    import streams.crdt.state  # noqa: F401  (compiled, if anything is)

    assert streams.COMPILED == ("streams.crdt.state" in native.compiled_modules())
    if os.environ.get("STREAMS_PURE", "") not in ("", "0"):
        assert not streams.COMPILED
