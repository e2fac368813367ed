"""The graph's nodes and routes called alone, with a state and a config, outside any graph."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END
from langgraph.types import Send

from runner.agent.call_ledger import StartedCalls
from runner.agent.nodes import (
    APPROVE,
    MAX_STEPS_REASON,
    NOT_RUN_TEXT,
    TOOL,
    AgentState,
    Approvals,
    CallDispatch,
    ModelNode,
    ModelRoute,
    ToolNode,
    ToolTask,
)
from runner.models import ScriptedChatModel, as_model_chain

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def model_node(model: ScriptedChatModel, *, max_steps: int = 5, prompt: str = "Be brief.") -> ModelNode:
    return ModelNode(as_model_chain(model), lambda: [add], lambda: prompt, max_steps)


def request(*calls: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=[{"args": {}, **call} for call in calls])


async def test_the_model_node_sends_the_system_prompt_and_offers_the_tools_of_the_moment() -> None:
    model = ScriptedChatModel(["hello"])
    update = await model_node(model)(AgentState(messages=[HumanMessage("hi")]), {})
    assert [m.content for m in update["messages"]] == ["hello"]
    assert update["model_calls"] == 1  # a user message starts the count again
    assert model.calls == [["add"]]
    assert model.received[0][0] == SystemMessage("Be brief.")


async def test_the_model_node_counts_on_after_tool_results_and_stops_at_max_steps() -> None:
    model = ScriptedChatModel(["unused"])
    state = AgentState(messages=[HumanMessage("go"), request({"name": "add", "id": "c1"}),
                                 ToolMessage("3", tool_call_id="c1", name="add")], model_calls=2)
    update = await model_node(model, max_steps=2)(state, {})
    assert update["messages"][0].response_metadata["finish_reason"] == MAX_STEPS_REASON
    assert model.received == []  # the model is not called past the limit


async def test_the_model_node_closes_calls_left_without_results_before_calling_the_model() -> None:
    model = ScriptedChatModel(["ok"])
    state = AgentState(messages=[request({"name": "add", "id": "c1"}), HumanMessage("never mind")])
    await model_node(model, prompt="")(state, {})
    closing = [m for m in model.received[0] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content, m.status) for m in closing] == [("c1", NOT_RUN_TEXT, "error")]


def tool_node(**options: Any) -> ToolNode:
    return ToolNode(lambda: [add], StartedCalls(None), **options)


async def test_the_tool_node_runs_one_call_and_answers_with_its_result() -> None:
    task = ToolTask(call={"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}, steps_left=3)
    update = await tool_node()(task, {})
    [message] = update["messages"]
    assert (message.tool_call_id, message.content, message.status) == ("c1", "5", "success")


async def test_the_tool_node_answers_bad_arguments_and_unknown_tools_with_error_results() -> None:
    bad = await tool_node()(ToolTask(call={"name": "add", "args": {"a": "x"}, "id": "c1"}), {})
    unknown = await tool_node()(ToolTask(call={"name": "adds", "args": {}, "id": "c2"}), {})
    assert bad["messages"][0].status == "error"
    assert "add" in bad["messages"][0].content
    assert unknown["messages"][0].status == "error"
    assert "add" in unknown["messages"][0].content  # the near name is suggested


async def test_the_tool_node_asks_the_direct_call_first_and_falls_back_to_the_tool() -> None:
    async def direct(call: dict[str, Any]) -> ToolMessage | None:
        if call["name"] != "echo":
            return None
        return ToolMessage(f"echo {call['args']['text']}", tool_call_id=call["id"], name="echo")

    node = tool_node(direct_call=direct)
    echoed = await node(ToolTask(call={"name": "echo", "args": {"text": "hi"}, "id": "c1"}), {})
    added = await node(ToolTask(call={"name": "add", "args": {"a": 1, "b": 1}, "id": "c2"}), {})
    assert echoed["messages"][0].content == "echo hi"
    assert added["messages"][0].content == "2"


async def test_the_route_after_the_model_ends_the_turn_asks_or_goes_straight_to_the_calls() -> None:
    approvals = Approvals(lambda name: name.startswith("delete_"), lambda name, arguments: True)
    route = ModelRoute(approvals, CallDispatch(max_steps=4))
    assert await route(AgentState(messages=[AIMessage("done")])) == END
    asking = request({"name": "delete_file", "id": "c1"}, {"name": "add", "id": "c2"})
    assert await route(AgentState(messages=[asking])) == APPROVE
    sends = await route(AgentState(messages=[request({"name": "add", "id": "c1"})], model_calls=1))
    assert isinstance(sends, list)
    assert [(s.node, s.arg["call"]["id"]) for s in sends] == [(TOOL, "c1")]


async def test_the_dispatch_sends_one_task_per_unanswered_call_with_the_steps_left() -> None:
    dispatch = CallDispatch(max_steps=4)
    two = request({"name": "add", "id": "c1"}, {"name": "add", "id": "c2"})
    answered = ToolMessage("x", tool_call_id="c1", name="add")  # e.g. denied at the approval
    sends = await dispatch(AgentState(messages=[two, answered], model_calls=1))
    assert isinstance(sends, list)
    assert all(isinstance(s, Send) for s in sends)
    assert [(s.node, s.arg["call"]["id"], s.arg["steps_left"]) for s in sends] == [(TOOL, "c2", 3)]
    both = ToolMessage("y", tool_call_id="c2", name="add")
    assert await dispatch(AgentState(messages=[two, answered, both])) == "model"  # all answered


async def test_a_call_whose_arguments_do_not_fit_is_not_put_to_the_user() -> None:
    approvals = Approvals(lambda name: True, lambda name, arguments: "path" in arguments)
    assert approvals.asks({"name": "delete_file", "args": {"path": "a"}})
    assert not approvals.asks({"name": "delete_file", "args": {}})


async def test_a_call_left_without_a_result_is_closed_though_an_earlier_request_used_its_id() -> None:
    model = ScriptedChatModel(["ok"])
    earlier = [request({"name": "add", "id": "c1"}), ToolMessage("3", tool_call_id="c1", name="add"),
               AIMessage("three")]
    state = AgentState(messages=[*earlier, request({"name": "add", "id": "c1"}), HumanMessage("never mind")])
    await model_node(model, prompt="")(state, {})
    results = [(m.tool_call_id, m.content) for m in model.received[0] if isinstance(m, ToolMessage)]
    assert results == [("c1", "3"), ("c1", NOT_RUN_TEXT)]  # each request has a result for its call


async def test_the_dispatch_runs_a_call_whose_id_an_earlier_request_had_answered() -> None:
    earlier = [request({"name": "add", "id": "c1"}), ToolMessage("3", tool_call_id="c1", name="add"),
               AIMessage("three"), HumanMessage("again")]
    again = request({"name": "add", "id": "c1"})
    sends = await CallDispatch(max_steps=4)(AgentState(messages=[*earlier, again]))
    assert isinstance(sends, list)
    assert [(s.node, s.arg["call"]["id"]) for s in sends] == [(TOOL, "c1")]
