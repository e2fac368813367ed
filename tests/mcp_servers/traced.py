"""A server that shows the trace context it received: what a server that traces would join.

Tools: trace_context (the ``traceparent`` / ``tracestate`` of the request's ``_meta``, and the
``traceparent`` HTTP header when served over HTTP), echo.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import Context, MCPServer


def build(name: str = "traced") -> MCPServer:
    server = MCPServer(name, instructions="Shows the trace context of each call.")

    @server.tool()
    def trace_context(ctx: Context) -> dict[str, str | None]:
        """The trace context this call carried: in _meta, and in the HTTP header."""
        meta = dict(ctx.request_context.meta or {})
        headers = ctx.headers or {}
        return {"meta_traceparent": meta.get("traceparent"), "meta_tracestate": meta.get("tracestate"),
                "header_traceparent": headers.get("traceparent")}

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
