"""Rows 1 and 2: one small tool call on an open session - latency, and throughput at concurrency.

Paths (each on its own session; over stdio each has its own server process, over HTTP they share
one server process):

- ``raw mcp.Client`` - the SDK alone (the floor);
- ``mcp-run ServerConnection.call_tool`` - the server layer (supervision, timeouts, errors);
- ``mcp-run graph tool node`` - a model's tool call as mcp-run's graph runs it:
  ``ToolCatalog.run_tool_call`` (argument validation, the call, result conversion, ToolMessage);
- ``mcp-run LangChain tool`` - the catalog's LangChain tool, invoked as LangGraph's ToolNode does
  it: ``ainvoke`` with a ToolCall dict (what a graph of someone else's that binds it pays).

The langchain-mcp-adapters paths run in their own environment (``bench.adapters``).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage
from mcp import Client

from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import ROOT, stdio_entry, stdio_parameters
from bench.stats import (
    Call,
    combined_latency,
    combined_throughput,
    latency_slice,
    run_concurrently,
    slice_calls,
)
from runner.manifest import Manifest
from runner.servers import open_fleet
from runner.tools.caller import ToolCaller
from runner.tools.catalog import ToolCatalog

RAW = "raw mcp.Client (floor)"
SAME = "raw mcp.Client declaring mcp-run's capabilities"
LAYER = "mcp-run ServerConnection.call_tool"
NODE = "mcp-run graph tool node (run_tool_call)"
TOOL = "mcp-run LangChain tool (ainvoke ToolCall)"
ARGUMENTS = {"text": "ping"}
TRANSPORTS = ("stdio", "http")
LATENCY_GOAL = Goal("mcp-run tool call (graph) p50 <= 1.10× the raw floor", 1.10)
THROUGHPUT_GOAL = Goal("throughput at c=32 >= 1.0× the raw floor", 1.0, better="higher")


def latency_row(transport: str) -> str:
    return f"1. call latency, {transport}"


def throughput_row(transport: str, concurrency: int) -> str:
    return f"2. throughput, {transport}, c={concurrency}"


def bench_manifest(servers: dict[str, Any], **top: Any) -> Manifest:
    """A manifest over benchmark servers (the model id only picks the schema pass)."""
    document = {"version": 1, "name": "bench", "model": {"id": "openai:gpt-4.1-mini"},
                "servers": servers, **top}
    return Manifest.model_validate(document)


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What LangGraph's ToolNode passes to ``ainvoke``."""
    return {"name": name, "args": arguments, "id": "call_bench", "type": "tool_call"}


async def check_echo(path: str, call: Call) -> None:
    """Every path must really answer before it is timed: no numbers from a broken path."""
    answer = await call()
    if isinstance(answer, ToolMessage):
        ok = answer.status == "success" and "ping" in str(answer.content)
    else:
        ok = not getattr(answer, "is_error", True) and "ping" in str(answer.content)
    if not ok:
        raise BenchError(f"{path} answered {answer!r} to echo")


def call_cases(transport: str, paths: dict[str, Call], settings: Settings) -> list[Case]:
    """Rows 1 and 2 of one transport. ``SAME`` (the floor sending mcp-run's requests) is timed only
    where a goal is, as a yardstick: what the server's work for those requests costs the floor."""
    cases = []
    for path, call in paths.items():
        floor = None if path == RAW else RAW
        goals = (LATENCY_GOAL,) if path == NODE else ()
        cases.append(Case(latency_row(transport), path, _latency(call, settings), "p50_ms", floor, goals,
                          settings.latency_slices, combined_latency))
    for concurrency in settings.concurrency:
        for path, call in paths.items():
            if path == SAME and concurrency != 32:
                continue
            floor = None if path == RAW else RAW
            goals = (THROUGHPUT_GOAL,) if path == NODE and concurrency == 32 else ()
            measure = _throughput(call, slice_calls(asdict(settings), concurrency), concurrency)
            cases.append(Case(throughput_row(transport, concurrency), path, measure, "calls_per_s",
                              floor, goals, settings.throughput_slices, combined_throughput))
    return cases


def _latency(call: Call, settings: Settings) -> Callable[[], Awaitable[dict[str, float]]]:
    return lambda: latency_slice(call, settings.calls, settings.warmup, settings.latency_slices)


def _throughput(call: Call, total: int, concurrency: int) -> Callable[[], Awaitable[dict[str, float]]]:
    return lambda: run_concurrently(call, total, concurrency)


@asynccontextmanager
async def call_suite(settings: Settings, http_url: str) -> AsyncIterator[list[Case]]:
    """Open every path's session over stdio and HTTP; yields the cases of rows 1 and 2."""
    async with open_call_paths(http_url) as paths:
        yield [case for transport in TRANSPORTS for case in call_cases(transport, paths[transport], settings)]


@asynccontextmanager
async def open_call_paths(http_url: str) -> AsyncIterator[dict[str, dict[str, Call]]]:
    """Every path of rows 1 and 2 by transport, its session open and its answer checked once."""
    endpoint = f"{http_url}/mcp"
    manifest = bench_manifest({"stdio": stdio_entry(), "http": {"url": endpoint}})
    async with AsyncExitStack() as stack:
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        targets = {"stdio": stdio_parameters(), "http": endpoint}
        raw = {transport: await stack.enter_async_context(Client(target, cache=None))
               for transport, target in targets.items()}
        fleet = await stack.enter_async_context(
            open_fleet(manifest.servers, base_dir=ROOT, state_dir=state_dir)
        )
        # mcp-run's requests carry its capabilities (elicitation) and log level: the server does
        # more for each. This raw client declares the same, through the SDK's own options.
        same = {transport: await stack.enter_async_context(
                    Client(target, cache=None, **fleet.connections[transport].requests.client_options()))
                for transport, target in targets.items()}
        catalog = ToolCatalog(manifest, fleet.connections, ROOT)
        paths: dict[str, dict[str, Call]] = {}
        for transport in TRANSPORTS:
            paths[transport] = _paths(raw[transport], same[transport], fleet.connections[transport], catalog,
                                      f"{transport}__echo")
            for path, call in paths[transport].items():
                await check_echo(f"{path} ({transport})", call)
        yield paths


def _paths(client: Client, same: Client, connection: Any, catalog: ToolCatalog, name: str) -> dict[str, Call]:
    entry = catalog.entries.get(name)
    if entry is None:
        raise BenchError(f"the catalog has no tool {name}: {sorted(catalog.entries)}")
    caller = ToolCaller(lambda: catalog)
    return {
        RAW: lambda: client.call_tool("echo", ARGUMENTS),
        SAME: lambda: same.call_tool("echo", ARGUMENTS),
        LAYER: lambda: connection.call_tool("echo", ARGUMENTS),
        NODE: lambda: caller.run_tool_call(tool_call(name, ARGUMENTS)),
        TOOL: lambda: entry.tool.ainvoke(tool_call(name, ARGUMENTS)),
    }
