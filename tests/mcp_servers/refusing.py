"""HTTP servers that refuse: every request answered with one status (401, 500, ...), or a port
where nothing listens. Each counts the requests it got, so tests can tell a retry storm.

    rejecting = Rejecting(500)
    url = serve_http(demo.build(), wrap=rejecting.wrap)   # conftest's serve_http fixture
    ...
    assert rejecting.requests <= 3
"""

from __future__ import annotations

import socket

from starlette.types import ASGIApp, Receive, Scope, Send


class Rejecting:
    """Wraps an ASGI app so that every HTTP request is answered with ``status`` and counted."""

    def __init__(self, status: int, body: bytes = b"go away") -> None:
        self.status = status
        self.body = body
        self.requests = 0

    def wrap(self, app: ASGIApp) -> ASGIApp:
        async def rejecting(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":  # lifespan events still reach the app
                await app(scope, receive, send)
                return
            self.requests += 1
            await send({"type": "http.response.start", "status": self.status,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": self.body})

        return rejecting


def refused_url() -> str:
    """A loopback URL where nothing listens: connecting is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"
