"""Dependencies point down (docs/architecture.md, "Layers"): checked on what a fresh interpreter
imports, so an indirect import counts too."""

from __future__ import annotations

import json
import subprocess
import sys


def _imported_by(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {m for m in json.loads(out.stdout) if m.startswith(("streams", "topology"))}


def test_resp_does_not_import_the_commands() -> None:
    for module in ("streams.resp.server", "streams.resp.parser", "streams.resp.encode"):
        assert not {m for m in _imported_by(module) if m.startswith("streams.commands")}, module


def test_the_reply_model_and_the_error_catalogue_are_leaves() -> None:
    assert _imported_by("streams.reply") <= {"streams", "streams.reply", "streams.errors"}
    assert _imported_by("streams.errors") <= {"streams", "streams.errors"}
