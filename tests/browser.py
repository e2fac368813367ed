"""A real browser for the web interface's tests: Debian's ``chromium`` (installed by
scripts/test.sh) driven by Playwright for Python, launched by its executable path (no browser
download).

``browser`` is one Chromium per test module (not per session: while Playwright's sync API runs, its
event loop counts as running in the main thread, so no async test could run after a browser test
in the same worker); ``page`` is a fresh context and page per test, whose
screenshot is kept in ``test-artifacts/screenshots/`` (or ``$MCP_RUN_TEST_ARTIFACTS``) when the
test fails. Tests that need them are skipped, with the reason, when Chromium or Playwright is
missing. Playwright's sync API is used: it runs its own loop, so browser tests are plain functions.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest
from child_processes import SESSION_PROCESSES

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_NAMES = ("chromium", "chromium-browser")
BROWSER_TIMEOUT_MS = 30_000  # every wait of a browser test; generous for a loaded machine


def chromium_path() -> str | None:
    """Debian's Chromium: ``$MCP_RUN_CHROMIUM``, else the first of CHROMIUM_NAMES on PATH."""
    if explicit := os.environ.get("MCP_RUN_CHROMIUM"):
        return explicit
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def artifacts_dir() -> Path:
    return Path(os.environ.get("MCP_RUN_TEST_ARTIFACTS", ROOT / "test-artifacts"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Keep each phase's report on the item, so `page` knows at teardown whether the test failed.
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    if executable is None:
        pytest.skip("no chromium on PATH (scripts/test.sh installs Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.skip(f"playwright is not installed ({exc}); pip install -e '.[test]'")
    before = {child.pid for child in psutil.Process().children()}
    with sync_playwright() as playwright:
        driver = {child.pid for child in psutil.Process().children()} - before
        SESSION_PROCESSES.update(driver)  # Chromium runs under Playwright's driver process
        # --no-sandbox: the tests run as root, where Chromium's own sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()
            SESSION_PROCESSES.difference_update(driver)


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context()
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    opened = context.new_page()
    try:
        yield opened
    finally:
        failed = any(getattr(getattr(request.node, f"report_{when}", None), "failed", False)
                     for when in ("setup", "call"))
        if failed:
            folder = artifacts_dir() / "screenshots"
            folder.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
            opened.screenshot(path=str(folder / f"{name}.png"), full_page=True)
        context.close()
