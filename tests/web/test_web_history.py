"""What the page shows of a thread's messages (``runner.web.threads.thread_history``), read from a
thread's state without starting an agent."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from runner.agent.nodes import NOT_RUN_TEXT
from runner.web.threads import thread_history


def runtime_with(messages: list[Any]) -> Any:
    """Just enough of a runtime for thread_history: one agent whose thread holds ``messages``."""
    async def aget_state(config: Any) -> Any:
        return SimpleNamespace(values={"messages": messages})

    return SimpleNamespace(agents={"main": SimpleNamespace(aget_state=aget_state)},
                           config=lambda thread, agent: {"configurable": {"thread_id": thread}},
                           catalog=SimpleNamespace(entries={}))


async def test_a_call_left_without_a_result_shows_as_not_run_though_an_earlier_turn_used_its_id() -> None:
    call = {"name": "notes__calculate", "args": {"expression": "6*7"}, "id": "same"}
    messages = [HumanMessage("a"), AIMessage("", tool_calls=[call]), ToolMessage("42", tool_call_id="same"),
                AIMessage("It is 42."), HumanMessage("b"), AIMessage("", tool_calls=[call]),
                HumanMessage("c"), AIMessage("Done.")]
    items = await thread_history(runtime_with(messages), "main", "t1")
    results = [(item["text"], item.get("stopped", False)) for item in items if item["type"] == "tool_result"]
    assert results == [("42", False), (NOT_RUN_TEXT, True)]
