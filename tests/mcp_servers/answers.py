"""A server whose tools answer what their names say, right or wrong: for comparing ``tools/call``
as mcp-run makes it with the SDK's ``Client.call_tool``.

Tools: ``text(text)`` (a text block), ``scored(score, omit=False)`` (output schema: an integer
``score``; it answers ``{"score": score}`` whatever ``score`` is, or no structured content with
``omit``), ``failing`` (an ``isError`` result), ``refused(message)`` (a JSON-RPC error answer),
``progress(steps)`` (reports each step, then says whether the request carried a progress token),
``slow(seconds)``, ``tagged(region)`` (2026: ``region`` is mirrored into the ``Mcp-Param-Region``
header). ``unlisted(text)`` answers but is not listed until ``tools/list`` has been asked twice (the
SDK lists to find a result's output schema).

    python tests/mcp_servers/answers.py [--legacy]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

SCORED = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
ANY_OBJECT = {"type": "object"}


def _tool(name: str, input_schema: dict[str, Any] | None = None, **more: Any) -> types.Tool:
    return types.Tool(name=name, description=f"{name}, as its name says",
                      input_schema=input_schema or ANY_OBJECT, **more)


TOOLS = [
    _tool("text"), _tool("scored", output_schema=SCORED), _tool("failing"), _tool("refused"),
    _tool("progress"), _tool("slow"),
    _tool("tagged", {"type": "object",
                     "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
]
UNLISTED = _tool("unlisted", output_schema=SCORED)


def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=text)]


class Answers(MCPServer):
    def __init__(self) -> None:
        super().__init__("answers", log_level="WARNING")
        self.listings = 0

    async def list_tools(self) -> list[types.Tool]:
        self.listings += 1
        return [*TOOLS, UNLISTED] if self.listings > 1 else list(TOOLS)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        if name in ("text", "tagged"):
            return types.CallToolResult(content=_text(str(arguments)))
        if name in ("scored", "unlisted"):
            if arguments.get("omit"):
                return types.CallToolResult(content=_text("no score"))
            score = arguments.get("score")
            return types.CallToolResult(content=_text(f"score {score}"), structured_content={"score": score})
        if name == "failing":
            return types.CallToolResult(content=_text("it failed"), is_error=True)
        if name == "refused":
            raise MCPError(code=types.INVALID_PARAMS, message=arguments.get("message", "refused, as asked"))
        if name == "progress":
            assert context is not None
            for step in range(arguments["steps"]):
                await context.report_progress(step + 1, arguments["steps"], f"step {step + 1}")
            meta = context.request_context.meta
            token = "with" if meta is not None and meta.get("progress_token") is not None else "without"
            return types.CallToolResult(content=_text(f"done, {token} a progress token"))
        if name == "slow":
            await anyio.sleep(arguments["seconds"])
            return types.CallToolResult(content=_text("slept"))
        return await super().call_tool(name, arguments, context)

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        return next((tool.input_schema for tool in [*TOOLS, UNLISTED] if tool.name == name), None)


def build() -> MCPServer:
    return Answers()


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
