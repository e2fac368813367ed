"""A server that says which MCP extensions the client announced in its capabilities.

Tools: extensions(): the client's ``capabilities.extensions`` as JSON (``{}`` when it announced
none), read on each call (both protocol eras carry the client's capabilities).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `mcp_servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import Context, MCPServer


def build(name: str = "announced") -> MCPServer:
    server = MCPServer(name, log_level="WARNING")

    @server.tool()
    def extensions(ctx: Context) -> str:
        """The MCP extensions this client announced, as JSON."""
        declared = ctx.client_capabilities
        return json.dumps((declared.extensions if declared is not None else None) or {}, sort_keys=True)

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
