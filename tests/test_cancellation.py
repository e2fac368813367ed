"""A stopped turn cancels its calls on the server: Ctrl-C (a cancelled turn) and a timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import yaml

from runner.runtime import load_agent
from runner.turns import stream_turn

TESTS = Path(__file__).resolve().parent


def write_agent(folder: Path, **server: Any) -> Path:
    document = {
        "version": 1, "name": "cancelling", "model": "offline", "checkpointer": "memory",
        "servers": {"demo": {"command": "python", "args": [str(TESTS / "servers" / "demo.py")], **server}},
    }
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


async def test_a_cancelled_turn_cancels_the_running_call_on_the_server(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path)) as runtime:
        with anyio.fail_after(40):
            with anyio.CancelScope() as turn:  # what Ctrl-C does to the chat's turn
                async for event in stream_turn(runtime, "demo__hang"):
                    if event["type"] == "progress":  # the server is inside the handler
                        turn.cancel()
            seen = await runtime.catalog.call("demo__cancellations_seen", {"at_least": 1})
    assert turn.cancelled_caught
    assert seen.content == "1"


async def test_a_timed_out_call_is_cancelled_on_the_server_and_the_model_hears_it(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path, tools={"timeouts": {"hang": 0.5}})) as runtime:
        with anyio.fail_after(40):
            events = [event async for event in stream_turn(runtime, "demo__hang")]
            seen = await runtime.catalog.call("demo__cancellations_seen", {"at_least": 1})
    [result] = [event for event in events if event["type"] == "tool_result"]
    assert result["status"] == "error" and "timed out" in result["text"]
    assert seen.content == "1"
