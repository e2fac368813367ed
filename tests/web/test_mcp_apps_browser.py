"""MCP Apps in a real browser: runner/web/static/apps-host.js mounting the pages of real MCP Apps
servers (tests/mcp_servers/apps_server.py and hostile_apps.py, over streamable HTTP) in the harness
page of tests/web/apps_harness.py, one harness for the module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from apps_harness import WAIT, Harness, args_query, calls, open_app, serve_harness
from mcp_servers import _serve, apps_server, hostile_apps
from mcp_servers.loopback import serve_app

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with (serve_app(_serve.http_app(apps_server.build(), transport="http")) as apps,
          serve_app(_serve.http_app(hostile_apps.build(), transport="http")) as hostile):
        servers = {"apps": {"url": apps.url(), "tools": {"approve": ["add"]}},
                   "hostile": {"url": hostile.url()}}
        with serve_harness(servers, tmp_path_factory.mktemp("apps-harness")) as running:
            yield running


def test_an_app_renders_its_tool_result_and_calls_a_tool_back_through_the_page(
    page: Page, harness: Harness,
) -> None:
    from playwright.sync_api import expect

    frame = open_app(page, harness, f"tool=apps__show_counter&args={args_query({'start': 41})}")
    expect(frame.locator("#host")).to_have_text("host: mcp-run 2026-01-26", timeout=WAIT)
    expect(frame.locator("#input")).to_have_text('input: {"start":41}', timeout=WAIT)
    expect(frame.locator("#result")).to_contain_text('"count": 41', timeout=WAIT)
    assert page.get_attribute("iframe.mcp-app-frame", "sandbox") == "allow-scripts"

    frame.locator("#more").click()
    expect(frame.locator("#answer")).to_contain_text('"count": 42', timeout=WAIT)
    assert calls(page) == [{"name": "add", "arguments": {"count": 41}}]
    asked = [(approval["tool"], approval["args"]) for approval in harness.state.approvals]
    assert asked == [("apps__add", {"count": 41})]  # the manifest's approval was asked

    frame.locator("#docs").click()
    expect(frame.locator("#opened")).to_have_text("link opened", timeout=WAIT)
    assert page.evaluate("window.links") == ["https://example.com/docs"]

    reported = frame.locator("#size").text_content() or ""
    height = int(reported.removeprefix("size: "))
    frame_height = page.locator("iframe.mcp-app-frame").evaluate("frame => frame.style.height")
    assert frame_height == f"{min(height, 800)}px"  # 800: mountApp's default maxHeight

    page.evaluate("window.app.teardown('done')")  # resolves once the app answered (or after its bound)
    assert page.evaluate("window.logs") == [{"level": "info", "data": "tearing down: done"}]
    assert page.evaluate("window.closings") == ["done"]
    assert page.locator("iframe.mcp-app-frame").count() == 0


def test_an_app_mounted_while_its_call_runs_gets_the_result_or_the_cancellation_when_they_come(
    page: Page, harness: Harness,
) -> None:
    from playwright.sync_api import expect

    frame = open_app(page, harness, "tool=apps__show_counter&pending=1")
    expect(frame.locator("#input")).to_have_text("input: {}", timeout=WAIT)
    expect(frame.locator("#result")).to_have_text("no result yet", timeout=WAIT)
    page.evaluate("window.app.sendToolCancelled('stopped by the user')")
    expect(frame.locator("#result")).to_have_text("cancelled: stopped by the user", timeout=WAIT)
    page.evaluate("window.app.sendToolResult(window.opened.toolResult)")
    expect(frame.locator("#result")).to_contain_text('"count": 1', timeout=WAIT)


def test_an_app_has_at_most_eight_requests_waiting_on_the_page_and_the_rest_are_refused(
    page: Page, harness: Harness,
) -> None:
    from playwright.sync_api import expect

    frame = open_app(page, harness, "tool=apps__show_counter&gate=1")
    expect(frame.locator("#more")).to_be_enabled(timeout=WAIT)
    frame.locator("#flood").click()  # twelve tools/call at once; the page holds them all
    expect(frame.locator("#flooded")).to_have_text("refused 4", timeout=WAIT)
    assert len(calls(page)) == 8
    page.evaluate("window.openGate()")
    expect(frame.locator("#flooded")).to_have_text("done: 8 added, 4 refused", timeout=WAIT)


def test_an_app_that_navigates_its_frame_away_loses_the_bridge_and_its_frame(
    page: Page, harness: Harness,
) -> None:
    from playwright.sync_api import expect

    frame = open_app(page, harness, "tool=apps__show_counter")
    expect(frame.locator("#result")).to_contain_text('"count": 1', timeout=WAIT)
    frame.locator("#wander").click()
    expect(page.locator("iframe.mcp-app-frame")).to_have_count(0, timeout=WAIT)
    assert page.evaluate("window.closings") == ["the app left its page"]


def test_a_hostile_app_reaches_nothing_but_the_bridge_and_forged_messages_change_nothing(
    page: Page, harness: Harness,
) -> None:
    from playwright.sync_api import expect

    start = f"{harness.url}/?tool=hostile__snoop"
    hostile_apps.RAN.clear()  # the worker may have served this server to another module's tests
    frame = open_app(page, harness, "tool=hostile__snoop")
    expect(frame.locator("#status")).to_have_text("reported", timeout=WAIT)
    page.click("#add-rogue")  # the app is initialized: a forged call from elsewhere would now run
    expect(page.locator("#rogue")).to_have_attribute("data-sent", "yes", timeout=WAIT)

    reports = [call for call in calls(page) if call["name"] == "report"]
    assert len(reports) == 1  # the rogue frame's forged report never reached callTool
    outcomes = reports[0]["arguments"]["outcomes"]
    assert set(outcomes) == set(hostile_apps.ATTEMPTS)
    reached = {name: outcome for name, outcome in outcomes.items() if not outcome.startswith("blocked")}
    assert reached == {}
    assert "not visible to apps" in outcomes["forged_call_model_only"]
    assert "does not offer from server 'hostile'" in outcomes["forged_call_unknown"]
    assert [call["name"] for call in calls(page)] == ["wipe", "show_counter", "report"]

    assert harness.state.hits == []  # nothing under /api/ reached the page's server
    assert hostile_apps.RAN == ["snoop", "report"]  # the model-only tool never ran
    assert page.url == start
    assert "harness=secret-cookie" in page.evaluate("document.cookie")
    assert page.evaluate("localStorage.getItem('harness')") == "secret-storage"
    assert "pwned" not in page.content()
    assert page.evaluate("window.links") == []
