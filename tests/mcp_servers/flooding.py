"""An HTTP MCP server gone hostile: ``flooding(app)`` wraps a streamable HTTP app (the demo server's)
so that a tools/call of ``echo`` with one of these texts is answered by the wrapper instead:

- ``ENDLESS_JSON``: a JSON body that does not end (until ``FLOOD_LIMIT`` bytes, or the client leaves);
- ``ENDLESS_EVENT``: one server-sent event that does not end (likewise);
- ``NESTED_EVENT``: an event whose answer nests arrays deeper than any JSON parser goes.

Every other request reaches the app unchanged, so the server stays usable around the floods. The
body is written in chunks as the client reads it: nothing large is held in memory on either side
unless the client buffers it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ENDLESS_JSON = "endless json"
ENDLESS_EVENT = "endless event"
NESTED_EVENT = "nested event"
CHUNK = b"a" * 65_536
FLOOD_LIMIT = 64 * 1024 * 1024  # a flood that nobody stops ends here (the client should stop first)
NESTING = 5_000


def _echo_text(request: Any) -> str | None:
    if not isinstance(request, dict) or request.get("method") != "tools/call":
        return None
    params = request.get("params") or {}
    if params.get("name") != "echo":
        return None
    text = (params.get("arguments") or {}).get("text")
    return text if isinstance(text, str) else None


async def _read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _start(send: Send, content_type: bytes) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", content_type)]})


async def _flood(send: Send, head: bytes) -> None:
    await send({"type": "http.response.body", "body": head, "more_body": True})
    sent = len(head)
    while sent < FLOOD_LIMIT:
        await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
        sent += len(CHUNK)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def flooding(app: ASGIApp) -> ASGIApp:
    async def hostile(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await _read_body(receive)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        text = _echo_text(request)
        assert request is None or isinstance(request, dict)
        request_id = json.dumps(request.get("id") if request else None)
        if text == ENDLESS_JSON:
            await _start(send, b"application/json")
            head = f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"content":[{{"type":"text","text":"'
            await _flood(send, head.encode())
        elif text == ENDLESS_EVENT:
            await _start(send, b"text/event-stream")
            await _flood(send, b'event: message\ndata: {"jsonrpc":"2.0","id":' + request_id.encode()
                         + b',"result":{"content":[{"type":"text","text":"')
        elif text == NESTED_EVENT:
            await _start(send, b"text/event-stream")
            nested = "[" * NESTING + "]" * NESTING
            event = f'event: message\ndata: {{"jsonrpc":"2.0","id":{request_id},"result":{nested}}}\n\n'
            await send({"type": "http.response.body", "body": event.encode(), "more_body": False})
        else:
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            await app(scope, replay, send)

    return hostile
