"""Rows 7a-7b: the agent served over MCP (``mcp-run serve --http``) against the same turn in process.

One manifest (the offline model, the benchmark server over stdio, a memory checkpointer) runs
twice: in this process (``load_agent`` + ``stream_turn``, what ``serve`` runs per call) and as an
``mcp-run serve --http 127.0.0.1:0`` subprocess that an ``mcp.Client`` calls over streamable
HTTP. Each turn is one tool call (``bench__echo``) and the model's report of it.

- 7a: one turn at a time. The served path times served and in-process turns interleaved, and
  reports their p50 difference (``overhead_ms``: what MCP, HTTP and the serve layer add).
- 7b: turns per second with 1, 8 and 32 conversations at once, each on its own thread.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import yaml
from mcp import Client

from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import announcing_process, stdio_entry
from bench.stats import elapsed_ms, latency_metrics, percentile, run_concurrently
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

LATENCY_ROW = "7a. served turn over MCP/HTTP vs the same turn in process"
IN_PROCESS = "in process: load_agent + stream_turn (floor)"
SERVED = "mcp-run serve --http: mcp.Client call_tool ask"
MESSAGE = "/call bench__echo " + json.dumps({"text": "ping"})
ANSWER = "bench__echo returned: ping"
SERVE_START_TIMEOUT = 90.0
OVERHEAD_GOAL = Goal("served turn p50 overhead <= 5 ms over the same turn in process", 5.0,
                     metric="overhead_ms")
LISTENING = re.compile(r"serving '.*' on (http://\S+)")


def throughput_row(concurrency: int) -> str:
    return f"7b. served turns/s, c={concurrency}"


def write_served_manifest(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    document = {"version": 1, "name": "bench-served", "model": "offline", "checkpointer": "memory",
                "servers": {"bench": stdio_entry()}}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@asynccontextmanager
async def served_agent(manifest: Path, *options: str) -> AsyncIterator[str]:
    """``mcp-run serve MANIFEST --http 127.0.0.1:0 OPTIONS`` in a subprocess; yields its MCP URL."""
    async with served_process(manifest, *options) as (url, _):
        yield url


@asynccontextmanager
async def served_process(manifest: Path, *options: str) -> AsyncIterator[tuple[str, int]]:
    """:func:`served_agent`, yielding its MCP URL and the serve process's id."""
    command = [sys.executable, "-m", "runner", "serve", str(manifest), "--http", "127.0.0.1:0", *options]
    async with announcing_process(command, LISTENING, "mcp-run serve", SERVE_START_TIMEOUT) as (url, pid):
        yield url, pid


async def in_process_turn(runtime: Runtime, thread: str) -> str:
    final = ""
    async for event in stream_turn(runtime, MESSAGE, thread_id=thread):
        if event["type"] == "final":
            final = event["text"]
    return final


async def served_turn(client: Client, thread: str) -> str:
    result = await client.call_tool("ask", {"message": MESSAGE, "thread": thread})
    if result.is_error:
        raise BenchError(f"the served turn failed: {result.content}")
    text = result.content[0]
    return text.text if isinstance(text, types.TextContent) else ""


async def check(answer: str, path: str) -> None:
    if answer != ANSWER:
        raise BenchError(f"{path}: the turn answered {answer!r} instead of {ANSWER!r}")


@asynccontextmanager
async def serving_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    manifest = write_served_manifest(folder / "served")
    async with AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(load_agent(manifest))
        url = await stack.enter_async_context(served_agent(manifest))
        client = await stack.enter_async_context(Client(url, cache=None))
        await check(await in_process_turn(runtime, uuid.uuid4().hex), IN_PROCESS)
        await check(await served_turn(client, uuid.uuid4().hex), SERVED)
        turns = settings.agent_turns

        async def in_process() -> dict[str, float]:
            samples = []
            for _ in range(turns):
                started = time.perf_counter()
                await in_process_turn(runtime, uuid.uuid4().hex)
                samples.append(elapsed_ms(started))
            return latency_metrics(samples)

        async def served() -> dict[str, float]:
            local, remote = [], []
            for _ in range(turns):  # interleaved, so both see the same machine
                started = time.perf_counter()
                await in_process_turn(runtime, uuid.uuid4().hex)
                local.append(elapsed_ms(started))
                started = time.perf_counter()
                await served_turn(client, uuid.uuid4().hex)
                remote.append(elapsed_ms(started))
            metrics = latency_metrics(remote)
            metrics["in_process_p50_ms"] = percentile(local, 0.5)
            metrics["overhead_ms"] = metrics["p50_ms"] - metrics["in_process_p50_ms"]
            return metrics

        cases = [Case(LATENCY_ROW, IN_PROCESS, in_process, "p50_ms"),
                 Case(LATENCY_ROW, SERVED, served, "p50_ms", IN_PROCESS, (OVERHEAD_GOAL,))]
        for concurrency in settings.concurrency:
            cases += _throughput_cases(settings, runtime, client, concurrency)
        yield cases


def conversations(turn: Any) -> Any:
    """A call for ``run_concurrently`` that runs ``turn(thread)``, each worker on a thread of its own."""
    threads: dict[int, str] = {}

    async def one_turn() -> None:
        key = anyio.get_current_task().id
        thread = threads.setdefault(key, uuid.uuid4().hex)
        await turn(thread)

    return one_turn


def _throughput_cases(settings: Settings, runtime: Runtime, client: Client, concurrency: int) -> list[Case]:
    """Turns/s with ``concurrency`` conversations at once: each worker keeps its own thread."""
    total = max(settings.throughput_calls // 4, concurrency)

    async def in_process() -> dict[str, float]:
        return as_turns(await run_concurrently(conversations(lambda thread: in_process_turn(runtime, thread)),
                                               total, concurrency))

    async def served() -> dict[str, float]:
        return as_turns(await run_concurrently(conversations(lambda thread: served_turn(client, thread)),
                                               total, concurrency))

    row = throughput_row(concurrency)
    many = f"{concurrency} conversation{'s' if concurrency != 1 else ''}"
    floor = f"in process, {many} (floor)"
    return [Case(row, floor, in_process, "turns_per_s"),
            Case(row, f"mcp-run serve --http, {many}", served, "turns_per_s", floor)]


def as_turns(metrics: dict[str, float]) -> dict[str, float]:
    """``run_concurrently``'s metrics where each call is a whole turn: rates in turns per second."""
    rest = {key: value for key, value in metrics.items() if key != "calls_per_s"}
    return {"turns_per_s": metrics["calls_per_s"], **rest}
