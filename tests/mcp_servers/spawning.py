"""A server whose tool starts a child process that ignores SIGTERM and waits for it.

``run_stubborn_child(seconds)`` starts ``sleep``-like child that ignores SIGTERM, writes the child's
pid to the FIFO named by ``SPAWNING_STARTED_FIFO`` (when set, so a test knows the call has begun),
and waits for the child in a worker thread that cancellation cannot interrupt: like a server
running a shell command, it neither answers nor exits when stdin closes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import MCPServer

STUBBORN_CHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep({seconds})"


def build(name: str = "spawning") -> MCPServer:
    server = MCPServer(name, version="1.0.0", log_level="WARNING")

    @server.tool()
    async def run_stubborn_child(seconds: float = 60) -> str:
        """Run a child process that ignores SIGTERM for ``seconds`` and wait for it."""
        # A plain child, as a tool's own code would start one: what the runner must reap.
        child = subprocess.Popen(  # noqa: ASYNC220 - waited for in a thread below
            [sys.executable, "-c", STUBBORN_CHILD.format(seconds=seconds)]
        )
        fifo = os.environ.get("SPAWNING_STARTED_FIFO")
        if fifo:
            with open(fifo, "w") as started:  # noqa: ASYNC230 - the test is reading it: no wait
                started.write(f"{child.pid}\n")
        await anyio.to_thread.run_sync(child.wait, abandon_on_cancel=False)
        return f"child {child.pid} exited"

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build, sys.argv[1:])
