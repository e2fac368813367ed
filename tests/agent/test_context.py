"""Context management (``context:``): every model request within the limit over a long thread,
tool calls never split from their results, old large results as references, summaries written
once and kept in the checkpoint (across a restart), and the thread itself never shortened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import scripted_model, server, write_manifest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from runner import load_agent
from runner.agent.context import ContextSummary, ContextWindow, context_window, window_limit
from runner.agent.graph import build_graph
from runner.agent.turns import stream_turn
from runner.manifest.context import ContextSpec
from runner.models import ModelChain, OfflineChatModel, ScriptedChatModel
from runner.store.checkpointers import open_checkpointer

pytestmark = pytest.mark.anyio

TURN_LIMIT = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio only


def request_tokens(request: list[BaseMessage], tools: list[Any]) -> int:
    """The request's size as LangChain counts it, whole (not from the window's per-message cache)."""
    return count_tokens_approximately(request, tools=tools)


def assert_calls_have_their_results(request: list[BaseMessage]) -> None:
    """Every tool call of a request is answered right after it, and every result has its call."""
    for index, message in enumerate(request):
        if isinstance(message, AIMessage) and message.tool_calls:
            following = request[index + 1:index + 1 + len(message.tool_calls)]
            assert [m.tool_call_id for m in following if isinstance(m, ToolMessage)] == [
                call["id"] for call in message.tool_calls], f"call split from its result at {index}"
        if isinstance(message, ToolMessage):
            asked = [m for m in request[:index] if isinstance(m, AIMessage)
                     and any(call["id"] == message.tool_call_id for call in m.tool_calls)]
            assert asked, f"a result without its call at {index}"


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


# --------------------------------------------------------------------------- the window alone


def tool_turn(index: int, result: str) -> list[BaseMessage]:
    call = {"name": "fetch", "args": {"n": index}, "id": f"call_{index}", "type": "tool_call"}
    return [HumanMessage(f"turn {index}", id=f"h{index}"),
            AIMessage("", tool_calls=[call], id=f"a{index}"),
            ToolMessage(result, tool_call_id=f"call_{index}", name="fetch", id=f"t{index}"),
            AIMessage(f"done {index}", id=f"d{index}")]


def trim_window(limit: int | None, keep: int = 1) -> ContextWindow:
    return ContextWindow(ContextSpec(max_tokens=limit, keep_last_turns=keep), limit)


@tool
def fetch(n: int) -> str:
    """Fetch item n."""
    return str(n)


async def test_a_request_under_the_limit_is_sent_as_the_thread_has_it() -> None:
    history = [m for index in range(3) for m in tool_turn(index, "small")]
    sent, summary = await trim_window(10_000).fit("Be brief.", [fetch], history, None, {})
    assert sent == history and summary is None


async def test_old_large_tool_results_are_sent_as_a_reference_and_the_thread_keeps_them() -> None:
    big = "x" * 4000
    history = [m for index in range(4) for m in tool_turn(index, big)]
    window = trim_window(2000, keep=1)
    sent, _ = await window.fit("Be brief.", [fetch], history, None, {})
    results = [m for m in sent if isinstance(m, ToolMessage)]
    assert results[-1].content == big  # the kept turn's result, whole
    older = results[:-1]
    assert older and all("left out of this request" in str(m.content) and m.id in str(m.content)
                         for m in older)
    assert all(m.content == big for m in history if isinstance(m, ToolMessage))  # untouched
    assert request_tokens([SystemMessage("Be brief."), *sent], [fetch]) <= 2000


async def test_a_tool_call_is_never_separated_from_its_results_when_turns_are_left_out() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="h")]
    for index in range(30):  # one long turn: many calls, each with two results
        calls = [{"name": "fetch", "args": {"n": index}, "id": f"c{index}{part}", "type": "tool_call"}
                 for part in "ab"]
        history += [AIMessage("", tool_calls=calls, id=f"a{index}")]
        history += [ToolMessage("y" * 300, tool_call_id=f"c{index}{part}", name="fetch", id=f"t{index}{part}")
                    for part in "ab"]
    for limit in range(400, 3000, 37):
        sent, _ = await trim_window(limit).fit("", [fetch], history, None, {})
        assert_calls_have_their_results(sent)
        assert request_tokens(sent, [fetch]) <= limit
        assert sent[-1] is history[-1] or sent[-1].id == history[-1].id


def test_the_counts_of_messages_are_kept_so_a_step_does_not_recount_the_history() -> None:
    window = trim_window(1000)
    history = [m for index in range(50) for m in tool_turn(index, "z" * 500)]
    window.measure("", [fetch], history, None)
    counted = len(window._counts)
    window.measure("", [fetch], history, None)
    assert len(window._counts) == counted  # nothing counted again
    assert counted <= len(history) + 50  # the messages, and the references made of old results


def test_the_limit_is_the_models_window_less_a_margin_else_none() -> None:
    profiled = ModelChain(OfflineChatModel(profile={"max_input_tokens": 100_000}))
    assert window_limit(ContextSpec(), profiled) == 85_000
    assert window_limit(ContextSpec(max_tokens=500), profiled) == 500
    assert window_limit(ContextSpec(), ModelChain(OfflineChatModel())) is None
    unlimited = context_window(ContextSpec(strategy="summarize"), ModelChain(OfflineChatModel()),
                               lambda model_id: pytest.fail("no other model"))
    assert unlimited.limit is None


async def test_a_summary_not_found_in_the_history_is_not_used() -> None:
    history = [m for index in range(10) for m in tool_turn(index, "w" * 800)]
    stale = ContextSummary(text="from elsewhere", through="gone", messages=4)
    sent, _ = await trim_window(1500).fit("", [fetch], history, stale, {})
    assert not any("from elsewhere" in str(m.content) for m in sent)
    assert trim_window(1500).measure("", [fetch], history, stale).summarized == 0


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
