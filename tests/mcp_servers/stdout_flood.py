"""A demo server that floods its stdout with junk lines, without pause, from its start to its end.

The junk is written in whole lines between the server's own messages (a lock keeps them apart), so
every message arrives intact behind however much junk the pipe holds.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_servers import demo
from mcp_servers._serve import main, serve_stdio

JUNK = b"".join(b"flood line %d: this is not JSON-RPC\n" % n for n in range(100))


class LineLockedWire(io.TextIOBase):
    """The server's stdout: whole lines only, each write under ``lock``."""

    def __init__(self, raw: io.RawIOBase, lock: threading.Lock) -> None:
        self._raw = raw
        self._lock = lock
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._partial += text
        complete, newline, self._partial = self._partial.rpartition("\n")
        if newline:
            with self._lock:
                self._raw.write((complete + newline).encode("utf-8"))
        return len(text)


def flood(raw: io.RawIOBase, lock: threading.Lock) -> None:
    while True:
        with lock:
            raw.write(JUNK)


async def serve(server: MCPServer, legacy: bool) -> None:
    raw = os.fdopen(os.dup(1), "wb", buffering=0)  # a private duplicate of fd 1, as stdio_server() makes
    lock = threading.Lock()
    threading.Thread(target=flood, args=(raw, lock), daemon=True).start()
    await serve_stdio(server, legacy=legacy, stdout=anyio.wrap_file(LineLockedWire(raw, lock)))


if __name__ == "__main__":
    main(lambda: demo.build("stdout_flood"), stdio=serve)
