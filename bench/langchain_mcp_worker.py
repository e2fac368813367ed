"""LangChain's own ``langchain.mcp`` (``MCPAdapter``, on the FastMCP client) on rows 1, 2 and 4a.

Runs inside ``bench/.venv-langchain`` (``langchain[mcp]``, which brings FastMCP 4), started by
``bench.adapters`` as ``<venv>/bin/python -m bench.langchain_mcp_worker`` and driven as
``bench.peer_worker`` describes. Its floor is the raw ``mcp.Client`` of that environment (the same
mcp release as mcp-run's), measured beside it; nothing from mcp-run is imported.

- rows 1-2: ``MCPAdapter`` kept open, its ``echo`` tool invoked as LangGraph's ToolNode does
  (``ainvoke`` with a ToolCall dict);
- row 4a: ``MCPAdapter.list_tools`` on the 1,000-tool server (``tools/list`` plus a LangChain tool
  per MCP tool, bypassing FastMCP's response cache) against one raw ``tools/list``.
"""

from __future__ import annotations

import statistics
import time
import warnings
from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anyio
from fastmcp.client.transports import StdioTransport
from langchain_core._api import LangChainBetaWarning
from langchain_core.messages import ToolMessage
from mcp import Client, StdioServerParameters

from bench.peer_worker import Described, describe, serve
from bench.stats import Call, latency_slice, median_ms, run_concurrently, slice_calls

with warnings.catch_warnings():
    warnings.simplefilter("ignore", LangChainBetaWarning)
    from langchain.mcp import MCPAdapter

FLOOR = "raw mcp.Client (langchain.mcp env floor)"
ADAPTER = "langchain.mcp MCPAdapter tool (ainvoke ToolCall)"
LIST = "langchain.mcp MCPAdapter.list_tools"
ARGUMENTS = {"text": "ping"}


def tool_call() -> dict[str, Any]:
    return {"name": "echo", "args": dict(ARGUMENTS), "id": "call_bench", "type": "tool_call"}


async def open_pair(
    stack: AsyncExitStack, command: list[str] | None, url: str | None
) -> tuple[Client, MCPAdapter]:
    """A raw client and an open adapter on the same server (over stdio, each its own process)."""
    if command is not None:
        raw_target: Any = StdioServerParameters(command=command[0], args=command[1:])
        target: Any = StdioTransport(command=command[0], args=command[1:])
    else:
        raw_target = target = url
    raw = await stack.enter_async_context(Client(raw_target, cache=None))
    adapter = await stack.enter_async_context(MCPAdapter(target))
    return raw, adapter


async def call_paths(stack: AsyncExitStack, command: list[str] | None, url: str | None) -> dict[str, Call]:
    raw, adapter = await open_pair(stack, command, url)
    echo = {tool.name: tool for tool in await adapter.list_tools(cache_mode="bypass")}["echo"]
    paths: dict[str, Call] = {
        FLOOR: lambda: raw.call_tool("echo", ARGUMENTS),
        ADAPTER: lambda: echo.ainvoke(tool_call()),
    }
    for path, call in paths.items():  # every path must really answer before it is timed
        answer = await call()
        failed = answer.status != "success" if isinstance(answer, ToolMessage) else answer.is_error
        if failed or "ping" not in str(answer.content):
            raise RuntimeError(f"{path} answered {answer!r}")
    return paths


async def setup(stack: AsyncExitStack, request: dict[str, Any]) -> tuple[Described, dict[str, str]]:
    settings = request["settings"]
    cases: Described = {}
    for transport in ("stdio", "http"):
        stdio = transport == "stdio"
        paths = await call_paths(stack, request["server_command"] if stdio else None,
                                 None if stdio else request["http_url"])
        row = f"1. call latency, {transport}"
        for path, call in paths.items():
            describe(cases, row, path, "p50_ms", None if path == FLOOR else FLOOR,
                     lambda call=call: latency_slice(call, settings["calls"], settings["warmup"],
                                                     settings["latency_slices"]), sliced=True)
        for concurrency in settings["concurrency"]:
            row = f"2. throughput, {transport}, c={concurrency}"
            for path, call in paths.items():
                describe(cases, row, path, "calls_per_s", None if path == FLOOR else FLOOR,
                         lambda call=call, c=concurrency: run_concurrently(call, slice_calls(settings, c), c))
    raw, adapter = await open_pair(stack, request["many_command"], None)
    listed = len(await adapter.list_tools(cache_mode="bypass"))
    if listed != settings["many_tools"]:
        raise RuntimeError(f"MCPAdapter listed {listed} tools, expected {settings['many_tools']}")
    repeats = settings["list_repeats"]

    async def raw_list() -> dict[str, float]:
        return {"ms": await median_ms(raw.list_tools, repeats)}

    async def adapter_list() -> dict[str, float]:
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            await adapter.list_tools(cache_mode="bypass")
            samples.append((time.perf_counter() - started) * 1000)
        return {"ms": statistics.median(samples)}

    row = f"4a. one server, {settings['many_tools']:,} tools: list (+ build)"
    describe(cases, row, FLOOR, "ms", None, raw_list)
    describe(cases, row, LIST, "ms", FLOOR, adapter_list)
    return cases, {name: version(name) for name in ("mcp", "fastmcp", "langchain")}


if __name__ == "__main__":
    anyio.run(serve, setup)
