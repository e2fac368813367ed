"""Real MCP servers for the test suite.

Every module here builds an ``MCPServer`` (``build()``) and also runs as a script, which is how the
tests start them as stdio subprocesses::

    python tests/mcp_servers/demo.py                     # stdio, both protocol eras (the client decides)
    python tests/mcp_servers/demo.py --legacy            # stdio, 2025-11-25 handshake era only
    python tests/mcp_servers/demo.py --transport http --port 8000

``loopback.serve_app`` runs any of them as a real HTTP server on 127.0.0.1 inside the test process.
This module stays import-light: the scripts import it before they import the SDK.
"""

from __future__ import annotations

import sys
from pathlib import Path

SERVERS_DIR = Path(__file__).resolve().parent


def script(name: str) -> Path:
    """Path of the server script ``name`` (``"demo"`` -> ``tests/mcp_servers/demo.py``)."""
    path = SERVERS_DIR / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(path)
    return path


def command(name: str, *args: str) -> tuple[str, list[str]]:
    """``(command, args)`` that start server ``name`` over stdio with this interpreter."""
    return sys.executable, [str(script(name)), *args]
