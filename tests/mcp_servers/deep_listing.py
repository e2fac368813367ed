"""A raw JSON-RPC stdio server (no SDK) listing a tool whose input schema nests very deep, beside a
plain one.

    deep_listing.py [--depth N]

Tools: deep (an object schema whose property ``a`` is an object whose ``a`` is …, ``--depth``
levels down, 140 by default), fine (a plain tool; calling it answers ``fine: <text>``). The listing
is written as text, so any depth goes out, whatever Python's own JSON encoder would allow; an SDK
server cannot even serialise one past some 130 levels. The client must skip the deep tool alone.
"""

from __future__ import annotations

import argparse
import json
import sys

FINE = {"name": "fine", "description": "A plain tool.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


def deep_tool(depth: int) -> str:
    """The deep tool's definition as JSON text."""
    schema = '{"type": "string"}'
    opening = '{"type": "object", "properties": {"a": ' * depth
    return ('{"name": "deep", "description": "A tool whose schema nests deep.", "inputSchema": '
            + opening + schema + "}}" * depth + "}")


def answer(request_id: object, result: str) -> None:
    sys.stdout.write('{"jsonrpc": "2.0", "id": ' + json.dumps(request_id) + ', "result": ' + result + "}\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--depth", type=int, default=140)
    depth = parser.parse_args().depth
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, request_id = message["method"], message["id"]
        if method == "initialize":
            version = message["params"].get("protocolVersion", "2025-11-25")
            answer(request_id, json.dumps({"protocolVersion": version, "capabilities": {"tools": {}},
                                           "serverInfo": {"name": "deep_listing", "version": "1"}}))
        elif method == "tools/list":
            answer(request_id, '{"tools": [' + deep_tool(depth) + ", " + json.dumps(FINE) + "]}")
        elif method == "tools/call":
            text = message["params"].get("arguments", {}).get("text", "")
            answer(request_id, json.dumps({"content": [{"type": "text", "text": f"fine: {text}"}]}))
        elif method == "ping":
            answer(request_id, "{}")
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id,
                                         "error": {"code": -32601, "message": f"no method {method}"}}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
