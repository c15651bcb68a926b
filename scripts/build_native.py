#!/usr/bin/env python3
"""Compile the hot, pure modules with mypyc, in place (as black and mypy ship themselves).

    python3 scripts/build_native.py           # build (about a minute on 2 cores); prints status
    python3 scripts/build_native.py --clean   # remove every compiled module: back to pure Python
    python3 scripts/build_native.py --status  # what this tree runs, and why (0: compiled)

Why a script and not a build hook in pyproject.toml: `pip install -e .` would then need mypy and
a C compiler in its isolated build environment on every install, and a compiler error would fail
the install; here a failed build warns, removes whatever it half made, and leaves the Python
sources running (exit status 1, which scripts/setup.sh reports and goes on past).

What it needs: gcc (Debian: `apt-get install gcc`), Python's headers (`python3-dev` for Debian's
Python; pyenv and the python.org builds ship them) and mypy (the test extras). The modules land
beside their sources as `<name>.cpython-311-<arch>.so` plus one shared library
`streams/_native__mypyc.*.so`; `streams/_native_manifest.json` records the SHA-256 of each
source, so `streams.native` falls back to the sources when one changed after the build (and
STREAMS_PURE=1 forces them). All of it is in .gitignore.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "streams"


def _load_native() -> ModuleType:
    """This tree's streams/native.py, without importing the package (whose __init__ would
    already choose between compiled and source modules for this process)."""
    spec = importlib.util.spec_from_file_location("_streams_native", PACKAGE / "native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


native = _load_native()

GROUP = "streams._native"
"""mypyc's shared library is `<GROUP>__mypyc`: inside the package, importable from any cwd."""

MODULES = [
    # the replicated state machine: every op of the node, replay and Spark goes through these
    "streams/crdt/ops.py",
    "streams/crdt/blocks.py",
    "streams/crdt/listpack.py",
    "streams/crdt/radix.py",
    "streams/crdt/entries.py",
    "streams/crdt/groups.py",
    "streams/crdt/state.py",
    "streams/crdt/digest.py",
    "streams/crdt/causal.py",
    "streams/crdt/region.py",
    "streams/crdt/fold.py",
    "streams/crdt/keyspace.py",
    "streams/crdt/lag.py",
    # leaves under it, and the op-log codec's hand-written paths (XAdd records, packs)
    "streams/ids.py",
    "streams/numbers.py",
    "streams/avro_binary.py",
    "streams/ops/fast_xadd.py",
    "streams/ops/pack.py",
    # the XADD command path of the node (its own time at pipeline 16, py-spy) and the parser
    "streams/commands/base.py",
    "streams/commands/trimming.py",
    "streams/commands/entries.py",
    "streams/resp/parser.py",
    # the node's request pipeline (two thirds of its time at pipeline 16, py-spy): the RESP
    # server, dispatch, shards and their write path, the replica, undo journal, counters
    "streams/resp/server.py",
    "streams/resp/encode.py",
    "streams/node/pipeline/dispatch.py",
    "streams/node/runtime/shards.py",
    "streams/node/runtime/shard.py",
    "streams/node/runtime/replica.py",
    "streams/node/runtime/undo.py",
    "streams/node/runtime/writepath.py",
    "streams/node/pipeline/stats.py",
    "streams/node/pipeline/clients.py",
    "streams/node/runtime/waiters.py",
    "streams/node/pipeline/transactions.py",
    "streams/node/pipeline/router.py",
    "streams/ops/codec.py",
]


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def dependencies(modules: list[str]) -> list[str]:
    """The sources of our own modules that the compiled ones import but that stay Python
    (relative paths: `streams/errors.py`, ...): a change there can make a build stale too."""
    compiled = {_module_name(m) for m in modules}
    found: set[str] = set()
    for module in modules:
        for node in ast.walk(ast.parse((ROOT / module).read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if not name.startswith("streams.") or name in compiled:
                    continue
                path = ROOT.joinpath(*name.split("."))
                for candidate in (path.with_suffix(".py"), path / "__init__.py"):
                    if candidate.is_file() and candidate != PACKAGE / "__init__.py":
                        found.add(str(candidate.relative_to(ROOT)))
    return sorted(found)


def clean() -> list[Path]:
    """Removes every extension module under streams/ and the manifest (not build/)."""
    removed = []
    manifest = PACKAGE / native.MANIFEST_NAME
    if manifest.exists():
        manifest.unlink()
        removed.append(manifest)
    for path in native.extension_modules(PACKAGE, "streams").values():
        path.unlink()
        removed.append(path)
    return removed


def _missing_tools() -> list[str]:
    missing = []
    cc = (sysconfig.get_config_var("CC") or "gcc").split()[0]
    if shutil.which(cc) is None:
        missing.append(f"a C compiler ({cc}; Debian: apt-get install gcc)")
    include = sysconfig.get_config_var("INCLUDEPY") or sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        missing.append(f"Python headers ({include}/Python.h; Debian: apt-get install python3-dev)")
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        missing.append("mypy (pip install -e '.[test]')")
    return missing


_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
modules, group, target, jobs = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4]
ext = mypycify(["--config-file", "pyproject.toml", *modules], group_name=group,
               target_dir=target, opt_level="3")
setup(name="streams-native", ext_modules=ext, script_args=[
    "-q", "build_ext", "--inplace", "--build-temp", target + "/obj", "--parallel", jobs])
"""


def build(jobs: int) -> int:
    missing = _missing_tools()
    if missing:
        print(f"build_native: cannot compile, missing {'; '.join(missing)}", file=sys.stderr)
        return 1
    clean()
    hashes = {_module_name(m): native.source_hash(ROOT / m) for m in MODULES}
    depends = {rel: native.source_hash(ROOT / rel) for rel in dependencies(MODULES)}
    target = "build/mypyc"
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        # mypyc's own cache outside the tree's .mypy_cache (a different mypy run's options)
        env = dict(os.environ, MYPY_CACHE_DIR=tmp, STREAMS_PURE="1")
        run = subprocess.run(
            [sys.executable, "-c", _SETUP, ",".join(MODULES), GROUP, target, str(jobs)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
    elapsed = time.monotonic() - t0
    if run.returncode != 0:
        clean()
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-25:])
        print(f"{tail}\nbuild_native: the build failed; running pure Python", file=sys.stderr)
        return 1
    manifest = {
        "built_by": "scripts/build_native.py",
        "python": sys.version.split()[0],
        "shared_library": GROUP + "__mypyc",
        "modules": hashes,
        "depends": depends,
    }
    (PACKAGE / native.MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n")
    problem = _check()
    if problem:
        clean()
        print(f"build_native: built but {problem}; removed, running pure Python", file=sys.stderr)
        return 1
    print(f"build_native: {len(MODULES)} modules compiled in {elapsed:.0f} s", file=sys.stderr)
    return 0


_PROBE = (
    "import json, streams, streams.native as n, importlib, sys; "
    "[importlib.import_module(m) for m in sys.argv[1].split(',')]; "
    "print(json.dumps(n.compiled_modules()))"
)


def _check() -> str | None:
    """In a fresh interpreter from a neutral cwd: does every built module load compiled?"""
    names = [_module_name(m) for m in MODULES]
    env = {k: v for k, v in os.environ.items() if k != "STREAMS_PURE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    run = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", _PROBE, ",".join(names)],
        cwd=tempfile.gettempdir(),
        env=env,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        return f"does not import: {run.stderr.strip().splitlines()[-1:]}"
    missing = set(names) - set(json.loads(run.stdout))
    if missing:
        return f"these modules did not load compiled: {sorted(missing)}"
    return None


def status() -> int:
    """Exit status 0 when this tree runs compiled (a fresh build, STREAMS_PURE unset), else 1."""
    reason = native.pure_reason(PACKAGE, "streams", dict(os.environ))
    built = sorted(native.extension_modules(PACKAGE, "streams"))
    if not built:
        print("pure Python: nothing compiled (python3 scripts/build_native.py builds it)")
    elif reason is None:
        print(f"compiled: {len(built) - 1} modules, fresh")
        return 0
    elif reason == "":
        print("pure Python: STREAMS_PURE is set (the compiled modules are there and fresh or not)")
    else:
        print(f"pure Python: {reason}")
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--clean", action="store_true", help="remove the compiled modules")
    group.add_argument("--status", action="store_true", help="say what this tree runs, and why")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="C compiler jobs")
    args = parser.parse_args()
    if args.clean:
        removed = clean()
        print(f"build_native: removed {len(removed)} files", file=sys.stderr)
        return 0
    if args.status:
        return status()
    return build(args.jobs)


if __name__ == "__main__":
    sys.exit(main())
