"""A server whose tools' input schemas are traps for the client, beside one plain tool.

    schema_traps.py [--depth N]

Tools: outside (its schema's ``$ref`` points to another document), deep (its schema nests an
object ``--depth`` levels deep, 120 by default: past the 200 levels of pydantic's JSON parser, within
Python's), fine (a plain tool). The transport must read the deep listing and the catalog skip the
tools it cannot offer, keeping the others.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `mcp_servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import MCPServer

from mcp_servers import _serve

OUTSIDE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"where": {"$ref": "https://example.invalid/schemas/place.json"}},
}


def nested_schema(depth: int) -> dict[str, Any]:
    """An object schema whose property ``a`` is an object whose ``a`` is …, ``depth`` levels down."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def build(depth: int = 120) -> MCPServer:
    server = MCPServer("schema_traps")

    @server.tool()
    def outside() -> str:
        """A tool whose schema refers to another document."""
        return "outside"

    @server.tool()
    def deep() -> str:
        """A tool whose schema nests deep."""
        return "deep"

    @server.tool()
    def fine(text: str = "ok") -> str:
        """A tool with a plain schema."""
        return f"fine: {text}"

    # The decorator derives each schema from the signature: put the traps in their place.
    server._tool_manager._tools["outside"].parameters = OUTSIDE_SCHEMA
    server._tool_manager._tools["deep"].parameters = nested_schema(depth)
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--depth", type=int, default=120)
    options, rest = parser.parse_known_args()
    _serve.main(lambda: build(options.depth), rest)
