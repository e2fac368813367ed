"""A demo server that pollutes stdout: a banner before serving, and junk on demand.

``junk(text, newline)`` makes the next message the server writes start with ``text`` - on a line
of its own (``newline=True``) or glued to the front of the JSON (``newline=False``), the case that
corrupts the next response for a naive client.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_servers import demo
from mcp_servers._serve import main, serve_stdio

BANNER = "Junk server v1 starting... (this line is not JSON-RPC)\n"


class JunkInjector(io.TextIOBase):
    """The server's stdout: writes pass through, prefixed once by any pending junk."""

    def __init__(self, raw: io.TextIOBase) -> None:
        self._raw = raw
        self.pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text, self.pending = self.pending + text, ""
        return self._raw.write(text)

    def flush(self) -> None:
        self._raw.flush()


def build(injector: JunkInjector | None = None) -> MCPServer:
    server = demo.build("junk")

    @server.tool()
    def junk(text: str = "garbage", newline: bool = True) -> str:
        """Put ``text`` in front of the next message on stdout."""
        if injector is not None:
            injector.pending += text + ("\n" if newline else "")
        return "junk queued"

    return server


async def serve(_: MCPServer, legacy: bool) -> None:
    # The wire is a private duplicate of fd 1, as stdio_server() itself would make.
    wire = io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), encoding="utf-8", write_through=True)
    wire.write(BANNER)
    injector = JunkInjector(wire)
    await serve_stdio(build(injector), legacy=legacy, stdout=anyio.wrap_file(injector))


if __name__ == "__main__":
    main(build, stdio=serve)
