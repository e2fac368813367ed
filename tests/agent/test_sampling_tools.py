"""Sampling with tools (2025-11-25): the tools a server's request carries are bound to the model
under provider-safe names, the model's calls go back as tool_use content, the tool results the
server sends next reach the model as tool messages; sampling calls count against max_steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from test_sampling import tool_text, turn, write_agent

from runner.agent.runtime import load_agent

pytestmark = pytest.mark.anyio


def forecast(choice: str = "auto") -> dict[str, Any]:
    return {"tool_calls": [{"name": "asking__forecast", "args": {"city": "Oslo", "choice": choice}}]}


async def test_the_tools_of_a_sampling_request_are_offered_and_their_results_reach_the_model(
    tmp_path: Path,
) -> None:
    script = [forecast(), {"tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}, "id": "w1"}]},
              "cold and sunny", "done"]
    path = write_agent(tmp_path, legacy=True, script=script, sampling="allow")
    async with load_agent(path) as runtime:
        events = await turn(runtime, "what is the weather in Oslo?")
        model = runtime.model.primary
    assert tool_text(events) == "forecast: cold and sunny"
    assert model.calls[1] == model.calls[2] == ["get_weather"]  # "get.weather" under a safe name
    *_, asked, answered = model.received[2]
    assert isinstance(asked, AIMessage)
    assert asked.tool_calls == [
        {"name": "get_weather", "args": {"city": "Oslo"}, "id": "w1", "type": "tool_call"}
    ]
    assert isinstance(answered, ToolMessage)
    assert (answered.tool_call_id, answered.content) == ("w1", "sunny in Oslo")


async def test_tool_choice_none_binds_no_tools_to_the_sampling_call(tmp_path: Path) -> None:
    path = write_agent(tmp_path, legacy=True, script=[forecast("none"), "mild", "done"], sampling="allow")
    async with load_agent(path) as runtime:
        events = await turn(runtime, "what is the weather in Oslo?")
        model = runtime.model.primary
    assert tool_text(events) == "forecast: mild"
    assert model.calls[1] == []


async def test_an_asked_sampling_request_shows_the_tools_it_offers(tmp_path: Path) -> None:
    path = write_agent(tmp_path, legacy=True, script=[forecast(), "mild", "done"], sampling="ask")
    async with load_agent(path) as runtime:
        events = await turn(runtime, "what is the weather in Oslo?")
    [question] = [event for event in events if event["type"] == "sampling"]
    assert question["tools"] == ["get.weather"]


def with_max_steps(path: Path, steps: int) -> Path:
    path.write_text(path.read_text() + f"agent: {{max_steps: {steps}}}\n")
    return path


async def test_completions_a_tool_takes_count_against_the_turns_max_steps(tmp_path: Path) -> None:
    call = {"tool_calls": [{"name": "asking__summarize", "args": {"text": "a cat"}}]}
    path = with_max_steps(write_agent(tmp_path, legacy=True, script=[call, "cat", "never said"],
                                      sampling="allow"), 2)
    async with load_agent(path) as runtime:
        events = await turn(runtime, "summarize it")
        received = runtime.model.primary.received
    assert tool_text(events) == "summary: cat"
    [final] = [event for event in events if event["type"] == "final"]
    assert final["reason"] == "max_steps"  # the agent's call and the completion: 2 of 2
    assert len(received) == 2


async def test_a_completion_beyond_the_turns_max_steps_is_refused_to_the_server(tmp_path: Path) -> None:
    call = {"tool_calls": [{"name": "asking__summarize", "args": {"text": "a cat"}}]}
    path = with_max_steps(write_agent(tmp_path, legacy=True, script=[call, "never said"],
                                      sampling="allow"), 1)
    async with load_agent(path) as runtime:
        events = await turn(runtime, "summarize it")
        received = runtime.model.primary.received
    [result] = [event for event in events if event["type"] == "tool_result"]
    assert result["status"] == "error" and "agent.max_steps" in result["text"]
    assert len(received) == 1


def test_the_chat_shows_the_tools_a_sampling_request_offers_before_it_is_sent(tmp_path: Path) -> None:
    from builders import chat_in_a_terminal

    write_agent(tmp_path, legacy=True, script=[forecast(), "mild", "done"])
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline("what is the weather in Oslo?")
        chat.expect("user: Forecast for Oslo?")
        chat.expect("tools offered: get.weather")
        chat.expect(r"send it to the model\? \[y\]es / \[n\]o: ")
        chat.sendline("y")
        chat.expect("forecast: mild")
        chat.expect("> ")


def test_the_sampling_request_shows_tool_calls_and_results_readably_without_null_fields() -> None:
    import mcp_types as types

    from runner.agent.sampling import sampling_request

    request = types.CreateMessageRequestParams(max_tokens=50, messages=[
        types.SamplingMessage(role="assistant", content=[types.ToolUseContent(
            type="tool_use", id="u1", name="weather", input={"city": "Paris"})]),
        types.SamplingMessage(role="user", content=[types.ToolResultContent(
            type="tool_result", tool_use_id="u1", content=[types.TextContent(type="text", text="sunny")])]),
    ])
    texts = [message["text"] for message in sampling_request("s", request)["messages"]]
    assert texts == ['[tool call weather {"city": "Paris"}]', "[tool result: sunny]"]
