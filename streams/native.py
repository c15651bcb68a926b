"""The compiled core: whether this process runs the mypyc-built modules or their Python sources.

`python3 scripts/build_native.py` compiles the hot, pure modules (`streams.crdt`, `ids`, the
codec's fast paths, ...) with mypyc into extension modules beside their sources, and writes
`_native_manifest.json` here: each compiled module with the SHA-256 of the source it was built
from. Python prefers an extension module to a `.py` of the same name, so without a check a
developer who edits `streams/crdt/state.py` and does not rebuild would run the old, compiled
state machine. `install()` (called by `streams/__init__.py`, before any of them is imported)
puts a finder in front of the import system that serves the `.py` sources instead when:

- `STREAMS_PURE=1` is set (the pure tier of the tests, or to rule the compiled core out);
- any compiled module's source differs from the one it was built from, or the source of a module
  of ours that they import (compiled code bakes in what it knew of those: a NamedTuple's field
  order, a class's bases), the manifest is missing or unreadable, or an extension module is not
  one the manifest lists (a partial or older build): then one `NativeBuildWarning` names why.

All or nothing, never per module: the compiled modules live in one shared library
(`streams/_native__mypyc*.so`) and call each other's functions and classes natively, so a
compiled `state` next to a `blocks` served from source would be two versions of one module in
one process (and a compiled caller of a module whose native part never initialised crashes).

Only the standard library here: every process imports this first.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

__all__ = [
    "MANIFEST_NAME",
    "NativeBuildWarning",
    "SourceFinder",
    "compiled_modules",
    "extension_modules",
    "install",
    "is_compiled",
    "pure_reason",
    "source_hash",
]

MANIFEST_NAME = "_native_manifest.json"
"""Written by scripts/build_native.py beside this module, after a build succeeded."""

_PURE_ENV = "STREAMS_PURE"


class NativeBuildWarning(RuntimeWarning):
    """The compiled core is there but not used (stale, partial or unreadable build)."""


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def extension_modules(package_dir: Path, package: str) -> dict[str, Path]:
    """Every extension module this interpreter would load under the package, by module name
    (mypyc's shared library included: it has no source and is never served from one)."""
    found: dict[str, Path] = {}
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for path in package_dir.rglob("*" + suffix):
            stem = path.name[: -len(suffix)]
            if "." in stem:  # `x.cpython-311-...so` seen through the bare `.so` suffix
                continue
            rel = path.relative_to(package_dir).parts
            found.setdefault(".".join((package, *rel[:-1], stem)), path)
    return found


def pure_reason(package_dir: Path, package: str, env: dict[str, str] | None = None) -> str | None:
    """Why this process must run the package's Python sources although extension modules are
    there; None when the build is fresh or nothing is compiled, "" when asked to
    (STREAMS_PURE=1), which needs no warning."""
    return _decide(package_dir, package, dict(os.environ) if env is None else env)[0]


def _decide(
    package_dir: Path, package: str, env: dict[str, str]
) -> tuple[str | None, dict[str, Path]]:
    extensions = extension_modules(package_dir, package)
    if not extensions:
        return None, extensions
    if env.get(_PURE_ENV, "") not in ("", "0"):
        return "", extensions
    try:
        manifest = json.loads((package_dir / MANIFEST_NAME).read_text())
        modules: dict[str, str] = manifest["modules"]
        depends: dict[str, str] = manifest.get("depends", {})
        shared: str = manifest["shared_library"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"no readable {MANIFEST_NAME} ({type(exc).__name__}): a partial build", extensions
    changed = []
    for name, digest in sorted(modules.items()):
        if name not in extensions:
            return f"{name} is in {MANIFEST_NAME} but not built", extensions
        source = _source_of(extensions[name])
        try:
            fresh = source_hash(source) == digest
        except OSError:
            fresh = False
        if not fresh:
            changed.append(str(source.relative_to(package_dir.parent)))
    for rel, digest in sorted(depends.items()):
        try:
            fresh = source_hash(package_dir.parent / rel) == digest
        except OSError:
            fresh = False
        if not fresh:
            changed.append(f"{rel} (imported by the compiled modules)")
    if changed:
        return f"{', '.join(changed)} changed since compiled", extensions
    strays = sorted(set(extensions) - set(modules) - {shared})
    if strays:
        return f"{', '.join(strays)} compiled but not in {MANIFEST_NAME}", extensions
    return None, extensions


def _source_of(extension: Path) -> Path:
    """`blocks.cpython-311-x86_64-linux-gnu.so` -> `blocks.py` beside it."""
    return extension.with_name(extension.name.split(".", 1)[0] + ".py")


class SourceFinder:
    """A meta path finder that serves the named modules from their `.py` files."""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = sources

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        source = self.sources.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def install(package_dir: Path, package: str) -> bool:
    """Chooses between the compiled modules and their sources for this process (see the module
    docstring) and returns whether the compiled ones run. The package's `__init__` calls it
    before importing anything of its own."""
    reason, extensions = _decide(package_dir, package, dict(os.environ))
    if reason is None:
        return bool(extensions)
    if reason:
        warnings.warn(
            f"{package}: running the Python sources, not the compiled core: {reason} "
            f"(rebuild: python3 scripts/build_native.py, or remove it: --clean)",
            NativeBuildWarning,
            stacklevel=2,
        )
    sources = {name: _source_of(path) for name, path in extensions.items()}
    finder = SourceFinder({name: path for name, path in sources.items() if path.is_file()})
    sys.meta_path.insert(0, finder)
    return False


def is_compiled(module: ModuleType) -> bool:
    """Whether this module object was loaded from an extension module (compiled)."""
    origin = getattr(module, "__file__", None) or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def compiled_modules() -> list[str]:
    """The modules of this package this process runs compiled (empty when pure)."""
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith(f"{__package__}.") and is_compiled(module)
    )
