"""A server's request for input in the agent: an interrupt like approvals, in both eras.

The graph pauses with an ``elicitation`` event; resuming with the answer runs the tool again and
the server gets the answer (the tool's first attempt was cancelled). A bad value fails the resume
and the same question can be answered again; a checkpointed thread can be answered after reopening.
Non-interactive runs decline at once and the model is told.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import asking_agent
from langgraph.types import Command
from pydantic import ValidationError

from runner.agent.host import Host
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

ERAS = pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])


async def turn(runtime: Runtime, message: Any, thread_id: str | None = None) -> list[dict[str, Any]]:
    with anyio.fail_after(40):
        return [event async for event in stream_turn(runtime, message, thread_id=thread_id)]


def accept(content: dict[str, Any]) -> Command:
    return Command(resume={"action": "accept", "content": content})


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


@ERAS
async def test_a_form_interrupts_the_turn_and_the_answer_completes_the_call(
    tmp_path: Path, legacy: bool
) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=legacy)) as runtime:
        events = await turn(runtime, "asking__book")
        [question] = of_type(events, "elicitation")
        assert question["server"] == "asking" and question["mode"] == "form"
        assert question["message"] == "Which day, for how many?"
        assert question["schema"]["required"] == ["date"]
        assert of_type(events, "final") == []
        events = await turn(runtime, Command(resume={"action": "accept", "content": {"date": "friday"}}))
    [result] = of_type(events, "tool_result")
    assert result["text"] == "booked friday for 2"


@ERAS
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_declining_or_cancelling_a_form_is_what_the_server_hears(
    tmp_path: Path, legacy: bool, action: str
) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=legacy)) as runtime:
        await turn(runtime, "asking__book")
        events = await turn(runtime, Command(resume={"action": action}))
    [result] = of_type(events, "tool_result")
    assert result["text"] == f"not booked: the user chose {action}"


async def test_an_invalid_value_fails_the_resume_and_the_question_can_be_answered_again(
    tmp_path: Path,
) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        await turn(runtime, "asking__book")
        with pytest.raises(ValidationError, match="seats"):
            await turn(runtime, accept({"date": "x", "seats": 0}))
        state = await runtime.graph.aget_state(runtime.config())
        assert [i.value["type"] for i in state.interrupts] == ["elicitation"]
        events = await turn(runtime, accept({"date": "x", "seats": 4}))
    assert of_type(events, "tool_result")[0]["text"] == "booked x for 4"


async def test_a_url_request_carries_the_url_and_the_answer_reaches_the_server(tmp_path: Path) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        [question] = of_type(await turn(runtime, "asking__visit"), "elicitation")
        assert question["mode"] == "url" and question["url"] == "https://calendar.example/sign-in"
        events = await turn(runtime, Command(resume={"action": "accept"}))
    assert of_type(events, "tool_result")[0]["text"] == "visit: accept"


async def test_a_checkpointed_thread_is_answered_after_reopening_the_agent(tmp_path: Path) -> None:
    path = asking_agent(tmp_path, legacy=True, checkpointer="sqlite:///state.sqlite")
    async with load_agent(path, thread_id="booking") as runtime:
        assert of_type(await turn(runtime, "asking__book"), "elicitation")
    async with load_agent(path, thread_id="booking") as runtime:
        events = await turn(runtime, Command(resume={"action": "accept", "content": {"date": "monday"}}))
    assert of_type(events, "tool_result")[0]["text"] == "booked monday for 2"


@ERAS
async def test_a_non_interactive_run_declines_at_once_and_tells_the_model(
    tmp_path: Path, legacy: bool
) -> None:
    declining = Host(answers_questions=False)
    async with load_agent(asking_agent(tmp_path, legacy=legacy), host=declining) as runtime:
        events = await turn(runtime, "asking__book")
    assert of_type(events, "elicitation") == []
    [result] = of_type(events, "tool_result")
    assert result["text"].startswith("not booked: the user chose decline")
    assert '"Which day, for how many?"' in result["text"] and "declined" in result["text"]
    assert of_type(events, "final")
