"""mcp-run: a YAML manifest of MCP servers, tools and prompts becomes a LangGraph agent.

    import runner

    async with runner.load_agent("agent.yaml") as agent:
        result = await agent.graph.ainvoke({"messages": [("user", "hi")]}, agent.config())
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_agent"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `mcp-run validate` should not pay for LangGraph and the MCP SDK.
    if name == "load_agent":
        from runner.runtime import load_agent

        return load_agent
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
