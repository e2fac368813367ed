"""A server that probes what its surroundings allow: files, network, environment, and its own death.

Tools: read_file, write_file, connect (a TCP connection to host:port), env, crash (exits at once),
hang (never returns). Used to check that containers and sandboxes hold a server in.

``--linger``: stay alive after stdin closes, as a server with background work does (a container of
such a server outlives a killed client).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

CONNECT_TIMEOUT = 2.0


def build(name: str = "probe") -> MCPServer:
    server = MCPServer(name, instructions="Probes its own isolation.")

    @server.tool()
    def read_file(path: str) -> str:
        """The text of a file, or the error reading it."""
        try:
            return Path(path).read_text()
        except OSError as exc:
            raise ToolError(f"cannot read: {exc.strerror}") from exc

    @server.tool()
    def write_file(path: str, text: str) -> str:
        """Write a file; says 'written' or why not."""
        try:
            Path(path).write_text(text)
        except OSError as exc:
            raise ToolError(f"cannot write: {exc.strerror}") from exc
        return "written"

    @server.tool()
    def connect(host: str, port: int) -> str:
        """Open a TCP connection; says 'connected' or why not."""
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
                return "connected"
        except OSError as exc:
            raise ToolError(f"cannot connect: {exc}") from exc

    @server.tool()
    def env(name: str) -> str:
        """A variable's value, or '<unset>'."""
        return os.environ.get(name, "<unset>")

    @server.tool()
    def crash() -> str:
        """Exit the process at once with code 3."""
        os._exit(3)

    @server.tool()
    async def hang() -> str:
        """Never return."""
        await anyio.sleep_forever()
        return "unreachable"

    return server


if __name__ == "__main__":
    import signal

    from mcp_servers._serve import main

    linger = "--linger" in sys.argv
    if linger:
        sys.argv.remove("--linger")
    main(build)
    while linger:
        signal.pause()
