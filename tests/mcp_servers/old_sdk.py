"""A server as old SDKs (mcp <= 1.6, chroma-mcp 0.2.6) are: it speaks only the ``initialize``
handshake, and a request it does not know - the 2026-07-28 ``server/discover`` probe - kills it.

A raw stdio loop, not an SDK server: the point is a server that breaks where the SDK's would not.
One tool, ``echo``. Each start appends a line to ``--starts FILE`` when given.

    --slow SECONDS   read nothing for that long after starting (a slow Node server under load),
                     then answer ``server/discover`` with -32601 as newer 1.x SDKs do
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

VERSION = "2025-03-26"  # the newest handshake version mcp 1.6 knew
TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def answer(request: dict[str, Any], *, slow: bool) -> dict[str, Any] | None:
    """The response to ``request`` (None for a notification); exits on a method it does not know."""
    method, ident, params = request.get("method"), request.get("id"), request.get("params") or {}
    if ident is None:
        return None  # notifications/initialized, notifications/cancelled: nothing to say
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": VERSION, "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "old-sdk", "version": "0.2.6"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "server/discover" and not slow:  # what mcp 1.6's request validation did with it
        sys.stderr.write(f"pydantic_core.ValidationError: unknown method {method!r}\n")
        sys.exit(1)
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("--starts", type=Path)
    options = parser.parse_args()
    if options.starts is not None:
        with options.starts.open("a") as starts:
            starts.write("start\n")
    time.sleep(options.slow)
    for line in sys.stdin:
        if not line.strip():
            continue
        response = answer(json.loads(line), slow=options.slow > 0)
        if response is not None:
            sys.stdout.write(json.dumps(response) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
