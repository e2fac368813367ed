"""Serve an ASGI app on 127.0.0.1 from a thread of the test process: real HTTP, no subprocess.

The listening socket is bound before the server thread starts, so clients can connect at once (the
kernel queues them until uvicorn accepts); nothing waits or polls for start-up.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn
from starlette.types import ASGIApp

SHUTDOWN_JOIN_TIMEOUT = 10.0


@dataclass
class LoopbackServer:
    """A running loopback server; ``url(path)`` builds addresses on it."""

    host: str
    port: int
    server: uvicorn.Server

    def url(self, path: str = "/mcp") -> str:
        return f"http://{self.host}:{self.port}{path}"


@contextmanager
def serve_app(app: ASGIApp, port: int = 0) -> Iterator[LoopbackServer]:
    """Run ``app`` until the block ends; the server thread is joined (bounded) on exit.

    ``port`` 0 picks a free port; a given port lets a test put a new server where an old one was.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"loopback-{port}", daemon=True
    )
    thread.start()
    try:
        yield LoopbackServer(host, port, server)
    finally:
        server.should_exit = True
        thread.join(SHUTDOWN_JOIN_TIMEOUT)
        sock.close()
        if thread.is_alive():
            raise RuntimeError(f"loopback server on port {port} did not stop")
