"""A server that tells which process it runs in: each agent instance starts its own copy, so a
tool result names the instance that served a turn.

Tools: pid (this server's process id), wait (reports "waiting in PID" as progress, then never
answers: a turn in flight to kill an instance under).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import Context, MCPServer


def build(name: str = "instance") -> MCPServer:
    server = MCPServer(name, instructions="Tells which process it runs in.")

    @server.tool()
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    @server.tool()
    async def wait(ctx: Context) -> str:
        """Report "waiting in PID" as progress, then never answer."""
        await ctx.report_progress(0, None, f"waiting in {os.getpid()}")
        await anyio.sleep_forever()
        return "unreachable"

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
