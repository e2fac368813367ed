"""Context management (``context:``): every model request within the limit over a long thread,
tool calls never split from their results, old large results as references, summaries written
once and kept in the checkpoint (across a restart), and the thread itself never shortened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import scripted_model, server, write_manifest
from context_requests import assert_calls_have_their_results
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from runner import load_agent
from runner.agent.context import ContextWindow
from runner.agent.graph import build_graph
from runner.agent.turns import stream_turn
from runner.manifest.context import ContextSpec
from runner.models import ModelChain, ScriptedChatModel
from runner.store.checkpointers import open_checkpointer

pytestmark = pytest.mark.anyio

TURN_LIMIT = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio only


def request_tokens(request: list[BaseMessage], tools: list[Any]) -> int:
    """The request's size as LangChain counts it, whole (not from the window's per-message cache)."""
    return count_tokens_approximately(request, tools=tools)


# --------------------------------------------------------------------------- a long thread


async def test_a_200_turn_thread_with_large_tool_results_stays_under_a_small_context_limit(
    tmp_path: Path,
) -> None:
    turns = 200
    limit = 3000
    script: list[Any] = []
    for turn in range(turns):
        script += [{"tool_calls": [{"name": "demo__big_output", "args": {"chars": 2000}}]},
                   f"answer {turn}"]
    path = write_manifest(tmp_path, {"demo": server("demo", timeout="20s")},
                          model=scripted_model(tmp_path, script), checkpointer="memory",
                          context={"max_tokens": limit, "keep_last_turns": 2})
    events: list[dict[str, Any]] = []
    async with load_agent(path) as runtime:
        model = runtime.model.primary
        assert isinstance(model, ScriptedChatModel)
        for turn in range(turns):
            with anyio.fail_after(TURN_LIMIT):
                events += [event async for event in stream_turn(runtime, f"question {turn}")]
        tools = list(runtime.catalog.tools)
        state = (await runtime.graph.aget_state(runtime.config())).values
    assert len(model.received) == 2 * turns
    for request in model.received:
        assert isinstance(request[0], SystemMessage)
        assert request_tokens(request, tools) <= limit
        assert_calls_have_their_results(request)
    last = model.received[-1]
    assert last[-1].content == "0123456789" * 200  # the latest result is sent whole
    assert any("left out" in str(m.content) for m in last if isinstance(m, HumanMessage))
    # the thread keeps every message, every result in full
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(state["messages"]) == 4 * turns and len(results) == turns
    assert all(m.content == "0123456789" * 200 for m in results)
    fitted = [event for event in events if event["type"] == "context"]
    assert fitted and all(e["action"] == "trim" and e["limit"] == limit and e["tokens"] <= limit
                          and e["whole"] > limit for e in fitted)
    assert fitted[-1]["left_out"] > 0


# --------------------------------------------------------------------------- summaries


def chatty_turns(count: int, offset: int = 0) -> list[HumanMessage]:
    return [HumanMessage(f"question {offset + n}: " + "tell me more " * 30) for n in range(count)]


def summary_graph(model: Any, summarizer: ScriptedChatModel, checkpointer: Any, limit: int) -> Any:
    spec = ContextSpec(max_tokens=limit, strategy="summarize", keep_last_turns=2)
    window = ContextWindow(spec, limit, ModelChain(summarizer))
    return build_graph(model, tools_provider=lambda: [], system_prompt_provider=lambda: "Be brief.",
                       max_steps=5, checkpointer=checkpointer, context=window)


async def test_a_summary_is_written_once_and_reused_from_the_checkpoint_after_a_restart(
    tmp_path: Path,
) -> None:
    limit = 1200
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    thread = {"configurable": {"thread_id": "long"}}
    summarizer = ScriptedChatModel(["SUMMARY-ONE", "SUMMARY-TWO"])
    model = ScriptedChatModel([f"answer {n}" for n in range(40)])
    async with open_checkpointer(url, state_dir=tmp_path) as saver:
        graph = summary_graph(model, summarizer, saver, limit)
        asked = 0
        while not summarizer.received:  # turns until the first summary
            with anyio.fail_after(TURN_LIMIT):
                await graph.ainvoke({"messages": chatty_turns(1, asked)}, thread)
            asked += 1
        for message in chatty_turns(2, asked):  # later steps reuse it: no second summary yet
            with anyio.fail_after(TURN_LIMIT):
                await graph.ainvoke({"messages": [message]}, thread)
        asked += 2
        assert len(summarizer.received) == 1
        state = (await graph.aget_state(thread)).values
        summary = state["context_summary"]
        assert summary["text"] == "SUMMARY-ONE"
        covered = state["messages"][:summary["messages"]]
        assert covered[-1].id == summary["through"]
        prompt = str(summarizer.received[0][0].content)  # the covered span, none of the kept turns
        assert str(covered[-1].content) in prompt
        assert str(state["messages"][summary["messages"]].content) not in prompt
        assert len(state["messages"]) == 2 * asked  # the thread keeps what was summarized
    for request in model.received[asked - 3:]:
        assert "SUMMARY-ONE" in str(request[1].content)
        assert not any("question 0:" in str(m.content) for m in request)
        assert count_tokens_approximately(request) <= limit
    # a new process: a new graph and model over the same file; the summary comes from the checkpoint
    restarted_summarizer = ScriptedChatModel([])  # a call to it would fail: it has no turn
    restarted = ScriptedChatModel(["after the restart"])
    async with open_checkpointer(url, state_dir=tmp_path) as saver:
        graph = summary_graph(restarted, restarted_summarizer, saver, limit)
        with anyio.fail_after(TURN_LIMIT):
            state = await graph.ainvoke({"messages": chatty_turns(1, asked)}, thread)
    assert state["messages"][-1].content == "after the restart"
    assert restarted_summarizer.received == []
    assert "SUMMARY-ONE" in str(restarted.received[0][1].content)
    assert state["context_summary"] == summary


async def test_a_second_summary_rolls_up_the_first_with_the_turns_after_it() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    summarizer = ScriptedChatModel(["SUMMARY-ONE", "SUMMARY-TWO"])
    model = ScriptedChatModel([f"answer {n}" for n in range(60)])
    graph = summary_graph(model, summarizer, InMemorySaver(), 1200)
    thread = {"configurable": {"thread_id": "t"}}
    asked = 0
    while len(summarizer.received) < 2:
        assert asked < 60, "no second summary"
        with anyio.fail_after(TURN_LIMIT):
            state = await graph.ainvoke({"messages": chatty_turns(1, asked)}, thread)
        asked += 1
    second = str(summarizer.received[1][0].content)
    assert "SUMMARY-ONE" in second and "question 0:" not in second
    assert state["context_summary"]["text"] == "SUMMARY-TWO"
    assert state["context_summary"]["messages"] > 0


async def test_the_agents_own_model_summarizes_and_the_summary_is_not_streamed_as_its_answer(
    tmp_path: Path,
) -> None:
    script = [f"r{n}x" for n in range(40)]  # each reply is its own word: streamed or not, it shows
    path = write_manifest(tmp_path, {}, model=scripted_model(tmp_path, script), checkpointer="memory",
                          context={"max_tokens": 1200, "strategy": "summarize", "keep_last_turns": 2})
    events: list[dict[str, Any]] = []
    async with load_agent(path) as runtime:
        model = runtime.model.primary
        assert isinstance(model, ScriptedChatModel)
        for message in chatty_turns(12):
            with anyio.fail_after(TURN_LIMIT):
                events += [event async for event in stream_turn(runtime, str(message.content))]
        state = (await runtime.graph.aget_state(runtime.config())).values
    finals = [event["text"] for event in events if event["type"] == "final"]
    summaries = [text for text in script[:len(model.received)] if text not in finals]
    assert len(finals) == 12 and summaries  # the other calls wrote summaries
    assert state["context_summary"]["text"] == summaries[-1]
    fitted = [event for event in events if event["type"] == "context"]
    assert [event["written"] for event in fitted].count(True) == len(summaries)
    assert all(event["action"] == "summarize" and event["summarized"] > 0 for event in fitted)
    streamed = "".join(event["text"] for event in events if event["type"] == "token")
    assert not any(summary in streamed for summary in summaries)
