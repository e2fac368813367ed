"""Rows 5 and 6: what the agent adds around a tool call, and how fast edits and list changes land.

Row 5 runs real turns (``load_agent`` on a manifest, the scripted model: one tool call, then an
answer) and subtracts the tool call itself - the call as the graph's tool node makes it
(``ToolCatalog.run_tool_call``), timed in the same round - from the turn. The peer is LangChain's
``create_agent`` given the same catalog's LangChain tools, the same scripted model and a memory
checkpointer; its overhead subtracts the tool's own ``ainvoke`` (what its ToolNode runs). Row 6
times ``reload_runtime`` for a prompt-only edit and
for an edit of one server's settings (against a raw start of one server), and a tools/list_changed
until the new tool is in the catalog (against one raw tools/list round trip).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import yaml
from langchain_core.messages import ToolMessage
from mcp import Client

from bench.calls import tool_call
from bench.harness import BenchError, Case, Goal, Settings
from bench.launch import stdio_entry, stdio_parameters
from bench.startup import raw_start
from bench.stats import Call, Metrics, elapsed_ms, median_ms, percentile
from runner.agent.reload import reload_runtime
from runner.agent.runtime import Runtime, load_agent
from runner.servers.offerings import DEBOUNCE_QUIET

TURN_ROW = "5. agent step overhead: one turn with one tool call, minus the call"
PROMPT_ROW = "6a. reload: prompt-only edit -> new generation live"
SERVER_ROW = "6b. reload: one-server edit -> restarted server live"
CHANGED_ROW = "6c. tools/list_changed -> new tool in the catalog"
CHANGE_TIMEOUT = 30.0
MEMORY_TURN = "mcp-run graph turn (memory checkpointer)"
CREATE_AGENT = "LangChain create_agent turn (memory checkpointer, same tools and model)"
SQLITE_GOAL = Goal("turn overhead with the SQLite checkpointer <= 1.5× the in-memory one", 1.5)
PROMPT_GOAL = Goal("prompt-only reload <= 100 ms", 100.0, metric="ms")
CHANGED_GOAL = Goal("list_changed -> new tool visible <= 2× one tools/list round trip", 2.0)
LIST_FLOOR = "raw tools/list round trip (floor)"


def write_manifest(folder: Path, servers: dict[str, Any], **top: Any) -> Path:
    document = {"version": 1, "name": "bench-agent", "servers": servers, **top}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def turn_script(turns: int) -> list[Any]:
    """``turns`` scripted turns: call ``bench__echo``, then answer."""
    one_turn = [{"tool_calls": [{"name": "bench__echo", "args": {"text": "ping"}}]}, "done"]
    return one_turn * turns


@asynccontextmanager
async def agent_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    async with AsyncExitStack() as stack:
        cases = []
        for checkpointer in ("memory", "sqlite"):
            home = folder / f"turns-{checkpointer}"
            home.mkdir()
            turns = (settings.agent_turns + 1) * settings.rounds + 1
            (home / "script.yaml").write_text(yaml.safe_dump(turn_script(turns)))
            path = write_manifest(home, {"bench": stdio_entry()},
                                  model={"id": "scripted", "script": "script.yaml"},
                                  checkpointer="memory" if checkpointer == "memory" else None)
            runtime = await stack.enter_async_context(load_agent(path))
            await check_turn(runtime)
            sqlite = checkpointer == "sqlite"
            cases.append(Case(TURN_ROW, f"mcp-run graph turn ({checkpointer} checkpointer)",
                              lambda runtime=runtime: turn_overhead(runtime, slice_turns(settings)),
                              "overhead_ms", MEMORY_TURN if sqlite else None,
                              (SQLITE_GOAL,) if sqlite else (), settings.latency_slices, combined_overhead))
            if not sqlite:
                cases.append(await create_agent_case(runtime, settings))
        cases += await stack.enter_async_context(reload_suite(settings, folder / "reload"))
        yield cases


def slice_turns(settings: Settings) -> int:
    """Turns of one slice: row 5's cases are interleaved slice by slice, as latency cases are."""
    return max(settings.agent_turns // settings.latency_slices, 1)


async def check_turn(runtime: Runtime) -> None:
    result = await runtime.graph.ainvoke({"messages": [("user", "go")]}, runtime.config(uuid.uuid4().hex))
    _check_messages(result["messages"])


def _check_messages(messages: list[Any]) -> None:
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    if len(tools) != 1 or tools[0].status != "success" or "ping" not in str(tools[0].content):
        raise BenchError(f"the benchmark turn did not call bench__echo: {messages}")


async def turn_overhead(runtime: Runtime, turns: int) -> dict[str, Any]:
    return await _overhead(
        lambda: runtime.caller.run_tool_call(tool_call("bench__echo", {"text": "ping"})),
        lambda: runtime.graph.ainvoke({"messages": [("user", "go")]}, runtime.config(uuid.uuid4().hex)),
        turns,
    )


async def _overhead(call: Call, turn: Call, turns: int) -> dict[str, Any]:
    """One slice of ``turns`` turns and tool calls, timed alternately (pooled by
    :func:`combined_overhead`)."""
    tool_times, turn_times = [], []
    for _ in range(turns):
        started = time.perf_counter()
        await call()
        tool_times.append(elapsed_ms(started))
        started = time.perf_counter()
        await turn()
        turn_times.append(elapsed_ms(started))
    return {"tool_samples_ms": tool_times, "turn_samples_ms": turn_times}


def combined_overhead(slices: list[dict[str, Any]]) -> Metrics:
    """A turn's p50 minus its tool call's p50, over every slice's samples."""
    turn_times = [sample for part in slices for sample in part["turn_samples_ms"]]
    tool_times = [sample for part in slices for sample in part["tool_samples_ms"]]
    turn, tool_p50 = percentile(turn_times, 0.5), percentile(tool_times, 0.5)
    return {"overhead_ms": turn - tool_p50, "turn_p50_ms": turn, "tool_p50_ms": tool_p50,
            "turn_p99_ms": percentile(turn_times, 0.99)}


async def create_agent_case(runtime: Runtime, settings: Settings) -> Case:
    """LangChain's own agent over the runtime's tools, with a scripted model of its own."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from runner.models.builtin import ScriptedChatModel

    turns = (settings.agent_turns + 1) * settings.rounds + 1
    model = ScriptedChatModel(turn_script(turns))
    tool = runtime.catalog.entries["bench__echo"].tool
    # Every tool the mcp-run turn offers its model, not only the one called: binding and offering
    # them is part of each model step.
    agent = create_agent(model, runtime.catalog.tools, checkpointer=InMemorySaver())

    async def turn() -> Any:
        return await agent.ainvoke({"messages": [("user", "go")]},
                                   {"configurable": {"thread_id": uuid.uuid4().hex}})

    _check_messages((await turn())["messages"])

    async def overhead() -> Metrics:
        return await _overhead(lambda: tool.ainvoke(tool_call("bench__echo", {"text": "ping"})), turn,
                               slice_turns(settings))

    return Case(TURN_ROW, CREATE_AGENT, overhead, "overhead_ms", MEMORY_TURN,
                slices=settings.latency_slices, combine=combined_overhead)


@asynccontextmanager
async def reload_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    folder.mkdir()  # noqa: ASYNC240 (set-up, before anything is timed)
    template = folder / "system.md.j2"
    template.write_text("You are version 0.")
    servers = {"a": stdio_entry(), "b": stdio_entry(env={"BENCH_GENERATION": "0"})}
    top = {"model": {"id": "offline"}, "prompts": {"system": "system.md.j2"}, "checkpointer": "memory"}
    path = write_manifest(folder, servers, **top)
    generation = 0
    async with AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(load_agent(path))
        raw = await stack.enter_async_context(Client(stdio_parameters(), cache=None))

        async def prompt_edit() -> Metrics:
            nonlocal generation
            samples = []
            for _ in range(settings.reloads):
                generation += 1
                text = f"You are version {generation}."
                template.write_text(text)
                started = time.perf_counter()
                await reload_runtime(runtime, changed_files={template})
                samples.append(elapsed_ms(started))
                if runtime.system_prompt() != text:
                    raise BenchError(f"after the reload the prompt is {runtime.system_prompt()!r}")
            return {"ms": statistics.median(samples)}

        async def server_edit() -> Metrics:
            nonlocal generation
            samples = []
            for _ in range(settings.reloads):
                generation += 1
                servers["b"] = stdio_entry(env={"BENCH_GENERATION": str(generation)})
                write_manifest(folder, servers, **top)
                started = time.perf_counter()
                report = await reload_runtime(runtime)
                samples.append(elapsed_ms(started))
                if report.restarted != ["b"] or runtime.fleet.connections["b"].status != "ready" \
                        or "b__echo" not in runtime.catalog.entries:
                    raise BenchError(f"the server edit did not restart b alone: {report.summary()}")
            return {"ms": statistics.median(samples)}

        async def raw_one_start() -> Metrics:
            return {"ms": statistics.median([(await raw_start(1))["ms"] for _ in range(settings.reloads)])}

        async def list_changed() -> Metrics:
            samples, from_call = [], []
            for _ in range(settings.reloads):
                # A single change: one arriving within DEBOUNCE_QUIET of the last re-list belongs
                # to that burst and waits for it to go quiet (ChangeSignal).
                await anyio.sleep(DEBOUNCE_QUIET * 1.5)
                name = f"added_{uuid.uuid4().hex[:8]}"
                samples_pair = await _time_list_changed(runtime, name)
                samples.append(samples_pair[0])
                from_call.append(samples_pair[1])
            return {"ms": statistics.median(samples), "from_call_start_ms": statistics.median(from_call)}

        async def list_round_trip() -> Metrics:
            return {"ms": await median_ms(raw.list_tools, max(settings.reloads, 3))}

        yield [
            Case(PROMPT_ROW, "mcp-run reload_runtime", prompt_edit, "ms", goals=(PROMPT_GOAL,)),
            Case(SERVER_ROW, "raw mcp.Client start of one server (floor)", raw_one_start, "ms"),
            Case(SERVER_ROW, "mcp-run reload_runtime", server_edit, "ms",
                 "raw mcp.Client start of one server (floor)"),
            Case(CHANGED_ROW, LIST_FLOOR, list_round_trip, "ms"),
            Case(CHANGED_ROW, "mcp-run supervisor -> catalog", list_changed, "ms", LIST_FLOOR,
                 (CHANGED_GOAL,)),
        ]


async def _time_list_changed(runtime: Runtime, name: str) -> tuple[float, float]:
    """Add tool ``name`` on server ``a``; ms from the call's answer (the notification has been
    sent by then) and from the call's start until the catalog holds ``a__<name>``."""
    arrived = anyio.Event()
    seen_at = 0.0

    def listener(change: Any) -> None:
        nonlocal seen_at
        if f"a__{name}" in runtime.catalog.entries and not arrived.is_set():
            seen_at = time.perf_counter()
            arrived.set()

    runtime.listeners.append(listener)
    try:
        with anyio.fail_after(CHANGE_TIMEOUT):
            called = time.perf_counter()
            await runtime.fleet.connections["a"].call_tool("add_tool", {"name": name})
            answered = time.perf_counter()
            await arrived.wait()
    finally:
        runtime.listeners.remove(listener)
    return (max(seen_at - answered, 0.0) * 1000, (seen_at - called) * 1000)
