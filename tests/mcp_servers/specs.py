"""Server specs for tests, resolved against fast defaults as a manifest would resolve them.

    stdio("demo")                                   # python tests/mcp_servers/demo.py
    stdio("legacy", required=True, timeout=2)       # any server setting can be overridden
    http("http://127.0.0.1:8000/mcp")               # streamable HTTP; transport="sse" for SSE
"""

from __future__ import annotations

from typing import Any

from mcp_servers import command
from runner.manifest import DefaultsSpec, HttpServerSpec, StdioServerSpec

# Quick restarts and short waits; heartbeats rare enough not to add traffic unless a test asks.
FAST_DEFAULTS = DefaultsSpec.model_validate({
    "timeout": 10,
    "startup_timeout": 30,
    "heartbeat": {"interval": 30, "stale_after": 60},
    "restart": {"max_attempts": 3, "backoff": 0.05, "max_backoff": 0.2},
})


def stdio(name: str, *args: str, **settings: Any) -> StdioServerSpec:
    """Test server ``name`` over stdio, started with this interpreter."""
    program, argv = command(name, *args)
    spec = StdioServerSpec.model_validate({"command": program, "args": argv, **settings})
    return spec.inherit(FAST_DEFAULTS)  # type: ignore[return-value]


def process(program: str, *args: str, **settings: Any) -> StdioServerSpec:
    """Any program over stdio (for servers that are not servers: ``sleep``, a missing command)."""
    spec = StdioServerSpec.model_validate({"command": program, "args": list(args), **settings})
    return spec.inherit(FAST_DEFAULTS)  # type: ignore[return-value]


def http(url: str, **settings: Any) -> HttpServerSpec:
    """A server over streamable HTTP (``transport="sse"`` for SSE)."""
    spec = HttpServerSpec.model_validate({"url": url, **settings})
    return spec.inherit(FAST_DEFAULTS)  # type: ignore[return-value]
