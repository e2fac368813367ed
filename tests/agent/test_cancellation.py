"""A stopped turn cancels its calls on the server: Ctrl-C (a cancelled turn) and a timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from builders import server, write_manifest
from langchain_core.messages import ToolMessage

from runner.agent.nodes import NOT_RUN_TEXT
from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn


def write_agent(folder: Path, **settings: Any) -> Path:
    return write_manifest(folder, {"demo": server("demo", **settings)}, name="cancelling", model="offline",
                          checkpointer="memory")


async def test_a_cancelled_turn_cancels_the_running_call_on_the_server(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path)) as runtime:
        with anyio.fail_after(40):
            with anyio.CancelScope() as turn:  # what Ctrl-C does to the chat's turn
                async for event in stream_turn(runtime, "demo__hang"):
                    if event["type"] == "progress":  # the server is inside the handler
                        turn.cancel()
            seen = await runtime.caller.call("demo__cancellations_seen", {"at_least": 1})
    assert turn.cancelled_caught
    assert seen.content == "1"


async def test_a_timed_out_call_is_cancelled_on_the_server_and_the_model_hears_it(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path, tools={"timeouts": {"hang": 0.5}})) as runtime:
        with anyio.fail_after(40):
            events = [event async for event in stream_turn(runtime, "demo__hang")]
            seen = await runtime.caller.call("demo__cancellations_seen", {"at_least": 1})
    [result] = [event for event in events if event["type"] == "tool_result"]
    assert result["status"] == "error" and "timed out" in result["text"]
    assert seen.content == "1"


def write_scripted_agent(folder: Path, script: list[Any], checkpointer: str, **server: Any) -> Path:
    (folder / "script.yaml").write_text(yaml.safe_dump(script))
    path = write_agent(folder, **server)
    document = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**document, "checkpointer": checkpointer,
                                    "model": {"id": "scripted", "script": "script.yaml"}}))
    return path


def closing_results(received: list[Any]) -> dict[str, str]:
    """The results the model was shown for each tool call, by call id."""
    return {m.tool_call_id: m.content for m in received if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("checkpointer", ["memory", "sqlite:///state.sqlite"])
async def test_a_call_stopped_while_running_is_told_to_the_next_turn_as_maybe_done(
        tmp_path: Path, checkpointer: str) -> None:
    script = [{"tool_calls": [{"name": "demo__hang", "id": "hang-1"}]}, "noted"]
    async with load_agent(write_scripted_agent(tmp_path, script, checkpointer)) as runtime:
        with anyio.fail_after(40):
            with anyio.CancelScope() as turn:  # what Ctrl-C does to the chat's turn
                async for event in stream_turn(runtime, "start it"):
                    if event["type"] == "progress":  # the server is running the call
                        turn.cancel()
            events = [event async for event in stream_turn(runtime, "what happened?")]
        received = runtime.model.primary.received[-1]
    assert turn.cancelled_caught
    assert events[-1]["type"] == "final" and events[-1]["text"] == "noted"
    [text] = closing_results(received).values()
    assert "stopped while it was running" in text and "may or may not have taken effect" in text


async def test_a_call_that_never_started_is_told_to_the_next_turn_as_not_run(tmp_path: Path) -> None:
    script = [{"tool_calls": [{"name": "demo__echo", "args": {"text": "x"}, "id": "echo-1"}]}, "noted"]
    path = write_scripted_agent(tmp_path, script, "memory", tools={"approve": ["echo"]})
    async with load_agent(path) as runtime:
        with anyio.fail_after(40):
            first = [event async for event in stream_turn(runtime, "echo x")]
            # A new message instead of an answer to the approval: the call never ran.
            second = [event async for event in stream_turn(runtime, "never mind")]
        received = runtime.model.primary.received[-1]
    assert [event["type"] for event in first][-1] == "approval"
    assert second[-1]["text"] == "noted"
    assert closing_results(received) == {"echo-1": NOT_RUN_TEXT}
