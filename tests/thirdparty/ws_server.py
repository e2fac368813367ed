"""An MCP server over websocket, run with the MCP SDK 1.x (tests/thirdparty/.venv-ws) under uvicorn.

    .venv-ws/bin/python ws_server.py     # binds 127.0.0.1 on a free port, prints it, then serves /ws
    .venv-ws/bin/python ws_server.py --port 8123   # on that port (a server brought back after a stop)

Tools: echo, hang (never returns), drop (closes the websocket it was called on), connections (how
many websocket connections the server has accepted), header (a request header of the latest one).
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn
from mcp.server.fastmcp import FastMCP
from mcp.server.websocket import websocket_server
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute

server = FastMCP("ws")
accepted = 0
open_scopes: list[anyio.CancelScope] = []
latest_headers: dict[str, str] = {}


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
async def hang() -> str:
    """Never return."""
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def drop() -> str:
    """Close the websocket this call came on (after answering nothing)."""
    for scope in open_scopes:
        scope.cancel()
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
def header(name: str) -> str:
    """A header of the latest websocket upgrade request, or '<absent>'."""
    return latest_headers.get(name.lower(), "<absent>")


@server.tool()
def connections() -> int:
    """Websocket connections accepted so far."""
    return accepted


async def endpoint(websocket) -> None:  # type: ignore[no-untyped-def]
    global accepted
    accepted += 1
    latest_headers.clear()
    latest_headers.update({key.lower(): value for key, value in websocket.headers.items()})
    lowlevel = server._mcp_server
    with anyio.CancelScope() as scope:
        open_scopes.append(scope)
        try:
            async with websocket_server(websocket.scope, websocket.receive, websocket.send) as (read, write):
                await lowlevel.run(read, write, lowlevel.create_initialization_options())
        finally:
            open_scopes.remove(scope)


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    app = Starlette(routes=[WebSocketRoute("/ws", endpoint)])
    uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="websockets")).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
