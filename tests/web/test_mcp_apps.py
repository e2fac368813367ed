"""MCP Apps on the Python side: which tools name a ``ui://`` page, the page read through the fleet
from a real server (tests/mcp_servers/apps_server.py over streamable HTTP on loopback, one for the
module), its type and size checked, the frame's
Content-Security-Policy built from the page's declared domains, and which tools an app may call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import ROOT, write_manifest
from mcp_servers import _serve
from mcp_servers.apps_server import BLOB_PAGE, COUNTER_PAGE, COUNTER_URI, build
from mcp_servers.loopback import serve_app

from runner.agent.reconcile import launch_spec
from runner.errors import AppResourceError, ServerRequestError, ToolError
from runner.events import ApprovalAsked
from runner.manifest.loading import parse_manifest
from runner.servers import open_fleet
from runner.tools.caller import ToolCaller
from runner.tools.catalog import ToolCatalog
from runner.web.apps import app_call_target, call_for_app, find_apps, load_app

pytestmark = pytest.mark.anyio
TESTS = ROOT / "tests"
FAST = {"timeout": "10s", "startup_timeout": "30s"}


@pytest.fixture(scope="module")
def apps_url() -> Iterator[str]:
    with serve_app(_serve.http_app(build(), transport="http")) as running:
        yield running.url()


@asynccontextmanager
async def catalog_for(tmp_path: Path, servers: dict[str, Any], **top: Any) -> AsyncIterator[ToolCatalog]:
    path = write_manifest(tmp_path, servers, name="t", defaults=FAST, **top)
    loaded = parse_manifest(path.read_text(), file=str(path), path=path)
    specs = {key: launch_spec(spec) for key, spec in loaded.manifest.servers.items()}
    with anyio.fail_after(60):
        async with open_fleet(specs, base_dir=TESTS, state_dir=tmp_path / "state") as fleet:
            yield ToolCatalog(loaded.manifest, fleet.connections, TESTS)


def directives(policy: str) -> dict[str, str]:
    parts = (part.strip().partition(" ") for part in policy.split(";"))
    return {name: value.strip() for name, _, value in parts}


async def test_tools_naming_a_ui_page_are_found_by_the_current_and_the_legacy_key(
    tmp_path: Path, apps_url: str,
) -> None:
    async with catalog_for(tmp_path, {"apps": {"url": apps_url}}) as catalog:
        listing = find_apps(catalog)
    assert listing.tools["apps__show_counter"].resource_uri == COUNTER_URI
    assert listing.tools["apps__show_counter"].tool == "show_counter"
    assert listing.tools["apps__show_counter"].visibility == {"model", "app"}
    assert listing.tools["apps__legacy_counter"].resource_uri == COUNTER_URI
    assert listing.tools["apps__add"].visibility == {"app"}
    assert not {"apps__plain", "apps__model_only", "apps__not_ui"} & set(listing.tools)
    assert listing.warnings == ["apps: tool 'not_ui': _meta.ui.resourceUri 'https://example.com/app.html' "
                                "is not a ui:// URI; shown without its page",
                                "apps: tool 'not_mapping': _meta.ui 'notamapping' is not an object; "
                                "shown without its page"]


async def test_an_app_page_is_read_from_its_server_and_by_default_its_frame_reaches_nothing(
    tmp_path: Path, apps_url: str,
) -> None:
    async with catalog_for(tmp_path, {"apps": {"url": apps_url}}) as catalog:
        apps = find_apps(catalog).tools
        page = await load_app(catalog, apps["apps__show_counter"])
        blob = await load_app(catalog, apps["apps__from_blob"])
    assert page.html == COUNTER_PAGE
    assert blob.html == BLOB_PAGE
    policy = page.headers()["content-security-policy"]
    assert directives(policy) == {
        "default-src": "'none'", "script-src": "'unsafe-inline'", "style-src": "'unsafe-inline'",
        "img-src": "data:", "font-src": "'none'", "media-src": "data:", "connect-src": "'none'",
        "frame-src": "'none'", "object-src": "'none'", "base-uri": "'none'", "form-action": "'none'",
        "frame-ancestors": "'self'", "sandbox": "allow-scripts",
    }
    assert page.csp.declared() == {}


async def test_declared_domains_open_exactly_the_directives_the_extension_maps_them_to(
    tmp_path: Path, apps_url: str,
) -> None:
    async with catalog_for(tmp_path, {"apps": {"url": apps_url}}) as catalog:
        page = await load_app(catalog, find_apps(catalog).tools["apps__with_cdn"])
    found = directives(page.csp.policy())
    cdn = "https://cdn.example.com https://*.static.example.com"
    assert found["connect-src"] == "https://api.example.com wss://live.example.com"
    assert found["script-src"] == f"'unsafe-inline' {cdn}"
    assert found["style-src"] == f"'unsafe-inline' {cdn}"
    assert found["img-src"] == f"data: {cdn}"
    assert found["font-src"] == cdn
    assert found["media-src"] == f"data: {cdn}"
    assert found["frame-src"] == "https://player.example.com"
    assert found["base-uri"] == "https://base.example.com"
    assert found["default-src"] == found["object-src"] == "'none'"
    assert "'self'" not in page.csp.policy().replace("frame-ancestors 'self'", "")


async def test_a_page_that_is_not_an_app_too_big_or_smuggling_a_directive_is_a_located_error(
    tmp_path: Path, apps_url: str,
) -> None:
    async with catalog_for(tmp_path, {"apps": {"url": apps_url}}) as catalog:
        apps = find_apps(catalog).tools
        with pytest.raises(AppResourceError) as wrong_type:
            await load_app(catalog, apps["apps__wrong_type"])
        with pytest.raises(AppResourceError) as too_big:
            await load_app(catalog, apps["apps__show_counter"], max_bytes=100)
        with pytest.raises(AppResourceError) as smuggling:
            await load_app(catalog, apps["apps__bad_csp"])
        with pytest.raises(ServerRequestError) as missing:
            await load_app(catalog, apps["apps__missing"])
    assert (wrong_type.value.server, wrong_type.value.uri) == ("apps", "ui://plain/page.html")
    assert str(wrong_type.value) == ("apps: app resource 'ui://plain/page.html': its type is 'text/html', "
                                     "not 'text/html;profile=mcp-app': not an app page")
    size = len(COUNTER_PAGE.encode())
    assert str(too_big.value) == (
        f"apps: app resource '{COUNTER_URI}': its page is {size} bytes, over the limit of 100")
    assert "_meta.ui.csp.connectDomains[0] 'https://api.example.com; script-src *' is not an origin" in str(
        smuggling.value)
    assert missing.value.server == "apps" and "ui://nowhere/app.html" in str(missing.value)


async def test_an_app_may_call_only_app_visible_tools_its_own_server_offers(
    tmp_path: Path, apps_url: str,
) -> None:
    servers = {"apps": {"url": apps_url, "tools": {"except": ["plain"]}}, "other": {"url": apps_url}}
    async with catalog_for(tmp_path, servers) as catalog:
        counter = find_apps(catalog).tools["apps__show_counter"]
        assert app_call_target(catalog, counter, "add") == "apps__add"
        assert app_call_target(catalog, counter, "show_counter") == "apps__show_counter"
        with pytest.raises(ToolError, match="not visible to apps"):
            app_call_target(catalog, counter, "model_only")
        with pytest.raises(ToolError, match="does not offer from server 'apps'"):
            app_call_target(catalog, counter, "plain")  # filtered out by the manifest
        assert "other__plain" in catalog.entries  # the same tool on another server is no way round


async def test_an_apps_call_goes_through_the_manifests_approvals_and_policy(
    tmp_path: Path, apps_url: str,
) -> None:
    servers = {"apps": {"url": apps_url, "tools": {"approve": ["add"]}}}
    policy = [{"tool": "apps__show_counter", "action": "deny", "reason": "no counters today"}]
    asked: list[ApprovalAsked] = []
    answers: list[dict[str, Any]] = [{"action": "approve"}, {"action": "approve", "args": {"count": 9}},
                                     {"action": "deny", "reason": "not now"}]

    async def approve(approval: ApprovalAsked) -> dict[str, Any]:
        asked.append(approval)
        return answers[len(asked) - 1]

    async with catalog_for(tmp_path, servers, policy=policy) as catalog:
        caller = ToolCaller(lambda: catalog)
        counter = find_apps(catalog).tools["apps__show_counter"]

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return await call_for_app(caller, catalog, counter, tool, arguments, approve=approve,
                                      call_id="c1")

        approved = await call("add", {"count": 1})
        edited = await call("add", {"count": 1})
        with pytest.raises(ToolError, match="^denied: not now$"):
            await call("add", {"count": 1})
        with pytest.raises(ToolError, match="no counters today"):
            await call("show_counter", {})  # the policy denies it: nobody is asked
        with pytest.raises(ToolError, match="invalid arguments for apps__add"):
            await call("add", {"count": "many"})  # refused before anyone is asked
        with pytest.raises(ToolError, match="not visible to apps"):
            await call("model_only", {})
    assert approved["structuredContent"] == {"count": 2} and approved["isError"] is False
    assert edited["structuredContent"] == {"count": 10}
    assert [(approval["tool"], approval["args"], approval["id"]) for approval in asked] == [
        ("apps__add", {"count": 1}, "c1")] * 3
