"""No compiled async function reads an attribute of `self` that it assigned before an `await`.

Why: mypy narrows `self.x` to the type of what was assigned for the rest of the function, across
`await`s during which another task may assign it again, and the compiled core (mypyc) checks the
narrowed type when `self.x` is read: the write path's commit task died of "TypeError: None object
expected; got WriteBatch" on the compiled node only, and every write hung (docs/architecture.md,
the compiled core). Such a read goes through a method instead (`WritePath._open_ops`). The check
is by line order (a read after an assignment and an `await` below it), which found that bug in
the commit that had it and nothing else in the compiled modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def compiled_sources() -> list[Path]:
    """The modules scripts/build_native.py compiles (its `MODULES`, read without running it)."""
    tree = ast.parse((ROOT / "scripts" / "build_native.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["MODULES"]:
            return [ROOT / path for path in ast.literal_eval(node.value)]
    raise AssertionError("scripts/build_native.py has no MODULES list")


def reads_after_await(source: str) -> list[str]:
    """`function:line self.attr` for each read of an attribute the async function assigned,
    with an `await` between the assignment and the read."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.AsyncFunctionDef):
            continue
        events: list[tuple[int, int, str]] = []  # (line, order: load 0 / await 1 / store 2, attr)
        for node in ast.walk(fn):
            if isinstance(node, ast.Await):
                events.append((node.lineno, 1, ""))
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                events.append((node.lineno, 2 if isinstance(node.ctx, ast.Store) else 0, node.attr))
        stored: set[str] = set()
        awaited: set[str] = set()
        for line, order, attr in sorted(events):
            if order == 2:
                stored.add(attr)
                awaited.discard(attr)
            elif order == 1:
                awaited |= stored
            elif attr in awaited:
                found.append(f"{fn.name}:{line} self.{attr}")
    return found


def test_the_check_finds_the_read_that_killed_the_compiled_commit_task() -> None:
    source = """
class WritePath:
    async def _commit_loop(self):
        while True:
            await self._ready.wait()
            batch, self._open = self._open, None
            await self.writer.append(batch)
            self._mark = len(batch) + (len(self._open) if self._open is not None else 0)
"""
    assert reads_after_await(source) == [
        "_commit_loop:8 self._open",
        "_commit_loop:8 self._open",
    ]


def test_no_compiled_async_function_reads_an_attribute_it_assigned_before_an_await() -> None:
    sources = compiled_sources()
    assert len(sources) >= 30  # the manifest lists the compiled modules
    found = {
        str(path.relative_to(ROOT)): reads
        for path in sources
        if (reads := reads_after_await(path.read_text()))
    }
    assert found == {}
