"""`mcp-run serve --http` keeps an idle keep-alive connection open longer than HTTP clients keep
theirs (httpx, and so the MCP SDK's client: 5 s), so the client is the one that closes it. A server
that closes first (uvicorn's default is also 5 s) races the client's next request on it: that
request ends with no reply (the client reads an end of stream) and nothing is logged. Seen as 9 of
1,423 requests unanswered under 200 keep-alive clients."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import h11
import httpx2
from anyio.abc import SocketStream
from builders import copy_bundled_agent
from serving import http_agent

LIMIT = 90
CLIENT_KEEP_ALIVE = httpx2.Limits().keepalive_expiry  # 5 s: how long httpx keeps an idle connection
LISTING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {}}}}


async def exchange(stream: SocketStream, connection: h11.Connection, host: str, path: str) -> h11.Response:
    """One tools/list request on the open connection; its response, read to the end."""
    body = json.dumps(LISTING).encode()
    headers = [("Host", host), ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
               ("Accept", "application/json, text/event-stream"), ("Mcp-Protocol-Version", "2026-07-28"),
               ("Mcp-Method", "tools/list")]
    await stream.send(connection.send(h11.Request(method="POST", target=path, headers=headers)) or b"")
    await stream.send(connection.send(h11.Data(data=body)) or b"")
    await stream.send(connection.send(h11.EndOfMessage()) or b"")
    response: h11.Response | None = None
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive())
        elif isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.EndOfMessage):
            assert response is not None
            connection.start_next_cycle()
            return response


async def test_an_idle_keep_alive_connection_outlives_the_clients_own_keep_alive_and_takes_the_next_request(
    tmp_path: Path
) -> None:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    with http_agent(manifest) as served:
        url = urlsplit(served.url)
        assert url.hostname is not None and url.port is not None
        with anyio.fail_after(LIMIT):
            async with await anyio.connect_tcp(url.hostname, url.port) as stream:
                connection = h11.Connection(h11.CLIENT)
                first = await exchange(stream, connection, url.netloc, url.path)
                assert first.status_code == 200
                # Idle for twice as long as a client keeps such a connection: the server must not
                # end it first (an end of stream here is the server closing it).
                with anyio.move_on_after(2 * CLIENT_KEEP_ALIVE):
                    unexpected = await stream.receive()
                    raise AssertionError(f"the server sent {unexpected!r} on an idle connection")
                second = await exchange(stream, connection, url.netloc, url.path)
    assert second.status_code == 200
