"""A server of MCP Apps (the ``io.modelcontextprotocol/ui`` extension): tools whose ``_meta`` names
a ``ui://`` resource, the HTML page a host shows in a sandboxed frame.

Tools: ``show_counter`` (its page, ``ui://counter/app.html``, renders the tool's input and result;
one button calls ``add`` back through the host bridge, one calls it twelve times at once, one asks
the host to open a link, one navigates the frame away; it reports its size, shows a cancelled
call, and answers the host's teardown with a log line), ``add`` (visible to the app only),
``legacy_counter`` (the same page named by the deprecated flat key ``ui/resourceUri``),
``model_only`` (visible to the model only), ``plain`` (no page), ``wrong_type`` (its resource is
``text/html``, not an app), ``from_blob`` (its page comes base64-encoded), ``with_cdn`` (its
resource declares CSP domains), ``bad_csp`` (its resource declares a domain that would smuggle a
directive in), ``not_ui`` (names a resource outside ``ui://``), ``not_mapping`` (its ``_meta.ui`` is
not an object) and ``missing`` (names a resource that does not exist).

The page speaks the bridge by hand (JSON-RPC over ``postMessage``), as the extension's text shows,
so the host is tested against the protocol rather than against an SDK.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `mcp_servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import MCPServer

from mcp_servers import _serve

APP_MIME_TYPE = "text/html;profile=mcp-app"
COUNTER_URI = "ui://counter/app.html"
CDN_CSP: dict[str, Any] = {
    "connectDomains": ["https://api.example.com", "wss://live.example.com"],
    "resourceDomains": ["https://cdn.example.com", "https://*.static.example.com"],
    "frameDomains": ["https://player.example.com"],
    "baseUriDomains": ["https://base.example.com"],
}
# A "domain" that would close connect-src and open script-src to everything if pasted into the policy.
SMUGGLING_CSP = {"connectDomains": ["https://api.example.com; script-src *"]}

BLOB_PAGE = "<!DOCTYPE html><p>an app sent as a blob: caf\u00e9</p>"
COUNTER_PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Counter</title></head>
<body>
<h1>Counter</h1>
<p id="host">not initialized</p>
<p id="input">no input yet</p>
<p id="result">no result yet</p>
<button id="more" type="button" disabled>Add one</button>
<p id="answer">nothing added yet</p>
<button id="docs" type="button">Docs</button>
<p id="opened">no link opened</p>
<button id="wander" type="button">Leave</button>
<button id="flood" type="button">Add twelve at once</button>
<p id="flooded">no flood yet</p>
<p id="size">no size sent</p>
<script>
"use strict";
let nextId = 1;
let count = null;
const pending = new Map();
function request(method, params) {
  const id = nextId++;
  parent.postMessage({jsonrpc: "2.0", id, method, params}, "*");
  return new Promise((resolve, reject) => pending.set(id, {resolve, reject}));
}
function notify(method, params) {
  parent.postMessage({jsonrpc: "2.0", method, params}, "*");
}
function show(id, text) {
  document.getElementById(id).textContent = text;
}
window.addEventListener("message", (event) => {
  if (event.source !== parent) return;
  const message = event.data;
  if (message.id !== undefined && !message.method && pending.has(message.id)) {
    const waiter = pending.get(message.id);
    pending.delete(message.id);
    if (message.error) waiter.reject(message.error); else waiter.resolve(message.result);
    return;
  }
  if (message.method === "ui/resource-teardown") {
    notify("notifications/message", {level: "info", data: "tearing down: " + message.params.reason});
    parent.postMessage({jsonrpc: "2.0", id: message.id, result: {}}, "*");
  } else if (message.method === "ui/notifications/tool-input") {
    show("input", "input: " + JSON.stringify(message.params.arguments));
  } else if (message.method === "ui/notifications/tool-result") {
    count = message.params.structuredContent.count;
    show("result", "result: " + message.params.content[0].text);
    document.getElementById("more").disabled = false;
  } else if (message.method === "ui/notifications/tool-cancelled") {
    show("result", "cancelled: " + message.params.reason);
  }
});
document.getElementById("more").addEventListener("click", async () => {
  try {
    const answer = await request("tools/call", {name: "add", arguments: {count}});
    count = answer.structuredContent.count;
    show("answer", "added: " + answer.content[0].text);
  } catch (error) {
    show("answer", "refused: " + error.message);
  }
});
document.getElementById("flood").addEventListener("click", async () => {
  let added = 0;
  let refused = 0;
  const calls = [];
  for (let index = 0; index < 12; index++) {
    calls.push(request("tools/call", {name: "add", arguments: {count: index}}).then(
      () => { added += 1; },
      () => { refused += 1; show("flooded", "refused " + refused); }));
  }
  await Promise.all(calls);
  show("flooded", "done: " + added + " added, " + refused + " refused");
});
document.getElementById("wander").addEventListener("click", () => {
  location.href = "data:text/html,<p>elsewhere</p>";
});
document.getElementById("docs").addEventListener("click", async () => {
  await request("ui/open-link", {url: "https://example.com/docs"});
  show("opened", "link opened");
});
(async () => {
  const init = await request("ui/initialize", {
    appInfo: {name: "counter", version: "1.0.0"},
    appCapabilities: {},
    protocolVersion: "2026-01-26",
  });
  show("host", "host: " + init.hostInfo.name + " " + init.protocolVersion);
  notify("ui/notifications/initialized", {});
  const height = document.documentElement.scrollHeight;
  notify("ui/notifications/size-changed", {width: document.documentElement.scrollWidth, height});
  show("size", "size: " + height);
})();
</script>
</body>
</html>
"""


def build() -> MCPServer:
    server = MCPServer("apps")

    @server.resource(COUNTER_URI, name="counter", mime_type=APP_MIME_TYPE)
    def counter_page() -> str:
        return COUNTER_PAGE

    @server.resource("ui://plain/page.html", name="plain_html", mime_type="text/html")
    def plain_html() -> str:
        return "<!DOCTYPE html><p>a web page, not an app</p>"

    @server.resource("ui://cdn/app.html", name="cdn", mime_type=APP_MIME_TYPE, meta={"ui": {"csp": CDN_CSP}})
    def cdn_page() -> str:
        return "<!DOCTYPE html><p>an app that loads from a CDN</p>"

    @server.resource("ui://smuggling/app.html", name="smuggling", mime_type=APP_MIME_TYPE,
                     meta={"ui": {"csp": SMUGGLING_CSP}})
    def smuggling_page() -> str:
        return "<!DOCTYPE html><p>an app whose policy is a trap</p>"

    @server.resource("ui://blob/app.html", name="blob", mime_type=APP_MIME_TYPE)
    def blob_page() -> bytes:
        return BLOB_PAGE.encode()

    @server.tool(meta={"ui": {"resourceUri": COUNTER_URI}})
    def show_counter(start: int = 1) -> dict[str, int]:
        """Show a counter starting at ``start``."""
        return {"count": start}

    @server.tool(meta={"ui": {"resourceUri": COUNTER_URI, "visibility": ["app"]}})
    def add(count: int) -> dict[str, int]:
        """Add one to ``count`` (called by the counter's page)."""
        return {"count": count + 1}

    @server.tool(meta={"ui/resourceUri": COUNTER_URI})
    def legacy_counter(start: int = 1) -> dict[str, int]:
        """The counter, named by the deprecated flat key."""
        return {"count": start}

    @server.tool(meta={"ui": {"visibility": ["model"]}})
    def model_only() -> str:
        """A tool the model may call but no app may."""
        return "model only"

    @server.tool()
    def plain() -> str:
        """A tool without a page."""
        return "plain"

    @server.tool(meta={"ui": {"resourceUri": "ui://plain/page.html"}})
    def wrong_type() -> str:
        """A tool whose page is not an MCP App."""
        return "wrong type"

    @server.tool(meta={"ui": {"resourceUri": "ui://cdn/app.html"}})
    def with_cdn() -> str:
        """A tool whose page declares the domains it loads from."""
        return "cdn"

    @server.tool(meta={"ui": {"resourceUri": "ui://smuggling/app.html"}})
    def bad_csp() -> str:
        """A tool whose page declares a domain that is a policy in disguise."""
        return "bad csp"

    @server.tool(meta={"ui": {"resourceUri": "ui://blob/app.html"}})
    def from_blob() -> str:
        """A tool whose page comes base64-encoded."""
        return "blob"

    @server.tool(meta={"ui": {"resourceUri": "https://example.com/app.html"}})
    def not_ui() -> str:
        """A tool naming a page outside ``ui://``."""
        return "not ui"

    @server.tool(meta={"ui": "notamapping"})
    def not_mapping() -> str:
        """Its _meta.ui is not an object."""
        return "not mapping"

    @server.tool(meta={"ui": {"resourceUri": "ui://nowhere/app.html"}})
    def missing() -> str:
        """A tool naming a page the server does not have."""
        return "missing"

    return server


if __name__ == "__main__":
    _serve.main(build)
