"""MCP Apps in ``mcp-run web``'s real page (Chromium through Playwright): a conversation whose model
calls a tool with an app shows the app in the call's card with the call's input and result; the
app's own tool calls go through the manifest's approvals, asked in the card; a hostile app reaches
nothing but the bridge; the extension's published example renders.

One ``mcp-run web`` process serves the module's tests (apps_server and hostile_apps over streamable
HTTP in this process, the published example over stdio); each test sends its own turn. Its
servers are told (the ``io.modelcontextprotocol/ui`` client extension) that the page shows apps;
the chat's are not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import BROWSER_TIMEOUT_MS
from builders import mcp_run, server, write_manifest
from child_processes import SESSION_PROCESSES
from mcp_servers import _serve, apps_server, hostile_apps
from mcp_servers.loopback import serve_app
from playwright.sync_api import Page, Request, expect
from thirdparty.interop import program
from web_pages import ServedPage, card, request, send, web_page
from web_pages import open_page as open_agent_page

pytestmark = pytest.mark.timeout(300)
expect.set_options(timeout=BROWSER_TIMEOUT_MS)  # a loaded machine: generous bounds, never a sleep
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
FRAME = "iframe.mcp-app-frame"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedPage]:
    folder = tmp_path_factory.mktemp("web-apps")
    with (serve_app(_serve.http_app(apps_server.build(), transport="http")) as apps,
          serve_app(_serve.http_app(hostile_apps.build(), transport="http")) as hostile):
        manifest = write_manifest(folder, {
            "apps": {"url": apps.url(), "tools": {"approve": ["add"]}},
            "hostile": {"url": hostile.url()},
            "basic": {"command": program("mcp-server-basic-vanillajs"), "args": ["--stdio"]},
            "announced": server("announced"),
        }, name="web-apps", model="offline", defaults={"startup_timeout": "60s"})
        with web_page(manifest) as running:
            SESSION_PROCESSES.add(running.process.pid)  # its servers are the module's, not a test's
            try:
                yield running
            finally:
                SESSION_PROCESSES.discard(running.process.pid)


def open_page(page: Page, served: ServedPage) -> None:
    open_agent_page(page, served, "web-apps")


def test_a_tool_with_an_app_shows_it_in_its_card_and_the_apps_call_is_approved_in_the_page(
    page: Page, served: ServedPage,
) -> None:
    page.context.route("https://example.com/**", lambda route: route.fulfill(body="docs"))  # no network
    open_page(page, served)
    send(page, 'apps__show_counter {"start": 41}')
    shown = card(page, "apps__show_counter")
    frame = shown.frame_locator(FRAME)
    expect(frame.locator("#host")).to_have_text("host: mcp-run 2026-01-26")
    expect(frame.locator("#input")).to_have_text('input: {"start":41}')
    expect(frame.locator("#result")).to_contain_text('"count": 41')
    assert shown.locator(FRAME).get_attribute("sandbox") == "allow-scripts"

    frame.locator("#more").click()  # the app calls `add`, which the manifest says to approve
    approval = shown.locator(".app-approval")
    expect(approval.locator("h3")).to_have_text("apps__add wants to run")
    expect(frame.locator("#answer")).to_have_text("nothing added yet")  # it waits for the person
    approval.get_by_role("button", name="Approve").click()
    expect(frame.locator("#answer")).to_contain_text('"count": 42')
    expect(approval).to_have_count(0)

    with page.context.expect_page() as opened:
        frame.locator("#docs").click()  # the app asks for a link: opened without an opener
    expect(frame.locator("#opened")).to_have_text("link opened")
    assert opened.value.url == "https://example.com/docs"
    assert opened.value.evaluate("window.opener") is None


def test_an_app_is_told_the_reason_when_its_call_is_denied_in_the_page(page: Page,
                                                                        served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'apps__show_counter {"start": 7}')
    shown = card(page, "apps__show_counter")
    frame = shown.frame_locator(FRAME)
    expect(frame.locator("#result")).to_contain_text('"count": 7')
    frame.locator("#more").click()
    approval = shown.locator(".app-approval")
    approval.get_by_label("Reason to deny (optional)").fill("not on a Friday")
    approval.get_by_role("button", name="Deny").click()
    expect(frame.locator("#answer")).to_have_text("refused: denied: not on a Friday")
    expect(frame.locator("#result")).to_contain_text('"count": 7')  # the app is still there


def test_an_apps_call_runs_with_the_arguments_edited_in_the_page(page: Page, served: ServedPage) -> None:
    open_page(page, served)
    send(page, 'apps__show_counter {"start": 5}')
    shown = card(page, "apps__show_counter")
    frame = shown.frame_locator(FRAME)
    expect(frame.locator("#result")).to_contain_text('"count": 5')
    frame.locator("#more").click()
    approval = shown.locator(".app-approval")
    approval.get_by_role("button", name="Edit arguments").click()
    approval.get_by_label("Arguments (JSON)").fill('{"count": 99}')
    approval.get_by_role("button", name="Run with these arguments").click()
    expect(frame.locator("#answer")).to_contain_text('"count": 100')


def test_a_hostile_app_in_the_page_reaches_nothing_but_the_bridge(page: Page, served: ServedPage) -> None:
    from_frames: list[str] = []  # what the app's frame got from anywhere, beyond its own page
    app_calls: list[dict[str, Any]] = []  # the bridge's calls for the app (the page's /api/app-call)

    def seen(sent: Request) -> None:
        if sent.url.endswith("/api/app-call"):
            app_calls.append(sent.post_data_json)

    def reached(sent: Request) -> None:  # a request the policy blocked never finishes
        if sent.frame != page.main_frame and "/apps/frame/" not in sent.url:
            from_frames.append(sent.url)

    page.on("request", seen)
    page.on("requestfinished", reached)
    open_page(page, served)
    page.evaluate("document.cookie = 'page=secret-cookie; SameSite=Strict';"
                  "localStorage.setItem('page', 'secret-storage')")
    start = page.url
    hostile_apps.RAN.clear()  # the worker may have served this server to another module's tests
    send(page, "hostile__snoop {}")
    frame = card(page, "hostile__snoop").frame_locator(FRAME)
    expect(frame.locator("#status")).to_have_text("reported")

    reports = [call for call in app_calls if call["name"] == "report"]
    assert len(reports) == 1
    outcomes = reports[0]["arguments"]["outcomes"]
    assert set(outcomes) == set(hostile_apps.ATTEMPTS)
    assert {name: outcome for name, outcome in outcomes.items() if not outcome.startswith("blocked")} == {}
    assert "not visible to apps" in outcomes["forged_call_model_only"]
    assert from_frames == []  # no /api/ (nor anything else) from the app's frame
    assert "wipe" not in hostile_apps.RAN  # the model-only tool never ran
    assert page.url == start
    assert "page=secret-cookie" in page.evaluate("document.cookie")
    assert page.evaluate("localStorage.getItem('page')") == "secret-storage"
    assert "pwned" not in page.content()


def test_the_extensions_published_example_app_renders_and_calls_its_tool_in_the_page(
    page: Page, served: ServedPage,
) -> None:
    open_page(page, served)
    send(page, "basic__get-time {}")
    frame = card(page, "basic__get-time").frame_locator(FRAME)
    expect(frame.locator("#server-time")).to_have_text(ISO_TIME)  # the tool's result
    shown = frame.locator("#server-time").text_content() or ""
    frame.locator("#get-time-btn").click()  # through the bridge, the policy, the caller
    expect(frame.locator("#server-time")).not_to_have_text(shown)
    expect(frame.locator("#server-time")).to_have_text(ISO_TIME)


def test_an_app_frame_is_served_with_its_own_policy_only_and_an_unknown_key_is_404(
    page: Page, served: ServedPage,
) -> None:
    frames: list[str] = []
    page.on("request", lambda sent: frames.append(sent.url) if "/apps/frame/" in sent.url else None)
    open_page(page, served)
    send(page, 'apps__show_counter {"start": 3}')
    frame = card(page, "apps__show_counter").frame_locator(FRAME)
    expect(frame.locator("#result")).to_contain_text('"count": 3')
    path = "/apps/frame/" + frames[-1].rsplit("/apps/frame/", 1)[1]
    status, headers, body = request(served, path)  # no token: the key is the credential
    assert status == 200 and b"Counter" in body
    policy = headers["content-security-policy"]
    assert "sandbox allow-scripts" in policy and "'self'" not in policy.split("frame-ancestors")[0]
    assert "x-frame-options" not in headers  # the page's own headers would forbid the frame
    assert request(served, "/apps/frame/not-a-key")[0] == 404

    status, headers, _ = request(served, f"/?token={served.token}")
    directives = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
    assert directives["frame-src"] == f"{served.base}/apps/frame/"


def test_an_app_call_needs_the_token_and_a_known_key(served: ServedPage) -> None:
    call = {"key": "not-a-key", "name": "add", "arguments": {"count": 1}}
    assert request(served, "/api/app-call", body=call)[0] == 403
    assert request(served, "/api/app-call", body=call, token=served.token,
                   headers={"Origin": "https://attacker.example"})[0] == 403
    status, _, body = request(served, "/api/app-call", body=call, token=served.token)
    assert status == 404 and "no app is shown under this key" in json.loads(body)["error"]


def test_the_servers_panel_shows_what_is_wrong_with_a_tools_app_metadata(page: Page,
                                                                          served: ServedPage) -> None:
    open_page(page, served)
    expect(page.locator("#server-warnings")).to_contain_text("tool 'not_ui'")
    expect(page.locator("#server-warnings")).to_contain_text("tool 'not_mapping': _meta.ui 'notamapping'")
    send(page, "apps__missing {}")  # its page is missing: said in its card, and in the panel
    expect(card(page, "apps__missing").locator(".app-error")).to_contain_text("ui://nowhere/app.html")
    expect(page.locator("#server-warnings")).to_contain_text(
        "tool 'apps__missing': its app's page cannot be shown")



def test_the_servers_of_the_page_are_told_it_shows_mcp_apps_and_the_chats_are_not(
    served: ServedPage, tmp_path: Path,
) -> None:
    status, _, body = request(served, "/api/call", token=served.token,
                              body={"tool": "announced__extensions", "args": {}})
    assert status == 200
    announced = json.loads(json.loads(body)["result"]["text"])
    assert announced == {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}

    write_manifest(tmp_path, {"announced": server("announced")}, name="chat", model="offline")
    chat = mcp_run("agent.yaml", "-p", "announced__extensions {}", cwd=tmp_path)
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.strip() == "announced__extensions returned: {}"
