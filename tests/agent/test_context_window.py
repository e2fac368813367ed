"""The context window alone (:class:`runner.agent.context.ContextWindow`): a request under the
limit goes as it is, old large results become references, a tool call stays with its results
whatever the limit, counts are kept per message, the default limit comes from the model's profile."""

from __future__ import annotations

import pytest
from context_requests import assert_calls_have_their_results
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from runner.agent.context import ContextSummary, ContextWindow, context_window, window_limit
from runner.manifest.context import ContextSpec
from runner.models import ModelChain, OfflineChatModel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"



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
    assert count_tokens_approximately([SystemMessage("Be brief."), *sent], tools=[fetch]) <= 2000


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
        assert count_tokens_approximately(sent, tools=[fetch]) <= limit
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
    smaller = OfflineChatModel(profile={"max_input_tokens": 10_000})
    smaller_fallback = ModelChain(OfflineChatModel(profile={"max_input_tokens": 100_000}),
                                  [smaller, OfflineChatModel()])
    assert window_limit(ContextSpec(), smaller_fallback) == 8_500
    unlimited = context_window(ContextSpec(strategy="summarize"), ModelChain(OfflineChatModel()),
                               lambda model_id: pytest.fail("no other model"))
    assert unlimited.limit is None


async def test_a_summary_not_found_in_the_history_is_not_used() -> None:
    history = [m for index in range(10) for m in tool_turn(index, "w" * 800)]
    stale = ContextSummary(text="from elsewhere", through="gone", messages=4)
    sent, _ = await trim_window(1500).fit("", [fetch], history, stale, {})
    assert not any("from elsewhere" in str(m.content) for m in sent)
    assert trim_window(1500).measure("", [fetch], history, stale).summarized == 0


async def test_the_offline_models_calls_run_at_every_turn_of_a_trimmed_thread() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from runner.agent.graph import build_graph

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    window = ContextWindow(ContextSpec(max_tokens=400, keep_last_turns=1), 400)
    graph = build_graph(OfflineChatModel(), tools_provider=lambda: [add], system_prompt_provider=lambda: "",
                        max_steps=5, checkpointer=InMemorySaver(), context=window)
    thread = {"configurable": {"thread_id": "t"}}
    for n in range(15):  # trimmed requests come back to the same lengths: the call ids must not
        state = await graph.ainvoke({"messages": [HumanMessage(f'add {{"a": {n}, "b": {n}}}')]}, thread)
        assert state["messages"][-1].content == f"add returned: {2 * n}"
    ids = [call["id"] for m in state["messages"] if isinstance(m, AIMessage) for call in m.tool_calls]
    assert len(set(ids)) == 15
