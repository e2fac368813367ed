"""Row 4c: bytes of tool definitions each model request carries over 20 servers x 500 tools, every
tool offered (``agent.tool_search: off``, the floor) against tool search (``auto``).

One scripted turn per round and path, through the real graph over a real fleet (streamable HTTP,
the ``--mounts`` endpoints of one ``bench/server.py`` process): with search the model calls
``search_tools``, then the tool it found, then answers; without, it calls the tool, then answers.
The metric is the mean size of the tool definitions over the turn's model requests, as the
scripted model receives them (OpenAI's JSON form, what ``bind_tools`` sends a provider).
"""

from __future__ import annotations

import functools
import statistics
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from bench.calls import bench_manifest
from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import ROOT, extra_for, http_server
from bench.server import dummy_name, mount_path
from bench.stats import Metrics
from runner.agent.graph import build_graph
from runner.manifest import ToolSearchSpec
from runner.models import ScriptedChatModel
from runner.servers import open_fleet
from runner.tools.catalog import ToolCatalog
from runner.tools.search import SEARCH_TOOL, ToolSearch

EVERY_TOOL = "every tool offered (tool_search: off)"
SEARCHING = "search_tools + found tools (tool_search: auto)"
SEARCH_GOAL = Goal("tool definitions per request with search <= 2% of the full list", 0.02, percent=True)
TURN_TIMEOUT = 120.0
TARGET = dummy_name(42)  # the tool the model looks for, on the first server


def search_row(settings: Settings) -> str:
    servers, tools = settings.wide_servers, settings.wide_tools
    return f"4c. {servers} servers x {tools} tools: tool definitions per model request"


def script(searching: bool, turns: int) -> list[Any]:
    call = {"tool_calls": [{"name": f"s00__{TARGET}", "args": {"query": "x"}}]}
    search = {"tool_calls": [{"name": SEARCH_TOOL, "args": {"query": TARGET}}]}
    return ([search, call, "done"] if searching else [call, "done"]) * turns


@asynccontextmanager
async def search_suite(settings: Settings) -> AsyncIterator[list[Case]]:
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(
            http_server(extra_for(settings.wide_tools), mounts=settings.wide_servers)
        )
        manifest = bench_manifest({f"s{index:02d}": {"url": url + mount_path(index)}
                                   for index in range(settings.wide_servers)})
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        fleet = await stack.enter_async_context(
            open_fleet(manifest.servers, base_dir=ROOT, state_dir=state_dir)
        )
        catalog = ToolCatalog(manifest, fleet.connections, ROOT)
        cases = []
        for path, mode in ((EVERY_TOOL, "off"), (SEARCHING, "auto")):
            model = ScriptedChatModel(script(mode == "auto", settings.rounds + 1))
            search = ToolSearch(lambda: catalog, ToolSearchSpec(mode=mode))
            graph = build_graph(model, tools_provider=lambda: catalog.tools,
                                system_prompt_provider=lambda: "", max_steps=10,
                                checkpointer=InMemorySaver(), tool_search=search)
            await one_turn(graph, model)  # checked before it is timed: no numbers from a broken path
            measure = functools.partial(one_turn, graph, model)
            floor, goals = (None, ()) if mode == "off" else (EVERY_TOOL, (SEARCH_GOAL,))
            cases.append(Case(search_row(settings), path, measure, "kb_per_request", floor, goals))
        yield cases


async def one_turn(graph: Any, model: ScriptedChatModel) -> Metrics:
    """One turn on a new thread; the mean kB of tool definitions its model requests carried."""
    before = len(model.offered_bytes)
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    with anyio.fail_after(TURN_TIMEOUT):
        state = await graph.ainvoke({"messages": [("user", f"call {TARGET}")]}, config)
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    if not results or results[-1].status != "success" or TARGET not in str(results[-1].content):
        raise BenchError(f"the tool search turn did not reach {TARGET}: {results!r}")
    sent = model.offered_bytes[before:]
    return {"kb_per_request": statistics.mean(sent) / 1000, "max_kb": max(sent) / 1000,
            "requests": float(len(sent))}
