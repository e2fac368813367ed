"""A published MCP App in a real browser: the extension's own example server
(``@modelcontextprotocol/server-basic-vanillajs`` from npm, installed by tests/thirdparty/install.sh,
run over stdio; its page is built on the extension's App SDK) mounted by apps-host.js in the harness
page of tests/web/apps_harness.py: the SDK's handshake, tool result, tool call and link request all
go through our host side of the bridge."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from apps_harness import WAIT, Harness, calls, open_app, serve_harness
from thirdparty.interop import program

if TYPE_CHECKING:
    from playwright.sync_api import Page

ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    servers = {"basic": {"command": program("mcp-server-basic-vanillajs"), "args": ["--stdio"]}}
    with serve_harness(servers, tmp_path_factory.mktemp("published-apps")) as running:
        yield running


def test_the_extensions_example_app_shows_its_result_calls_its_tool_and_asks_for_a_link(
    page: Page, harness: Harness,
) -> None:
    from playwright.sync_api import expect

    frame = open_app(page, harness, "tool=basic__get-time")
    expect(frame.locator("#server-time")).to_have_text(ISO_TIME, timeout=WAIT)  # the tool's result
    shown = frame.locator("#server-time").text_content()

    frame.locator("#get-time-btn").click()
    expect(frame.locator("#server-time")).not_to_have_text(shown or "", timeout=WAIT)
    expect(frame.locator("#server-time")).to_have_text(ISO_TIME, timeout=WAIT)
    assert calls(page) == [{"name": "get-time", "arguments": {}}]

    frame.locator("#open-link-btn").click()
    expect(page.locator("#links")).to_have_text("https://modelcontextprotocol.io/", timeout=WAIT)
