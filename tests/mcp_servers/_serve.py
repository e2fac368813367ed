"""Run a test server over stdio, streamable HTTP or SSE, in both protocol eras or the legacy one only.

The legacy-only mode is how the tests get a server that behaves like today's FastMCP / TypeScript
servers: it answers only the 2025-11-25 ``initialize`` handshake, so a client in ``auto`` mode has to
fall back from its ``server/discover`` probe.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

PROTOCOL_VERSION_HEADER = b"mcp-protocol-version"


async def serve_stdio(server: MCPServer, *, legacy: bool, stdout: Any = None) -> None:
    """Serve ``server`` on this process's stdin/stdout until stdin closes."""
    lowlevel = server._lowlevel_server
    async with stdio_server(stdout=stdout) as (read_stream, write_stream):
        if not legacy:
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
            return
        # serve_loop speaks only the handshake era: a server/discover probe is refused.
        async with lowlevel.lifespan(lowlevel) as lifespan_state:
            await serve_loop(
                lowlevel,
                read_stream,
                write_stream,
                lifespan_state=lifespan_state,
                init_options=lowlevel.create_initialization_options(),
            )


def legacy_only(app: ASGIApp) -> ASGIApp:
    """Wrap a streamable-HTTP app so it refuses 2026-07-28 requests the way a 2025 server does."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            version = headers.get(PROTOCOL_VERSION_HEADER, b"").decode("latin-1")
            if version and version not in HANDSHAKE_PROTOCOL_VERSIONS:
                body = json.dumps({
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32600, "message": "Bad Request: Server not initialized"},
                }).encode()
                await send({
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                })
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def http_app(server: MCPServer, *, transport: str, legacy: bool = False) -> ASGIApp:
    """The ASGI app serving ``server`` over streamable HTTP (``/mcp``) or SSE (``/sse``)."""
    if transport == "sse":
        return server.sse_app()
    app = server.streamable_http_app()
    return legacy_only(app) if legacy else app


def main(
    build: Callable[[], MCPServer],
    argv: Sequence[str] | None = None,
    *,
    stdio: Callable[[MCPServer, bool], Awaitable[None]] | None = None,
) -> None:
    """Command line of every test server: ``[--transport stdio|http|sse] [--legacy] [--port N]``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    parser.add_argument("--legacy", action="store_true", help="speak only the 2025-11-25 era")
    parser.add_argument("--port", type=int, default=8000)
    options = parser.parse_args(argv)
    server = build()
    if options.transport == "stdio":
        run_stdio = stdio or (lambda srv, legacy: serve_stdio(srv, legacy=legacy))
        anyio.run(run_stdio, server, options.legacy)
        return
    import uvicorn

    app = http_app(server, transport=options.transport, legacy=options.legacy)
    uvicorn.run(app, host="127.0.0.1", port=options.port, log_level="warning")
