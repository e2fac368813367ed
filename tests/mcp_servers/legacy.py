"""The demo server as today's FastMCP / TypeScript servers are: 2025-11-25 handshake era only.

Over stdio it refuses the 2026-07-28 ``server/discover`` probe; over HTTP it answers 2026 requests
with 400, so an ``auto`` client falls back to ``initialize``. Same tools as ``demo``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import MCPServer

from mcp_servers import demo


def build(name: str = "legacy") -> MCPServer:
    return demo.build(name)


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build, [*sys.argv[1:], "--legacy"])
