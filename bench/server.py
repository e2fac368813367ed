"""The benchmark MCP server: small tools to time, a dynamic tool list, and N dummy tools.

Tools: ``echo(text)``, ``add(a, b)``, ``sleep(seconds)``, ``big_payload(size)`` (``size``
characters of text), ``add_tool(name)`` (registers tool ``name`` and announces list_changed in the
connection's era), and ``dummy_0000`` ... (``--extra-tools N``; listed from prebuilt definitions,
because registering 1,000 functions through ``MCPServer.add_tool`` takes seconds and would
dominate every cold start).

    python bench/server.py                                  # stdio
    python bench/server.py --transport http                 # streamable HTTP on a free 127.0.0.1 port
    python bench/server.py --transport http --mounts 20     # 20 servers: /s00/mcp ... /s19/mcp
    python bench/server.py --extra-tools 995                # 1,000 tools in all

Runs on mcp 2.x only; the langchain-mcp-adapters environment (mcp 1.x) starts it with the main
environment's interpreter, since servers are separate processes.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def dummy_schema(index: int) -> dict[str, Any]:
    """A different input schema for every dummy tool (so no cache keyed by schema flatters a build):
    descriptions carry the index, and the property set varies with it."""
    properties: dict[str, Any] = {
        "query": {"type": "string", "description": f"What tool {index} looks for."},
        "limit": {"type": "integer", "default": 10, "minimum": 1, "maximum": 100 + index},
        "verbose": {"type": "boolean", "default": False},
    }
    if index % 3 == 0:
        properties["mode"] = {"type": "string", "enum": ["fast", "thorough", f"custom{index}"]}
    if index % 5 == 0:
        properties["filters"] = {
            "type": "object",
            "properties": {"tag": {"type": "string"}, "since": {"type": "string", "format": "date"}},
        }
    return {"type": "object", "properties": properties, "required": ["query"]}


def dummy_name(index: int) -> str:
    return f"dummy_{index:04d}"


class BenchServer(MCPServer):
    """An ``MCPServer`` whose ``extra_tools`` dummy tools cost nothing to register."""

    def __init__(self, extra_tools: int = 0) -> None:
        super().__init__("bench", instructions="Benchmark server for mcp-run.", log_level="WARNING")
        self._dummies = [
            types.Tool(name=dummy_name(i), description=f"Dummy tool number {i}; answers with its query.",
                       input_schema=dummy_schema(i))
            for i in range(extra_tools)
        ]
        self._dummy_schemas = {tool.name: tool.input_schema for tool in self._dummies}

    async def list_tools(self) -> list[types.Tool]:
        return [*await super().list_tools(), *self._dummies]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        if name in self._dummy_schemas:
            text = f"{name}: {arguments.get('query', '')}"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        return await super().call_tool(name, arguments, context)

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        if name in self._dummy_schemas:
            return self._dummy_schemas[name]
        return super()._tool_input_schema(name)


def build(extra_tools: int = 0) -> BenchServer:
    server = BenchServer(extra_tools)

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
        """Sleep (at most 10 s), then answer."""
        await anyio.sleep(min(seconds, 10.0))
        return f"slept {seconds}"

    @server.tool()
    def big_payload(size: int) -> str:
        """Answer with ``size`` characters of text (at most 10 MB)."""
        return "x" * min(size, 10_000_000)

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Register a tool called ``name`` and announce that the tool list changed."""

        def added(text: str = "") -> str:
            return f"{name}: {text}"

        server.add_tool(added, name=name, description=f"Added at runtime as {name}.")
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        return f"added {name}"

    return server


def http_app(extra_tools: int, mounts: int) -> ASGIApp:
    """One server at ``/mcp``, or ``mounts`` independent servers at ``/s00/mcp``, ``/s01/mcp``, ..."""
    if mounts == 0:
        return whole_requests_only(build(extra_tools).streamable_http_app())
    return whole_requests_only(mounted([
        build(extra_tools).streamable_http_app(streamable_http_path=mount_path(index))
        for index in range(mounts)
    ]))


def mounted(children: list[Starlette]) -> Starlette:
    """One app serving the routes of every child app, each child's lifespan running in its own."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for child in children:  # each child's session manager runs for the app's lifetime
                await stack.enter_async_context(child.router.lifespan_context(child))
            yield

    return Starlette(routes=[route for child in children for route in child.routes], lifespan=lifespan)


def whole_requests_only(app: ASGIApp) -> ASGIApp:
    """Hand the app only requests whose body arrived whole.

    A client that closes its connection while still sending (a benchmark round ending, a
    cancelled call) is normal; the MCP app would read the cut body, raise ``ClientDisconnect``
    and log it as an error with a traceback. Here the body is read first: if the client goes away
    meanwhile there is no one to answer, and the request ends quietly.
    """

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        received: list[Message] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            received.append(message)
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        await app(scope, replay, send)

    return guarded


def mount_path(index: int) -> str:
    return f"/s{index:02d}/mcp"


def serve_http(app: ASGIApp) -> None:
    """Serve on a free loopback port; the first stdout line, ``PORT <n>``, says which, once listening."""
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else Nagle adds 40 ms per answer
    listener.bind(("127.0.0.1", 0))  # loopback only
    listener.listen(1024)
    sys.stdout.write(f"PORT {listener.getsockname()[1]}\n")
    sys.stdout.flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[listener])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The mcp-run benchmark server.")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--extra-tools", type=int, default=0, help="dummy tools to add")
    parser.add_argument("--mounts", type=int, default=0, help="http: this many servers in one process")
    options = parser.parse_args(argv)
    if options.transport == "stdio":
        anyio.run(build(options.extra_tools).run_stdio_async)
        return
    serve_http(http_app(options.extra_tools, options.mounts))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:  # Ctrl-C at the terminal reaches the benchmark's servers too
        raise SystemExit(130) from None
