"""The demo server as a 2026-07-28-only server: the ``initialize`` handshake makes it exit (code 3).

Over stdio only. A client that starts it in the handshake era sees a failed start; one that probes
with ``server/discover`` gets the demo server.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from mcp_servers import demo


class RefusingInitialize(io.TextIOBase):
    """stdin, line by line; an ``initialize`` request ends the process."""

    def __init__(self, raw: io.TextIOBase) -> None:
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readline(self, size: int = -1) -> str:
        line = self._raw.readline(size)
        try:
            method = json.loads(line).get("method") if line.strip() else None
        except ValueError:
            method = None
        if method == "initialize":
            print("initialize refused: this server speaks 2026-07-28 only", file=sys.stderr, flush=True)
            os._exit(3)
        return line

    def __iter__(self) -> RefusingInitialize:
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


def build(name: str = "modern") -> MCPServer:
    return demo.build(name)


async def serve() -> None:
    server = build()
    lowlevel = server._lowlevel_server
    stdin = io.TextIOWrapper(os.fdopen(os.dup(0), "rb"), encoding="utf-8")
    stdout = io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), encoding="utf-8", write_through=True)
    streams = stdio_server(stdin=anyio.wrap_file(RefusingInitialize(stdin)), stdout=anyio.wrap_file(stdout))
    async with streams as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
