"""Tool and prompt lists that change while the agent runs: a tool a server adds during a turn is
offered and callable at the very next model step; new prompts become commands."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from builders import scripted_model, server, write_manifest

from runner.agent.runtime import load_agent

pytestmark = pytest.mark.anyio


def write_agent(folder: Path, turns: list, *, legacy: bool) -> Path:
    dynamic = server("dynamic", *(["--legacy"] if legacy else []))
    return write_manifest(folder, {"dyn": dynamic}, name="live", checkpointer="memory",
                          model=scripted_model(folder, turns))


@pytest.mark.parametrize("legacy", [False, True], ids=["2026-era", "legacy-era"])
async def test_a_tool_added_during_a_turn_is_called_at_the_next_step(tmp_path: Path, legacy: bool) -> None:
    turns = [
        {"tool_calls": [{"name": "dyn__add_tool", "args": {"name": "fresh"}}]},
        {"tool_calls": [{"name": "dyn__fresh", "args": {"text": "hi"}}]},
        "done",
    ]
    async with load_agent(write_agent(tmp_path, turns, legacy=legacy)) as agent:
        assert "dyn__fresh" not in agent.catalog.entries
        with anyio.fail_after(30):
            result = await agent.graph.ainvoke({"messages": [("user", "grow")]}, agent.config())
        offered = agent.model.primary.calls
    assert "dyn__fresh" not in offered[0] and "dyn__fresh" in offered[1]
    answers = [m for m in result["messages"] if m.type == "tool"]
    assert answers[-1].status == "success" and "fresh: hi" in str(answers[-1].content)


async def test_a_prompt_added_by_a_server_becomes_a_command(tmp_path: Path) -> None:
    async with load_agent(write_agent(tmp_path, ["unused"], legacy=False)) as agent:
        assert "dyn__briefing" not in agent.prompt_catalog
        await agent.caller.call("dyn__add_prompt", {"name": "briefing"})
        with anyio.fail_after(10):
            await agent.settle()
        assert "dyn__briefing" in agent.prompt_catalog
        messages = await agent.prompt_messages("/dyn__briefing")
    assert messages
