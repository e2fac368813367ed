"""A server written for 2025-11-25 only: its tool asks with ``ctx.elicit``, a server-to-client request.

On a 2026-07-28 session there is no channel for that request and the call fails with the SDK's
"no back-channel for server-initiated requests"; pinned to ``protocol: 2025-11-25`` it works.
Tool: ``confirm`` (asks yes or no, says what it heard).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel


class Confirmation(BaseModel):
    ok: bool


def build(name: str = "elicits") -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    async def confirm(ctx: Context) -> str:
        """Ask the user to confirm."""
        answer = await ctx.elicit("Go ahead?", Confirmation)
        return f"{answer.action} {answer.data.ok if answer.action == 'accept' else ''}".strip()

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build, sys.argv[1:])
