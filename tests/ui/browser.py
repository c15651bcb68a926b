"""Debian's chromium driven by Python's Playwright, for the tests of `streams ui`.

No browser is downloaded (`playwright install` is never run): Playwright drives the chromium
that scripts/setup.sh installs from Debian. Missing, the tests that need it are skipped with
the reason, except under CI (the `CI` environment variable set), where they fail: CI must run
the browser test.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def require_browser() -> None:
    missing = []
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        missing.append(f"chromium ({CHROMIUM}; scripts/setup.sh installs Debian's package)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package (pip install -e '.[test]')")
    if not missing:
        return
    why = "the browser test needs " + " and ".join(missing)
    if os.environ.get("CI"):
        pytest.fail(why + " (CI is set: the browser test must run)")
    pytest.skip(why)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium browser (Playwright's sync API)."""
    require_browser()
    from playwright.sync_api import sync_playwright

    path = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
