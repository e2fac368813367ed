"""The general-purpose demo server: tools, prompts and resources covering what the runner handles.

Tools: echo, add, sleep, hang (never returns; counts cancellations), cancellations_seen and
requests_seen (wait until the server has seen N cancelled calls / requests of a method), fail (an
isError result), big_output, image, progress, log, pid, env, cwd, stderr.
"""

from __future__ import annotations

import base64
import os
import sys
import warnings
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning

INSTRUCTIONS = "Demo server for the mcp-run tests."
# A 1x1 transparent PNG.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


class Counters:
    """Named counters (cancelled calls, requests by method); waiters wake when a count moves."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._changed = anyio.Event()

    def record(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, name: str, count: int) -> int:
        while self.counts.get(name, 0) < count:
            await self._changed.wait()
        return self.counts.get(name, 0)


def build(name: str = "demo") -> MCPServer:
    server = MCPServer(name, instructions=INSTRUCTIONS, version="1.0.0", log_level="WARNING")
    counters = Counters()

    async def count_requests(ctx: Any, call_next: Any) -> Any:
        counters.record(ctx.method)
        return await call_next(ctx)

    server.middleware.append(count_requests)

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    async def hang(ctx: Context) -> str:
        """Never answer (after one progress notification, "hanging"); a cancelled call is counted."""
        await ctx.report_progress(0, None, "hanging")
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            counters.record("cancelled")
            raise
        return "unreachable"

    @server.tool()
    async def cancellations_seen(at_least: int = 0) -> int:
        """How many calls were cancelled; waits until there are at least ``at_least``."""
        return await counters.wait_for("cancelled", at_least)

    @server.tool()
    async def requests_seen(method: str, at_least: int = 0) -> int:
        """How many ``method`` requests arrived; waits until there are at least ``at_least``."""
        return await counters.wait_for(method, at_least)

    @server.tool()
    def fail(message: str = "it failed") -> str:
        """Always fails with a domain error (an isError result)."""
        raise ToolError(message)

    @server.tool()
    def big_output(chars: int) -> str:
        """Return ``chars`` characters of text."""
        return ("0123456789" * (chars // 10 + 1))[:chars]

    @server.tool()
    def image() -> Image:
        """A tiny PNG image."""
        return Image(data=PIXEL_PNG, format="png")

    @server.tool()
    async def progress(steps: int, ctx: Context) -> str:
        """Report ``steps`` progress notifications, then answer."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return f"done {steps}"

    @server.tool()
    async def log(message: str, ctx: Context) -> str:
        """Send ``message`` as a log notification (level warning)."""
        with warnings.catch_warnings():  # deprecated at 2026-07-28, still what servers do
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.warning(message)
        return "logged"

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def env(name: str) -> dict[str, str | bool | None]:
        """Whether the variable ``name`` is set for the server, and its value."""
        return {"name": name, "set": name in os.environ, "value": os.environ.get(name)}

    @server.tool()
    def cwd() -> str:
        """The server's working directory."""
        return os.getcwd()

    @server.tool()
    def stderr(text: str) -> str:
        """Write a line to the server's stderr."""
        print(text, file=sys.stderr, flush=True)
        return "written"

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello, {name}!"

    @server.prompt()
    def review(code: str, language: str = "python") -> str:
        """Ask for a code review."""
        return f"Review this {language} code:\n{code}"

    @server.resource("demo://readme", mime_type="text/plain")
    def readme() -> str:
        """The demo readme."""
        return "This is the demo server."

    @server.resource("demo://items/{item_id}", mime_type="text/plain")
    def item(item_id: str) -> str:
        """One item by id."""
        return f"item {item_id}"

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
