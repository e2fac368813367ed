"""A small page hosting MCP Apps with runner/web/static/apps-host.js, for the browser tests.

``harness_app(servers, folder, state)`` is a starlette app: at start it opens a fleet of the given
servers (manifest entries by key) and builds their tool catalog. The page
(``/?tool=NAME&args=JSON``), under a strict Content-Security-Policy like the real page's, asks
``/open`` to load the tool's app page (:func:`runner.web.apps.load_app`) and to call the tool
through the runner's tool caller, then mounts the app with ``mountApp``; its ``callTool`` records
each call in ``window.calls`` and runs it through ``/call`` (:func:`runner.web.apps.call_for_app`,
whose approvals the harness records in ``approvals`` and grants). Any request under ``/api/``
(what a hostile app would aim at) is recorded in ``hits``. Its button ``#add-rogue`` embeds
another frame of the page that posts a forged ``tools/call``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from browser import BROWSER_TIMEOUT_MS as WAIT
from builders import ROOT, write_manifest
from mcp_servers.loopback import serve_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from runner.agent.reconcile import launch_spec
from runner.errors import ToolError
from runner.events import ApprovalAsked
from runner.manifest.loading import parse_manifest
from runner.servers import open_fleet
from runner.tools.caller import ToolCaller
from runner.tools.catalog import ToolCatalog
from runner.web.apps import AppFrames, AppListing, app_result, call_for_app, find_apps, load_app

if TYPE_CHECKING:
    from playwright.sync_api import FrameLocator, Page

START_TIMEOUT = 90.0  # the fleet's start on a loaded machine (its own start-up timeout is 60 s)
STATIC = ROOT / "runner" / "web" / "static"
# As strict as the real page's: no inline script, nothing from elsewhere.
PAGE_POLICY = ("default-src 'none'; script-src 'self'; connect-src 'self'; frame-src 'self'; "
               "style-src 'self'; img-src 'self'")
PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Apps harness</title>
<script type="module" src="/harness.js"></script></head>
<body><p id="state">loading</p><p id="links"></p><div id="apps"></div>
<button id="add-rogue" type="button">Add a rogue frame</button><div id="rogue"></div></body>
</html>
"""
SCRIPT = """import {mountApp} from "/apps-host.js";
window.calls = [];
window.links = [];
window.closings = [];
window.logs = [];
document.cookie = "harness=secret-cookie; SameSite=Strict";
localStorage.setItem("harness", "secret-storage");
const params = new URLSearchParams(location.search);
const tool = params.get("tool");
window.addEventListener("message", (event) => {
  if (event.data && event.data.rogue === "sent") document.getElementById("rogue").dataset.sent = "yes";
});
async function post(path, body) {
  const response = await fetch(path, {method: "POST", headers: {"content-type": "application/json"},
                                      body: JSON.stringify(body)});
  if (!response.ok) throw new Error(await response.text());
  return response.json();
}
const opened = await post("/open", {tool, arguments: JSON.parse(params.get("args") || "{}")});
window.opened = opened;
// gate=1: the app's calls wait until the test calls window.openGate()
let openGate;
const gate = new Promise((resolve) => { openGate = resolve; });
window.openGate = () => openGate();
// pending=1: mounted while the call still runs (its result or cancellation sent later by the test)
const {toolResult, ...known} = opened;
window.app = mountApp(document.getElementById("apps"), {
  ...known,
  toolResult: params.get("pending") ? undefined : toolResult,
  hostContext: {theme: "light", locale: "en-US"},
  async callTool(name, args) {
    window.calls.push({name, arguments: args});
    if (params.get("gate")) await gate;
    return post("/call", {tool, name, arguments: args});
  },
  async openLink(url) {
    window.links.push(url);
    document.getElementById("links").textContent = window.links.join(" ");
  },
  onLog(params) {
    window.logs.push(params);
  },
  onClose(reason) {
    window.closings.push(reason);
  },
});
// Another frame of this page, added on demand (once the app is initialized), forging its messages.
document.getElementById("add-rogue").addEventListener("click", () => {
  const rogue = document.createElement("iframe");
  rogue.src = "/rogue";
  document.getElementById("rogue").append(rogue);
});
document.getElementById("state").textContent = "mounted";
"""
ROGUE_PAGE = """<!DOCTYPE html>
<html><head><script src="/rogue.js"></script></head><body>rogue</body></html>"""
# Another frame of the page (same origin, not the app's) forging the app's call.
ROGUE_SCRIPT = """parent.postMessage({jsonrpc: "2.0", id: 7, method: "tools/call",
  params: {name: "report", arguments: {outcomes: {rogue: "REACHED"}}}}, "*");
parent.postMessage({rogue: "sent"}, "*");
"""


@dataclass
class HarnessState:
    hits: list[str] = field(default_factory=list)  # paths under /api/ that reached the server
    approvals: list[ApprovalAsked] = field(default_factory=list)  # the apps' calls the person was asked about
    catalog: ToolCatalog | None = None
    listing: AppListing | None = None
    frames: AppFrames = field(default_factory=AppFrames)
    ready: threading.Event = field(default_factory=threading.Event)  # the fleet is up, the catalog built


def harness_app(servers: dict[str, dict[str, Any]], folder: Path, state: HarnessState) -> Starlette:
    """The harness over ``servers`` (key -> manifest entry); ``state`` is filled at start and
    records what reached ``/api/``."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        path = write_manifest(folder, servers, name="harness",
                              defaults={"timeout": "30s", "startup_timeout": "60s"})
        loaded = parse_manifest(path.read_text(), file=str(path), path=path)
        specs = {key: launch_spec(spec) for key, spec in loaded.manifest.servers.items()}
        # The fleet's own start-up timeout bounds the start (a cancel scope around it could not
        # stay open across the yield).
        async with open_fleet(specs, base_dir=folder, state_dir=folder / "state") as fleet:
            state.catalog = ToolCatalog(loaded.manifest, fleet.connections, folder)
            state.listing = find_apps(state.catalog)
            state.ready.set()
            yield

    def caller() -> ToolCaller:
        catalog = state.catalog
        assert catalog is not None
        return ToolCaller(lambda: catalog)

    async def open_tool(request: Request) -> Response:
        body = await request.json()
        assert state.catalog is not None and state.listing is not None
        app = state.listing.tools[body["tool"]]
        page = await load_app(state.catalog, app)
        output = await caller().call(app.name, body["arguments"])
        return JSONResponse({"src": f"/frame/{state.frames.add(page)}", "csp": page.csp.declared(),
                             "toolName": app.tool, "toolInput": body["arguments"],
                             "toolResult": app_result(output)})

    async def frame(request: Request) -> Response:
        key = request.path_params["key"]
        if key not in state.frames:
            return PlainTextResponse("no such app frame", status_code=404)
        page = state.frames[key]
        return Response(page.html, headers=page.headers())

    async def call(request: Request) -> Response:
        body = await request.json()
        assert state.catalog is not None and state.listing is not None
        app = state.listing.tools[body["tool"]]
        call_id = f"app-call-{len(state.approvals) + 1}"
        try:
            result = await call_for_app(caller(), state.catalog, app, body["name"], body["arguments"],
                                        approve=approve, call_id=call_id)
        except ToolError as exc:
            return PlainTextResponse(str(exc), status_code=403)
        return JSONResponse(result)

    async def approve(asked: ApprovalAsked) -> dict[str, Any]:
        state.approvals.append(asked)  # the person says yes
        return {"action": "approve"}

    async def api(request: Request) -> Response:
        state.hits.append(request.url.path)
        return PlainTextResponse("secret")

    def fixed(body: str, media_type: str, policy: str | None = PAGE_POLICY
              ) -> Callable[[Request], Awaitable[Response]]:
        headers = {"content-security-policy": policy} if policy else {}

        async def serve(request: Request) -> Response:
            return Response(body, media_type=media_type, headers=headers)

        return serve

    async def apps_host(request: Request) -> Response:
        return FileResponse(STATIC / "apps-host.js", media_type="text/javascript")

    return Starlette(lifespan=lifespan, routes=[
        Route("/", fixed(PAGE, "text/html")),
        Route("/harness.js", fixed(SCRIPT, "text/javascript", None)),
        Route("/rogue", fixed(ROGUE_PAGE, "text/html")),
        Route("/rogue.js", fixed(ROGUE_SCRIPT, "text/javascript", None)),
        Route("/apps-host.js", apps_host),
        Route("/open", open_tool, methods=["POST"]),
        Route("/call", call, methods=["POST"]),
        Route("/frame/{key}", frame),
        Route("/api/{rest:path}", api, methods=["GET", "POST"]),
    ])


def args_query(arguments: dict[str, Any]) -> str:
    """The ``args`` query value of the harness page for ``arguments``."""
    return quote(json.dumps(arguments))


@dataclass
class Harness:
    """A running harness: its address and what it recorded."""

    url: str
    state: HarnessState


@contextmanager
def serve_harness(servers: dict[str, dict[str, Any]], folder: Path) -> Iterator[Harness]:
    """The harness over ``servers`` on loopback until the block ends."""
    state = HarnessState()
    with serve_app(harness_app(servers, folder, state)) as running:
        # Up before any test starts: its servers' processes are the module's, not a test's.
        if not state.ready.wait(START_TIMEOUT):
            raise RuntimeError(f"the apps harness did not start within {START_TIMEOUT} s")
        yield Harness(running.url(""), state)


def open_app(page: Page, harness: Harness, query: str) -> FrameLocator:
    from playwright.sync_api import expect

    page.goto(f"{harness.url}/?{query}")
    # a locator, not wait_for_function: the page's CSP forbids the eval that would need
    expect(page.locator("#state")).to_have_text("mounted", timeout=WAIT)
    return page.frame_locator("iframe.mcp-app-frame")


def calls(page: Page) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate("window.calls")
    return found
