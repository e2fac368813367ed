"""A call whose arguments do not fit its tool's input schema is not put to the user for approval:
the agent answers the model with the arguments error, and `mcp-run call` refuses it before asking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import scripted_model, server, write_manifest
from langgraph.types import Command

from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn

pytestmark = pytest.mark.anyio



@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio only


def write_agent(folder: Path, script: list[Any]) -> Path:
    """The demo server with `echo` under tools.approve, and a scripted model."""
    demo = server("demo", tools={"approve": ["echo"]})
    return write_manifest(folder, {"demo": demo}, name="approving", checkpointer="memory",
                          model=scripted_model(folder, script))


async def test_a_call_with_invalid_arguments_is_not_asked_and_the_model_hears_the_problems(
        tmp_path: Path) -> None:
    script = [
        {"tool_calls": [{"name": "demo__echo", "args": {"txt": "x"}, "id": "bad"}]},
        {"tool_calls": [{"name": "demo__echo", "args": {"text": "x"}, "id": "good"}]},
        "done",
    ]
    async with load_agent(write_agent(tmp_path, script)) as runtime:
        with anyio.fail_after(40):
            first = [event async for event in stream_turn(runtime, "echo x")]
            # the retry with valid arguments is asked; approving it runs it
            second = [event async for event in stream_turn(runtime, Command(resume={"action": "approve"}))]
    approvals = [event for event in first if event["type"] == "approval"]
    [refused] = [event for event in first if event["type"] == "tool_result"]
    assert [approval["id"] for approval in approvals] == ["good"]
    assert refused["id"] == "bad" and refused["status"] == "error"
    assert "(arguments): 'text' is a required property" in refused["text"]
    assert "Fix all of them and call the tool again." in refused["text"]
    [ran] = [event for event in second if event["type"] == "tool_result"]
    assert ran["id"] == "good" and ran["status"] == "success" and ran["text"] == "x"
    assert second[-1] == {**second[-1], "type": "final", "text": "done"}
