"""Row 4d: what context management (``context:``) costs one model step on a 200-turn thread.

The thread: 200 turns, each a user message, a tool call, its 2,000-character result and an
answer (800 messages, ids as the checkpointer gives them), with the tools of a small server. Each
measured step is :meth:`runner.agent.context.ContextWindow.fit` on the thread grown by one message
(as the next step of a turn sees it: what it has counted before, and one new message), with no
limit (the floor: one pass over cached counts) and with ``strategy: trim`` under a limit the thread
is far past (old results shortened, the oldest turns left out). The metric is the median time of a
step; nothing else (the model, the checkpointer) is in it.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from bench.harness import BenchError, Case, Goal, Settings
from bench.stats import Metrics
from runner.agent.context import ContextWindow
from runner.manifest.context import ContextSpec

NO_LIMIT = "no limit (context unset)"
TRIMMED = "strategy: trim, max_tokens 8000"
LIMIT = 8000
STEP_GOAL = Goal("context management with trim <= 10 ms per step on a 200-turn thread", 10.0, metric="ms")


def thread(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for turn in range(turns):
        call = {"name": "demo__big_output", "args": {"chars": 2000}, "id": f"call_{turn}",
                "type": "tool_call"}
        messages += [HumanMessage(f"question {turn}", id=uuid.uuid4().hex),
                     AIMessage("", tool_calls=[call], id=uuid.uuid4().hex),
                     ToolMessage("0123456789" * 200, tool_call_id=f"call_{turn}", name="demo__big_output",
                                 id=uuid.uuid4().hex),
                     AIMessage(f"answer {turn}", id=uuid.uuid4().hex)]
    return messages


def server_tools() -> list[BaseTool]:
    @tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool
    def big_output(chars: int) -> str:
        """Return chars characters of text."""
        return "x" * chars

    return [echo, add, big_output]


@asynccontextmanager
async def context_suite(settings: Settings) -> AsyncIterator[list[Case]]:
    turns = min(200, settings.long_thread_turns)
    history = thread(turns)
    tools = server_tools()
    windows = {NO_LIMIT: ContextWindow(ContextSpec(), None),
               TRIMMED: ContextWindow(ContextSpec(max_tokens=LIMIT), LIMIT)}
    cases = []
    for path, window in windows.items():
        await steps(window, history, tools, 1, limited=window.limit is not None)  # checked first
        floor, goals = (None, ()) if window.limit is None else (NO_LIMIT, (STEP_GOAL,))
        cases.append(Case(f"4d. context management per model step, {turns}-turn thread", path,
                          lambda w=window: steps(w, history, tools, settings.calls, w.limit is not None),
                          "ms", floor, goals))
    yield cases


async def steps(window: ContextWindow, history: list[BaseMessage], tools: list[Any], count: int,
                limited: bool) -> Metrics:
    """``count`` steps, each on the thread plus one new message; the median ms of a step."""
    times = []
    for step in range(count):
        grown = [*history, HumanMessage(f"step {step}", id=uuid.uuid4().hex)]
        started = time.perf_counter()
        sent, _ = await window.fit("You are a helpful assistant.", tools, grown, None, {})
        times.append((time.perf_counter() - started) * 1000)
        if limited and sent == grown:
            raise BenchError("the trimmed thread was sent whole: the limit did not apply")
    return {"ms": statistics.median(times), "max_ms": max(times), "messages": float(len(history) + 1)}
