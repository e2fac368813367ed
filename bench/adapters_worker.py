"""The langchain-mcp-adapters paths of rows 1 and 2, run inside ``bench/.venv-adapters`` (mcp 1.x).

Started by ``bench.adapters`` as ``<venv>/bin/python -m bench.adapters_worker`` and driven as
``bench.peer_worker`` describes. Imports only mcp 1.x, langchain-mcp-adapters,
langchain-core, anyio and ``bench.stats`` (standard library + anyio); nothing from mcp-run.
The servers are the main environment's ``bench/server.py`` (mcp 2.x), which still speaks the
2025-11-25 handshake that mcp 1.x uses.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

import anyio
from langchain_core.messages import ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from bench.peer_worker import Described, describe, serve
from bench.stats import Call, latency_slice, run_concurrently, slice_calls, time_calls

FLOOR = "raw mcp 1.x ClientSession (adapters floor)"
PERSISTENT = "langchain-mcp-adapters, persistent session"
DEFAULT = "langchain-mcp-adapters, default (new session per call)"
ARGUMENTS = {"text": "ping"}


def tool_call() -> dict[str, Any]:
    return {"name": "echo", "args": dict(ARGUMENTS), "id": "call_bench", "type": "tool_call"}


async def open_paths(stack: AsyncExitStack, transport: str, command: list[str], url: str) -> dict[str, Call]:
    if transport == "stdio":
        connection: dict[str, Any] = {"transport": "stdio", "command": command[0], "args": command[1:]}
        parameters = StdioServerParameters(command=command[0], args=command[1:])
        read, write = await stack.enter_async_context(stdio_client(parameters))
    else:
        connection = {"transport": "streamable_http", "url": url}
        read, write, _ = await stack.enter_async_context(streamablehttp_client(url))
    floor = await stack.enter_async_context(ClientSession(read, write))
    await floor.initialize()
    adapters = MultiServerMCPClient({"bench": connection})
    session = await stack.enter_async_context(adapters.session("bench"))
    persistent = {tool.name: tool for tool in await load_mcp_tools(session)}["echo"]
    per_call = {tool.name: tool for tool in await adapters.get_tools()}["echo"]
    paths: dict[str, Call] = {
        FLOOR: lambda: floor.call_tool("echo", ARGUMENTS),
        PERSISTENT: lambda: persistent.ainvoke(tool_call()),
        DEFAULT: lambda: per_call.ainvoke(tool_call()),
    }
    for path, call in paths.items():
        answer = await call()
        text = str(answer.content)
        failed = answer.status != "success" if isinstance(answer, ToolMessage) else answer.isError
        if failed or "ping" not in text:
            raise RuntimeError(f"{path} ({transport}) answered {answer!r}")
    return paths


def cases_for(transport: str, paths: dict[str, Call], settings: dict[str, Any]) -> Described:
    cases: Described = {}

    def add(row: str, path: str, key: str, measure, sliced: bool = False) -> None:
        describe(cases, row, path, key, None if path == FLOOR else FLOOR, measure, sliced=sliced)

    row = f"1. call latency, {transport}"
    for path in (FLOOR, PERSISTENT):  # in slices, pooled by the harness (the proxy's "sliced")
        add(row, path, "p50_ms", lambda path=path: latency_slice(
            paths[path], settings["calls"], settings["warmup"], settings["latency_slices"]), sliced=True)
    add(row, DEFAULT, "p50_ms", lambda: time_calls(paths[DEFAULT], settings["default_calls"], 0))
    for concurrency in settings["concurrency"]:
        row = f"2. throughput, {transport}, c={concurrency}"
        for path in (FLOOR, PERSISTENT):
            add(row, path, "calls_per_s",
                lambda path=path, c=concurrency: run_concurrently(paths[path], slice_calls(settings, c), c))
    return cases


async def setup(stack: AsyncExitStack, request: dict[str, Any]) -> tuple[Described, dict[str, str]]:
    cases: Described = {}
    for transport in ("stdio", "http"):
        paths = await open_paths(stack, transport, request["server_command"], request["http_url"])
        cases.update(cases_for(transport, paths, request["settings"]))
    return cases, {name: version(name) for name in ("mcp", "langchain-mcp-adapters")}


if __name__ == "__main__":
    anyio.run(serve, setup)
