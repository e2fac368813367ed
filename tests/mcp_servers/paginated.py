"""A server that lists everything in pages (``--page-size``, default 10).

It offers 25 tools (``tool_00`` ... ``tool_24``), 12 prompts, 23 resources and 3 resource
templates, so every list needs more than one page. Cursors are opaque offsets.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.mcpserver.resources import TextResource
from mcp.shared.exceptions import MCPError

TOOL_COUNT = 25
PROMPT_COUNT = 12
RESOURCE_COUNT = 23
TEMPLATE_COUNT = 3
DEFAULT_PAGE_SIZE = 10

_T = TypeVar("_T")


def _page(items: Sequence[_T], cursor: str | None, size: int) -> tuple[list[_T], str | None]:
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor!r}") from None
    end = start + size
    return list(items[start:end]), (str(end) if end < len(items) else None)


def _numbered_tool(number: int):
    def tool(value: int = 0) -> int:
        return value + number

    tool.__name__ = f"tool_{number:02d}"
    tool.__doc__ = f"Adds {number}."
    return tool


def _template_reader(number: int):
    def read(key: str) -> str:
        return f"{number}:{key}"

    return read


def build(name: str = "paginated", page_size: int = DEFAULT_PAGE_SIZE) -> MCPServer:
    server = MCPServer(name, log_level="WARNING")
    for number in range(TOOL_COUNT):
        server.add_tool(_numbered_tool(number))
    for number in range(PROMPT_COUNT):
        text = f"prompt {number}"
        server.add_prompt(Prompt.from_function(lambda text=text: text, name=f"prompt_{number:02d}"))
    for number in range(RESOURCE_COUNT):
        uri = f"page://r/{number:02d}"
        server.add_resource(TextResource(uri=uri, name=f"r{number:02d}", text=str(number)))
    for number in range(TEMPLATE_COUNT):
        server.resource(f"page://t{number}/{{key}}")(_template_reader(number))

    lowlevel = server._lowlevel_server

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams) -> types.ListToolsResult:
        tools, cursor = _page(await server.list_tools(), params.cursor, page_size)
        return types.ListToolsResult(tools=tools, next_cursor=cursor)

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams) -> types.ListPromptsResult:
        prompts, cursor = _page(await server.list_prompts(), params.cursor, page_size)
        return types.ListPromptsResult(prompts=prompts, next_cursor=cursor)

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams) -> types.ListResourcesResult:
        resources, cursor = _page(await server.list_resources(), params.cursor, page_size)
        return types.ListResourcesResult(resources=resources, next_cursor=cursor)

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams
    ) -> types.ListResourceTemplatesResult:
        templates, cursor = _page(await server.list_resource_templates(), params.cursor, 2)
        return types.ListResourceTemplatesResult(resource_templates=templates, next_cursor=cursor)

    lowlevel.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    lowlevel.add_request_handler("prompts/list", types.PaginatedRequestParams, list_prompts)
    lowlevel.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    lowlevel.add_request_handler("resources/templates/list", types.PaginatedRequestParams, list_templates)
    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
