"""The browser the web interface's tests use: Debian's Chromium starts through Playwright, and a
failing browser test leaves its screenshot behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page

TESTS_DIR = Path(__file__).resolve().parent


def test_debian_chromium_renders_a_page_driven_by_playwright(page: Page) -> None:
    page.set_content("<label for=q>Question</label><input id=q>")
    page.get_by_label("Question").fill("hello")
    assert page.input_value("#q") == "hello"


def test_a_failing_browser_test_keeps_a_screenshot_of_its_page(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytester.makeconftest('pytest_plugins = ["browser"]')
    pytester.makepyfile(test_inner="""
        def test_sees_the_wrong_heading(page):
            page.set_content("<h1>right</h1>")
            assert page.text_content("h1") == "wrong"
    """)
    artifacts = tmp_path / "artifacts"
    monkeypatch.setenv("MCP_RUN_TEST_ARTIFACTS", str(artifacts))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    shots = list((artifacts / "screenshots").glob("*.png"))
    assert [shot.name for shot in shots] == ["test_inner.py_test_sees_the_wrong_heading.png"]
    assert shots[0].read_bytes().startswith(b"\x89PNG")


def test_an_async_test_runs_after_a_browser_test_of_another_module_in_the_same_process(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Playwright's sync API marks its event loop as running in the main thread while it is open:
    # a browser kept for the whole session would leave no async test able to start after it.
    pytester.makeconftest('pytest_plugins = ["browser"]')
    pytester.makepyfile(test_a_browser="""
        def test_shows(page):
            page.set_content("<h1>hi</h1>")
            assert page.text_content("h1") == "hi"
    """, test_b_async="""
        import anyio
        import pytest

        @pytest.mark.anyio
        async def test_sleeps_not():
            await anyio.lowlevel.checkpoint()
    """)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "anyio")
    result.assert_outcomes(passed=2)
