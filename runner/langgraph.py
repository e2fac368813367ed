"""A graph factory for LangGraph's own server (``langgraph dev`` / Agent Server).

``langgraph.json`` names ``./runner/langgraph.py:graph``; the manifest path comes from the
``MCP_RUN_MANIFEST`` variable (default ``agent.yaml`` in the working directory). The factory is an
async context manager, so the MCP servers live exactly as long as the server keeps the graph.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from runner.runtime import load_agent

MANIFEST_ENV = "MCP_RUN_MANIFEST"


@asynccontextmanager
async def graph(config: Any = None) -> AsyncIterator[CompiledStateGraph]:
    """The agent graph of the manifest named by ``MCP_RUN_MANIFEST``, with its servers running."""
    async with load_agent(os.environ.get(MANIFEST_ENV, "agent.yaml")) as runtime:
        yield runtime.graph
