"""The agent under LangGraph's own server (``langgraph dev`` / Agent Server).

``langgraph.json`` names the graph factory ``graph`` and the ASGI app ``app`` of this module; the
manifest comes from ``MCP_RUN_MANIFEST`` (default ``agent.yaml`` in the working directory), read
from the shell: ``langgraph.json`` sets no ``env`` of it, which ``langgraph dev`` would apply over
the shell's.

Each agent of the manifest's ``agents:`` can be a graph of its own: the factories of
:mod:`runner.hosting.langgraph_agents`, named after the agents.

The server calls a graph factory for every run, and also to read state or draw the graph: the
agent is therefore started once per server process (:class:`AgentHost`) and every call returns its
current graph. ``app`` only carries the lifespan: the agent starts with the server, so a manifest
or server that cannot start fails the start-up, and its MCP servers stop at shutdown.

The server checks that nothing blocks its event loop: the manifest is read, and the folders it
needs are made, in a worker thread (:func:`runner.agent.runtime.load_agent`).

Conversations are kept by the server's own checkpointer, which replaces the graph's. To keep them
in the manifest's instead (SQLite, PostgreSQL), name ``checkpointer`` in ``langgraph.json``'s
``checkpointer.path``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from starlette.applications import Starlette

from runner.agent.checks import checked_agent
from runner.hosting.agent_host import HOST, manifest_path
from runner.store.checkpointers import open_checkpointer
from runner.store.state_folder import state_folder


async def graph(config: RunnableConfig) -> CompiledStateGraph:
    """The graph factory: the running agent's current graph (the server sets its checkpointer)."""
    return (await HOST.runtime()).graph


@asynccontextmanager
async def lifespan(_app: Any) -> AsyncIterator[None]:
    """Start the agent with the server; stop its MCP servers at shutdown."""
    await HOST.runtime()
    try:
        yield
    finally:
        await HOST.close()


@asynccontextmanager
async def checkpointer() -> AsyncIterator[BaseCheckpointSaver]:
    """The manifest's checkpointer, for ``langgraph.json``'s ``checkpointer.path``."""
    checked = await anyio.to_thread.run_sync(checked_agent, manifest_path())
    loaded = checked.loaded
    state_dir = await anyio.to_thread.run_sync(state_folder, loaded)
    async with open_checkpointer(loaded.manifest.checkpointer, state_dir=state_dir,
                                 base_dir=loaded.base_dir) as saver:
        yield saver


# The ASGI app of langgraph.json's ``http.app``: no routes of its own, only the lifespan.
app = Starlette(lifespan=lifespan)
