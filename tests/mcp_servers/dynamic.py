"""A server whose tools, prompts and resources change at runtime, announced by list_changed.

Announcements go out the way each era expects: ``notifications/*/list_changed`` on 2025-11-25
connections, events on ``subscriptions/listen`` streams on 2026-07-28 ones. The server keeps
advertising ``listChanged: false`` - clients must not trust that flag.

Tools: add_tool(name, announce=True), remove_tool(name), add_prompt(name), add_resource(name),
announce(kind, times) (list_changed without any change: a burst), add_tools(names) (one change and
one announcement each), tools_listed() (how many tools/list requests the server has answered).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.mcpserver.resources import TextResource
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

Kind = Literal["tools", "prompts", "resources"]


# How each era announces a change: 2026 publishes to listen streams, 2025 sends a notification.
MODERN_ANNOUNCERS = {
    "tools": "notify_tools_changed",
    "prompts": "notify_prompts_changed",
    "resources": "notify_resources_changed",
}
LEGACY_ANNOUNCERS = {
    "tools": "send_tool_list_changed",
    "prompts": "send_prompt_list_changed",
    "resources": "send_resource_list_changed",
}


async def announce_change(ctx: Context, kind: Kind) -> None:
    """Tell the client that the ``kind`` list changed, in the connection's era."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await getattr(ctx, MODERN_ANNOUNCERS[kind])()
    else:
        await getattr(ctx.session, LEGACY_ANNOUNCERS[kind])()


def _make_tool(name: str):
    def added_tool(text: str = "") -> str:
        return f"{name}: {text}"

    added_tool.__name__ = name
    added_tool.__doc__ = f"Added at runtime as {name}."
    return added_tool


def build(name: str = "dynamic", *, burst_after_handshake: int = 0) -> MCPServer:
    """``burst_after_handshake``: tools/list_changed notifications sent right after a 2025 handshake."""
    server = MCPServer(name, instructions="Tools appear and disappear at runtime.", log_level="WARNING")

    @server.tool()
    def static() -> str:
        """Always here."""
        return "static"

    @server.tool()
    async def add_tool(name: str, ctx: Context, announce: bool = True) -> str:
        """Add a tool called ``name``; announce it unless ``announce`` is false."""
        server.add_tool(_make_tool(name), name=name)
        if announce:
            await announce_change(ctx, "tools")
        return f"added {name}"

    @server.tool()
    async def add_tools(names: list[str], ctx: Context) -> str:
        """Add several tools, announcing each one separately (a burst)."""
        for tool_name in names:
            server.add_tool(_make_tool(tool_name), name=tool_name)
            await announce_change(ctx, "tools")
        return f"added {len(names)}"

    @server.tool()
    async def remove_tool(name: str, ctx: Context) -> str:
        """Remove tool ``name`` and announce it."""
        server.remove_tool(name)
        await announce_change(ctx, "tools")
        return f"removed {name}"

    @server.tool()
    async def add_prompt(name: str, ctx: Context) -> str:
        """Add a prompt called ``name`` and announce it."""

        def prompt_fn() -> str:
            return f"prompt {name}"

        server.add_prompt(Prompt.from_function(prompt_fn, name=name, description=f"Added as {name}."))
        await announce_change(ctx, "prompts")
        return f"added {name}"

    @server.tool()
    async def add_resource(name: str, ctx: Context) -> str:
        """Add a text resource ``dynamic://<name>`` and announce it."""
        server.add_resource(TextResource(uri=f"dynamic://{name}", name=name, text=f"resource {name}"))
        await announce_change(ctx, "resources")
        return f"added dynamic://{name}"

    @server.tool()
    async def announce(kind: Kind, times: int, ctx: Context) -> str:
        """Send ``times`` list_changed announcements for ``kind`` without changing anything."""
        for _ in range(times):
            await announce_change(ctx, kind)
        return f"announced {times}"

    listed = 0
    lowlevel = server._lowlevel_server

    async def burst(ctx: Any, params: Any) -> None:
        for _ in range(burst_after_handshake):
            await ctx.session.send_tool_list_changed()

    lowlevel.add_notification_handler("notifications/initialized", types.NotificationParams, burst)
    list_tools = lowlevel.get_request_handler("tools/list")
    assert list_tools is not None

    async def counting_list_tools(ctx: Any, params: Any) -> Any:
        nonlocal listed
        listed += 1
        return await list_tools.handler(ctx, params)

    lowlevel.add_request_handler("tools/list", list_tools.params_type, counting_list_tools)

    @server.tool()
    def tools_listed() -> int:
        """How many tools/list requests this server has answered."""
        return listed

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
