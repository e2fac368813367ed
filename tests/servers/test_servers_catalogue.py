"""The catalogue: complete paginated listings, list_changed in both eras, change events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp_servers import dynamic, paginated, specs
from mcp_servers._serve import http_app
from mcp_servers.loopback import serve_app

from runner.servers import CatalogueChange, ServerConnection, ServerFleet, open_fleet
from runner.servers.offerings import ChangeSignal, compare

CHANGE_WAIT = 10.0
ERAS = pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])


@asynccontextmanager
async def dynamic_fleet(
    serve_http: Callable[..., str], tmp_path: Path, *, legacy: bool = False
) -> AsyncIterator[tuple[ServerFleet, ServerConnection]]:
    url = serve_http(dynamic.build(), legacy=legacy)
    async with open_fleet({"dyn": specs.http(url)}, base_dir=tmp_path, state_dir=tmp_path / "state") as fleet:
        yield fleet, fleet.connections["dyn"]


async def next_change(changes: anyio.abc.ObjectReceiveStream[CatalogueChange]) -> CatalogueChange:
    with anyio.fail_after(CHANGE_WAIT):
        return await changes.receive()


@ERAS
async def test_every_page_of_every_list_is_collected(serve_http, tmp_path: Path, legacy: bool) -> None:
    url = serve_http(paginated.build(page_size=10), legacy=legacy)
    async with open_fleet({"pages": specs.http(url)}, base_dir=tmp_path, state_dir=tmp_path / "s") as fleet:
        pages = fleet.connections["pages"]
        assert [tool.name for tool in pages.tools] == [f"tool_{n:02d}" for n in range(paginated.TOOL_COUNT)]
        assert len(pages.prompts) == paginated.PROMPT_COUNT
        assert len(pages.resources) == paginated.RESOURCE_COUNT
        assert len(pages.resource_templates) == paginated.TEMPLATE_COUNT
        result = await pages.call_tool("tool_24", {"value": 1})
        assert result.structured_content == {"result": 25}


@ERAS
async def test_a_tool_added_at_runtime_reaches_subscribers(serve_http, tmp_path: Path, legacy: bool) -> None:
    async with dynamic_fleet(serve_http, tmp_path, legacy=legacy) as (fleet, dyn):
        async with fleet.subscribe() as changes:
            await dyn.call_tool("add_tool", {"name": "fresh"})
            change = await next_change(changes)
        assert change == CatalogueChange("dyn", "tools", added=("fresh",), removed=(), changed=())
        assert "fresh" in {tool.name for tool in dyn.tools}
        result = await dyn.call_tool("fresh", {"text": "hi"})
        assert result.content[0].text == "fresh: hi"


async def test_a_tool_added_on_a_legacy_stdio_server_reaches_subscribers(tmp_path: Path) -> None:
    servers = {"dyn": specs.stdio("dynamic", "--legacy")}
    async with open_fleet(servers, base_dir=tmp_path, state_dir=tmp_path / "state") as fleet:
        dyn = fleet.connections["dyn"]
        assert dyn.era == "2025-11-25"
        async with fleet.subscribe() as changes:
            await dyn.call_tool("add_tool", {"name": "fresh"})
            change = await next_change(changes)
        assert change.added == ("fresh",)


@ERAS
async def test_a_burst_of_changes_arrives_as_one_change(serve_http, tmp_path: Path, legacy: bool) -> None:
    burst = ["a", "b", "c", "d", "e"]
    async with dynamic_fleet(serve_http, tmp_path, legacy=legacy) as (fleet, dyn):
        async with fleet.subscribe() as changes:
            await dyn.call_tool("add_tools", {"names": burst})
            first = await next_change(changes)
            await dyn.call_tool("remove_tool", {"name": "c"})
            second = await next_change(changes)
    assert first == CatalogueChange("dyn", "tools", added=tuple(burst), removed=(), changed=())
    assert second == CatalogueChange("dyn", "tools", added=(), removed=("c",), changed=())


@ERAS
async def test_a_burst_of_announcements_is_relisted_once(serve_http, tmp_path: Path, legacy: bool) -> None:
    async with dynamic_fleet(serve_http, tmp_path, legacy=legacy) as (fleet, dyn):
        before = (await dyn.call_tool("tools_listed", {})).structured_content["result"]
        async with fleet.subscribe() as changes:
            await dyn.call_tool("announce", {"kind": "tools", "times": 20})
            await dyn.call_tool("add_tool", {"name": "marker"})
            change = await next_change(changes)
        after = (await dyn.call_tool("tools_listed", {})).structured_content["result"]
    assert change.added == ("marker",)
    assert 1 <= after - before <= 3  # 21 announcements; the marker's re-list may stand alone


async def test_announcements_right_after_the_handshake_change_nothing(serve_http, tmp_path: Path) -> None:
    url = serve_http(dynamic.build(burst_after_handshake=10), legacy=True)
    async with open_fleet({"dyn": specs.http(url)}, base_dir=tmp_path, state_dir=tmp_path / "state") as fleet:
        dyn = fleet.connections["dyn"]
        async with fleet.subscribe() as changes:
            await dyn.call_tool("add_tool", {"name": "marker"})
            first = await next_change(changes)
        listed = (await dyn.call_tool("tools_listed", {})).structured_content["result"]
    assert first == CatalogueChange("dyn", "tools", added=("marker",), removed=(), changed=())
    assert listed <= 4  # the first listing, one for the burst, one for the marker (maybe merged)


@ERAS
async def test_prompt_and_resource_changes_are_reported(serve_http, tmp_path: Path, legacy: bool) -> None:
    async with dynamic_fleet(serve_http, tmp_path, legacy=legacy) as (fleet, dyn):
        async with fleet.subscribe() as changes:
            await dyn.call_tool("add_prompt", {"name": "brief"})
            prompts = await next_change(changes)
            await dyn.call_tool("add_resource", {"name": "notes"})
            resources = await next_change(changes)
        assert prompts == CatalogueChange("dyn", "prompts", added=("brief",), removed=(), changed=())
        assert resources == CatalogueChange(
            "dyn", "resources", added=("dynamic://notes",), removed=(), changed=()
        )
        assert [prompt.name for prompt in dyn.prompts] == ["brief"]
        assert (await dyn.read_resource("dynamic://notes")).contents[0].text == "resource notes"


@ERAS
async def test_a_server_that_comes_back_different_is_relisted_and_the_difference_published(
    tmp_path: Path, legacy: bool
) -> None:
    spec = specs.http("http://unused.invalid/mcp", heartbeat={"interval": 0.1, "stale_after": 2})
    first = serve_app(http_app(dynamic.build(), transport="http", legacy=legacy))
    server = first.__enter__()
    spec = spec.model_copy(update={"url": server.url()})
    try:
        async with open_fleet({"dyn": spec}, base_dir=tmp_path, state_dir=tmp_path / "state") as fleet:
            dyn = fleet.connections["dyn"]
            async with fleet.subscribe() as changes:
                await dyn.call_tool("add_tool", {"name": "extra"})
                assert (await next_change(changes)).added == ("extra",)
                await anyio.to_thread.run_sync(first.__exit__, None, None, None)
                first = None
                # The server restarts on the same address, without the tool added at runtime.
                with serve_app(http_app(dynamic.build(), transport="http", legacy=legacy), port=server.port):
                    change = await next_change(changes)
                    assert change == CatalogueChange("dyn", "tools", added=(), removed=("extra",), changed=())
                    assert (await dyn.call_tool("static", {})).content[0].text == "static"
            if legacy:  # a 2025 session dies with its server: a new one was opened
                assert dyn.sessions == 2
    finally:
        if first is not None:
            first.__exit__(None, None, None)


async def test_every_subscriber_gets_every_change(serve_http, tmp_path: Path) -> None:
    async def added_until(changes: anyio.abc.ObjectReceiveStream[CatalogueChange], count: int) -> list[str]:
        added: list[str] = []
        while len(added) < count:  # two quick additions may arrive as one change
            added.extend((await next_change(changes)).added)
        return sorted(added)

    async with dynamic_fleet(serve_http, tmp_path) as (fleet, dyn):
        async with fleet.subscribe() as first, fleet.subscribe() as second:
            await dyn.call_tool("add_tool", {"name": "one"})
            await dyn.call_tool("add_tool", {"name": "two"})
            assert await added_until(first, 2) == ["one", "two"]
            assert await added_until(second, 2) == ["one", "two"]


async def test_refresh_finds_changes_nobody_announced(serve_http, tmp_path: Path) -> None:
    async with dynamic_fleet(serve_http, tmp_path) as (fleet, dyn):
        async with fleet.subscribe() as changes:
            await dyn.call_tool("add_tool", {"name": "quiet", "announce": False})
            assert "quiet" not in {tool.name for tool in dyn.tools}
            refreshed = await dyn.refresh()
            published = await next_change(changes)
        assert refreshed == [CatalogueChange("dyn", "tools", added=("quiet",), removed=(), changed=())]
        assert published == refreshed[0]
        assert await dyn.refresh() == []


async def test_subscriber_streams_end_when_the_fleet_closes(serve_http, tmp_path: Path) -> None:
    async with dynamic_fleet(serve_http, tmp_path) as (fleet, _):
        changes = fleet.subscribe()
    with anyio.fail_after(1):
        assert [change async for change in changes] == []


def test_a_redefined_item_counts_as_changed() -> None:
    before = {"t": types.Tool(name="t", input_schema={"type": "object"}, description="old")}
    after = {
        "t": types.Tool(name="t", input_schema={"type": "object"}, description="new"),
        "u": types.Tool(name="u", input_schema={"type": "object"}),
    }
    assert compare("s", "tools", before, after) == CatalogueChange("s", "tools", ("u",), (), ("t",))
    assert compare("s", "tools", after, after) is None


def test_a_changed_schema_deep_inside_a_tool_counts_as_changed() -> None:
    def tool(kind: str) -> types.Tool:
        return types.Tool(name="t", input_schema={"type": "object", "properties": {"x": {"type": kind}}})

    assert compare("s", "tools", {"t": tool("string")}, {"t": tool("integer")}) is not None
    assert compare("s", "tools", {"t": tool("string")}, {"t": tool("string")}) is None


async def test_the_first_announcement_after_a_calm_spell_is_relisted_at_once() -> None:
    signal = ChangeSignal(quiet=30.0, max_delay=60.0)  # a quiet period on this path would time out
    signal.mark("tools")
    with anyio.fail_after(5):
        assert await signal.next_batch() == {"tools"}


async def test_a_signal_is_settled_until_an_announcement_and_again_once_its_relist_is_done() -> None:
    signal = ChangeSignal(quiet=30.0, max_delay=60.0)
    assert signal.is_settled
    signal.mark("tools")
    assert not signal.is_settled
    with anyio.fail_after(5):
        await signal.next_batch()
    assert not signal.is_settled  # handed out, not yet re-listed
    signal.done()
    assert signal.is_settled


async def test_announcements_during_and_right_after_a_relist_are_handed_out_as_one_batch() -> None:
    signal = ChangeSignal(quiet=0.2, max_delay=5.0)
    signal.mark("tools")
    with anyio.fail_after(5):
        assert await signal.next_batch() == {"tools"}
        signal.mark("tools")  # the re-list of the first is running: the burst goes on
        signal.mark("prompts")
        signal.done()
        signal.mark("resources")  # right after it ended: still the same burst
        started = anyio.current_time()
        assert await signal.next_batch() == {"tools", "prompts", "resources"}
        assert anyio.current_time() - started >= 0.2  # it waited for the burst to go quiet
        signal.done()
        await signal.settled()  # nothing left: one re-list for the rest of the burst
