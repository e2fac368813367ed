"""A server whose tool schemas list properties as required and give them defaults, as Playwright's do.

``browser_take_screenshot`` carries the input schema of Playwright MCP's tool of that name (written
by zod-to-json-schema): ``type`` and ``scale`` are required and have defaults, unknown properties are
forbidden by the schema. The server itself behaves as zod does: a missing property takes its
default and an unknown one is dropped. The result names the settings the screenshot was taken with.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import MCPServer

SCREENSHOT_SCHEMA = {
    "type": "object",
    "properties": {
        "type": {
            "type": "string",
            "enum": ["png", "jpeg"],
            "default": "png",
            "description": "Image format for the screenshot. Default is png.",
        },
        "scale": {
            "type": "string",
            "enum": ["css", "device"],
            "default": "css",
            "description": "Image scale: css pixels (the default) or device pixels.",
        },
        "filename": {"type": "string", "description": "File name to save the screenshot to."},
        "element": {"type": "string", "description": "Human-readable element description."},
        "ref": {"type": "string", "description": "Exact target element reference from the page snapshot."},
        "fullPage": {"type": "boolean", "description": "Take a screenshot of the full scrollable page."},
    },
    "required": ["type", "scale"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}


def build(name: str = "screenshots") -> MCPServer:
    server = MCPServer(name, version="1.0.0", log_level="WARNING")

    @server.tool()
    def browser_take_screenshot(
        type: Literal["png", "jpeg"] = "png",
        scale: Literal["css", "device"] = "css",
        filename: str | None = None,
        element: str | None = None,
        ref: str | None = None,
        fullPage: bool | None = None,
    ) -> str:
        """Take a screenshot of the current page."""
        return f"screenshot type={type} scale={scale} fullPage={fullPage}"

    server._tool_manager.get_tool("browser_take_screenshot").parameters = SCREENSHOT_SCHEMA
    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build, sys.argv[1:])
