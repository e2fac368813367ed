"""A server that lists a tool only to clients declaring the capability it needs, as the reference
"everything" server does: ``summarize`` (sampling) only when the client declares sampling.

Tools: echo(text); summarize(text): asks the client's model for a summary, or says why it got none.
Speaks the 2025-11-25 era (where clients declare their capabilities and servers send requests).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

NEEDS = {"summarize": "sampling"}  # tool -> the client capability it is listed for


class CapableServer(MCPServer):
    async def _handle_list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        declared = ctx.session.client_capabilities
        tools = await self.list_tools()
        return types.ListToolsResult(tools=[
            tool for tool in tools
            if tool.name not in NEEDS or getattr(declared, NEEDS[tool.name], None) is not None])


def build(name: str = "capable") -> MCPServer:
    server = CapableServer(name, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def summarize(text: str, ctx: Context) -> str:
        """Ask the client's model for a five-word summary of ``text`` (sampling)."""
        request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
            max_tokens=50,
        ))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            session = ctx.request_context.session
            try:
                completion = await session.send_request(request, types.CreateMessageResult)
            except MCPError as exc:
                return f"no summary: {exc.error.message}"
        return f"summary: {completion.content.text}"

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
