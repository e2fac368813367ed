"""What a turn says of the runs of the agents of ``agents:`` when a question stops one and its
answer resumes it: run in process over the bundled notes server, with scripted models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_teams import call, write_team
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
