"""Re-lists at the cost of what changed: the same tools and session state as the SDK's own listing,
validating only new and changed definitions, with the SDK's errors and the filter's warnings."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp_servers import command, dynamic, specs
from pydantic import Field, ValidationError

from runner.servers import CatalogueChange, open_fleet
from runner.servers import listings as listing_module
from runner.servers.listings import ToolPages
from runner.servers.offerings import fetch_catalogue

WAIT = 20.0


def definition(name: str, description: str = "a tool", **changes: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    return {"name": name, "description": description, "inputSchema": schema, **changes}


SCORED = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
OBJECT = {"type": "object"}
FIRST = [definition("a"), definition("b"), definition("c", outputSchema=SCORED)]


@asynccontextmanager
async def clients(count: int, *args: str) -> AsyncIterator[list[Client]]:
    """``count`` plain SDK clients, each on its own relisting server (a 2025-11-25 stdio server)."""
    program, argv = command("relisting", *args)
    async with AsyncExitStack() as stack:
        opened = []
        for _ in range(count):
            client = Client(StdioServerParameters(command=program, args=[*argv]), cache=None)
            opened.append(await stack.enter_async_context(client))
        yield opened


async def set_tools(client: Client, tools: list[Any], extra: dict[str, Any] | None = None) -> None:
    with anyio.fail_after(WAIT):
        await client.call_tool("set_tools", {"tools": tools, "extra": extra or {}})


async def listed(client: Client) -> list[types.Tool]:
    with anyio.fail_after(WAIT):
        return (await fetch_catalogue("s", client, ("tools",))).tools


async def sdk_listed(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    with anyio.fail_after(WAIT):
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            if (cursor := page.next_cursor) is None:
                return tools


def session_state(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a listing leaves in the session for later calls: output schemas, header maps."""
    session = client.session
    return dict(session._tool_output_schemas), dict(session._x_mcp_header_maps)


def count_validated(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The names of the definitions each listing validates."""
    validated: list[list[str]] = []
    real = listing_module._validated

    def recording(raw: dict[str, Any], version: str) -> types.ListToolsResult:
        validated.append([tool.get("name") for tool in raw.get("tools", [])])
        return real(raw, version)

    monkeypatch.setattr(listing_module, "_validated", recording)
    return validated


@pytest.mark.parametrize("page_size", ["0", "2"], ids=["one page", "pages of 2"])
async def test_relists_give_the_tools_and_session_state_the_sdk_listing_gives(page_size: str) -> None:
    listings = [
        FIRST,
        [definition("a"), definition("b", "described anew"), definition("c", outputSchema=SCORED)],
        [definition("a"), definition("b", "described anew"), definition("c", outputSchema=OBJECT)],
        [definition("a"), definition("c", outputSchema=OBJECT)],  # b removed
        [definition("a"), definition("c", outputSchema=OBJECT), definition("d"), definition("e")],
        [definition("a"), definition("c", outputSchema=OBJECT), definition("d"), definition("e")],
        [definition("a", outputSchema=SCORED), definition("c"), definition("a", outputSchema=OBJECT)],
        [definition("a", outputSchema=SCORED), definition("c"), definition("a", outputSchema=OBJECT)],
    ]
    async with clients(2, "--page-size", page_size) as (ours, theirs):
        for tools in listings:
            await set_tools(ours, tools)
            await set_tools(theirs, tools)
            assert await listed(ours) == await sdk_listed(theirs)
            assert session_state(ours) == session_state(theirs)


async def test_a_relist_validates_only_new_and_changed_definitions_and_keeps_the_other_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with clients(1) as (client,):
        await set_tools(client, FIRST)
        before = await listed(client)
        validated = count_validated(monkeypatch)
        again = await listed(client)
        assert validated == [[]]
        assert all(old is new for old, new in zip(before, again, strict=True))
        await set_tools(client, [definition("a"), definition("b", "changed"), *FIRST[2:], definition("new")])
        changed = await listed(client)
        assert validated[1] == ["b", "new"]
        assert changed[0] is before[0] and changed[2] is before[2]
        assert changed[1].description == "changed" and changed[3].name == "new"


async def test_a_definition_the_sdk_listed_meanwhile_is_taken_again_by_the_next_relist() -> None:
    changed = [*FIRST[:2], definition("c", outputSchema=OBJECT)]
    async with clients(1) as (client,):
        await set_tools(client, FIRST)
        await listed(client)
        await set_tools(client, changed)
        await sdk_listed(client)  # as call_tool does for a tool it does not know
        await set_tools(client, FIRST)
        tools = await listed(client)
        assert tools[2].output_schema == SCORED
        assert session_state(client)[0]["c"] == SCORED


async def test_a_page_that_fails_as_a_whole_raises_the_error_the_sdk_raises() -> None:
    async with clients(1) as (client,):
        await set_tools(client, FIRST)
        await listed(client)
        await set_tools(client, [*FIRST, {"name": "no_schema"}], extra={"nextCursor": 5})
        with anyio.fail_after(WAIT), pytest.raises(ValidationError) as ours:
            await ToolPages.of(client.session).fetch()
        with anyio.fail_after(WAIT), pytest.raises(ValidationError) as theirs:
            await client.list_tools()
        assert str(ours.value) == str(theirs.value)
        assert "tools.3" in str(ours.value)  # counted in the whole answer, not among the new ones


async def test_a_definition_that_turns_invalid_is_dropped_with_a_warning_and_the_rest_relisted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers = {"r": specs.stdio("relisting")}
    async with open_fleet(servers, base_dir=tmp_path, state_dir=tmp_path / "state") as fleet:
        connection = fleet.connections["r"]
        await connection.call_tool("set_tools", {"tools": FIRST})
        await connection.refresh(("tools",))
        broken = [FIRST[0], definition("b", inputSchema="text"), FIRST[2]]
        await connection.call_tool("set_tools", {"tools": broken})
        with caplog.at_level(logging.WARNING, logger="runner.servers.listings"):
            changes = await connection.refresh(("tools",))
        assert changes == [CatalogueChange("r", "tools", added=(), removed=("b",), changed=())]
        assert [tool.name for tool in connection.tools] == ["a", "c", "set_tools"]
        assert [r.getMessage() for r in caplog.records if "'b' skipped" in r.getMessage()]
        result = await connection.call_tool("set_tools", {"tools": FIRST})  # c's output schema is kept
        assert not result.is_error


async def test_a_2026_relist_gives_the_tools_and_session_state_the_sdk_listing_gives(serve_http) -> None:
    server = dynamic.build()
    url = serve_http(server)
    async with Client(url, cache=None) as ours, Client(url, cache=None) as theirs:
        assert ours.protocol_version == "2026-07-28"
        with anyio.fail_after(WAIT):
            for step in ({"name": "one"}, {"name": "two"}):
                await listed(ours)
                await ours.call_tool("add_tool", step)
                assert await listed(ours) == await sdk_listed(theirs)
                assert session_state(ours) == session_state(theirs)
                assert session_state(ours)[1]  # 2026 sessions hold header maps
            await ours.call_tool("remove_tool", {"name": "one"})
            assert await listed(ours) == await sdk_listed(theirs)
            assert session_state(ours) == session_state(theirs)


def header_tool(header: str) -> Any:
    """A tool whose argument ``q`` is mirrored into the header ``header`` (2026 ``x-mcp-header``)."""

    def tagged(q: str) -> str:
        return q

    mirrored = Field(json_schema_extra={"x-mcp-header": header})
    tagged.__annotations__ = {"q": Annotated[str, mirrored], "return": str}
    return tagged


async def test_a_header_map_the_sdk_replaced_meanwhile_is_taken_again_by_the_next_relist(serve_http) -> None:
    server = MCPServer("headers")
    server.add_tool(header_tool("Region"), name="tagged", structured_output=False)
    url = serve_http(server)
    async with Client(url, cache=None) as client:
        with anyio.fail_after(WAIT):
            await listed(client)
            server.remove_tool("tagged")
            server.add_tool(header_tool("Zone"), name="tagged", structured_output=False)
            await sdk_listed(client)
            server.remove_tool("tagged")
            server.add_tool(header_tool("Region"), name="tagged", structured_output=False)
            await listed(client)
        assert session_state(client)[1] == {"tagged": {("q",): "Region"}}
