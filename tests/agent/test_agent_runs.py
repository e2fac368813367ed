"""What a turn says of the runs of the agents of ``agents:`` when a question stops one and its
answer resumes it: in process over the bundled notes server, and in the JSON chat with a server
that asks; scripted models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_teams import call, write_team
from builders import JsonChat, server
from child_processes import ChildProcessGuard
from langgraph.types import Command

from runner.agent.host import Host
from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn

pytestmark = pytest.mark.anyio


async def test_an_agent_resumed_by_an_answer_is_told_started_once_and_its_events_still_name_it(
    tmp_path: Path,
) -> None:
    path = write_team(
        tmp_path, [call("pipeline", task="6*7"), "Done."],
        {"clerk": {"description": "Computes.", "tools": ["notes"], "approve": ["notes__*"]},
         "pipeline": {"description": "The clerk alone.", "chain": ["clerk"]}},
        scripts={"clerk": [call("notes__calculate", expression="6*7"), "42"]},
        agent={"agents": ["pipeline"]})
    events: list[dict[str, Any]] = []
    with anyio.fail_after(90):
        async with load_agent(path, host=Host(answers_questions=False)) as runtime:
            events += [event async for event in stream_turn(runtime, "go", thread_id="t")]
            assert events[-1]["type"] == "approval" and events[-1]["agent"] == "clerk"
            resume = Command(resume={"action": "approve"})
            events += [event async for event in stream_turn(runtime, resume, thread_id="t")]
    started = [(e["agent"], e["caller"]) for e in events if e["type"] == "agent"]
    assert started == [("pipeline", "main"), ("clerk", "pipeline")]
    results = [(e["name"], e.get("agent"), e["text"]) for e in events if e["type"] == "tool_result"]
    assert results == [("notes__calculate", "clerk", "42"), ("pipeline", None, "42")]
    assert events[-1]["type"] == "final" and events[-1]["text"] == "Done."


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_server_form_three_levels_down_is_answered_in_the_json_chat_and_resumes_the_step(
    tmp_path: Path, era: str
) -> None:
    # main -> the editor agent -> the pipeline workflow -> its step, the booker, whose server asks.
    asking = server("asking", *(["--legacy"] if era == "legacy" else []), timeout="20s")
    write_team(
        tmp_path, [call("editor", task="Book a table"), "Main: booked."],
        {"editor": {"description": "Edits.", "agents": ["pipeline"]},
         "pipeline": {"description": "Books.", "chain": ["booker"]},
         "booker": {"description": "Books tables.", "tools": ["asking__book"]}},
        scripts={"editor": [call("pipeline", task="Book it"), "Editor: done."],
                 "booker": [call("asking__book"), "Booker: booked."]},
        servers={"asking": asking}, agent={"agents": ["editor"]}, checkpointer="sqlite:///state.sqlite")
    guard = ChildProcessGuard()
    chat = JsonChat(tmp_path)
    try:
        chat.wait_for("ready")
        chat.send({"text": "go"})
        question = chat.wait_for("elicitation")
        assert (question["server"], question["agent"]) == ("asking", "booker")
        chat.send({"action": "accept", "content": {"date": "sunday"}})
        assert chat.wait_for("final")["text"] == "Main: booked."
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)
    assert guard.leftovers() == []  # the servers stopped with the chat
    started = [(e["agent"], e["caller"]) for e in chat.seen if e["type"] == "agent"]
    assert started == [("editor", "main"), ("pipeline", "editor"), ("booker", "pipeline")]
    results = {(e["name"], e.get("agent")): e["text"] for e in chat.seen if e["type"] == "tool_result"}
    assert results == {("asking__book", "booker"): "booked sunday for 2",
                       ("pipeline", "editor"): "Booker: booked.", ("editor", None): "Editor: done."}
