"""Tools of MCP Apps only for their pages (``_meta.ui.visibility: [app]``) are not the model's: not
offered to it and refused when it calls one anyway, while a direct call (``/call``, an app's page
through the web page) still reaches them; tools for the model only, or for both, are offered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import ROOT, write_manifest
from mcp import types
from mcp_servers import _serve
from mcp_servers.apps_server import build
from mcp_servers.loopback import serve_app

from runner.agent.reconcile import launch_spec
from runner.errors import ToolError
from runner.manifest.loading import parse_manifest
from runner.servers import open_fleet
from runner.tools.caller import ToolCaller
from runner.tools.catalog import ToolCatalog
from runner.tools.visibility import tool_visibility


def definition(meta: dict[str, Any] | None) -> types.Tool:
    return types.Tool(name="t", input_schema={"type": "object"}, _meta=meta)


@pytest.mark.parametrize(("meta", "visibility"), [
    (None, {"model", "app"}),
    ({"ui": {"resourceUri": "ui://a"}}, {"model", "app"}),
    ({"ui": {"visibility": ["app"]}}, {"app"}),
    ({"ui": {"visibility": ["model"]}}, {"model"}),
    ({"ui": {"visibility": ["app", "somebody"]}}, {"app"}),
    ({"ui": {"visibility": []}}, set()),
])
def test_a_tools_visibility_is_both_unless_it_names_who(
    meta: dict[str, Any] | None, visibility: set[str],
) -> None:
    assert tool_visibility(definition(meta)) == visibility


@pytest.fixture(scope="module")
def apps_url() -> Iterator[str]:
    with serve_app(_serve.http_app(build(), transport="http")) as running:
        yield running.url()


@pytest.mark.anyio
async def test_a_tool_for_app_pages_only_is_neither_offered_to_the_model_nor_called_by_it(
    tmp_path: Path, apps_url: str,
) -> None:
    path = write_manifest(tmp_path, {"apps": {"url": apps_url}}, name="t", defaults={"timeout": "10s"})
    loaded = parse_manifest(path.read_text(), file=str(path), path=path)
    specs = {key: launch_spec(spec) for key, spec in loaded.manifest.servers.items()}
    with anyio.fail_after(60):
        async with open_fleet(specs, base_dir=ROOT / "tests", state_dir=tmp_path / "state") as fleet:
            catalog = ToolCatalog(loaded.manifest, fleet.connections, ROOT / "tests")
            offered = {tool.name for tool in catalog.tools}
            caller = ToolCaller(lambda: catalog)
            with pytest.raises(ToolError, match="for its server's app pages only"):
                await caller.model_call("apps__add", {"count": 1})
            direct = await caller.call("apps__add", {"count": 1})
    assert "apps__add" in catalog.entries and "apps__add" not in offered
    assert {"apps__show_counter", "apps__model_only", "apps__plain"} <= offered
    assert direct.artifact == {"count": 2}
