"""A running tool call's progress reaches the turn's events and `--json`."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from builders import asking_agent, mcp_run, server, write_manifest

from runner.agent.runtime import load_agent
from runner.agent.turns import stream_turn
from runner.tools.caller import EventSink, NoHost, ToolCaller

SLOW = 'asking__slow {"steps": 3, "interval": 0.01}'


async def test_progress_notifications_become_progress_events_before_the_result(tmp_path: Path) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        with anyio.fail_after(40):
            events = [event async for event in stream_turn(runtime, SLOW)]
    kinds = [event["type"] for event in events if event["type"] in ("progress", "tool_result")]
    assert kinds == ["progress", "progress", "progress", "tool_result"]
    progress = [event for event in events if event["type"] == "progress"]
    assert progress[0] == {"type": "progress", "tool": "asking__slow", "server": "asking", "progress": 1.0,
                           "total": 3.0, "message": "step 1"}
    assert [event["progress"] for event in progress] == [1.0, 2.0, 3.0]


def test_json_output_carries_progress_events(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=False)
    result = mcp_run("agent.yaml", "-p", SLOW, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["message"] for e in events if e["type"] == "progress"] == ["step 1", "step 2", "step 3"]


async def test_a_tool_invoked_directly_outside_a_graph_run_answers_and_its_progress_goes_nowhere(
    tmp_path: Path,
) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True), model=False) as runtime:
        tool = next(tool for tool in runtime.catalog.tools if tool.name == "asking__slow")
        call = {"type": "tool_call", "id": "c1", "name": tool.name, "args": {"steps": 2, "interval": 0.01}}
        with anyio.fail_after(40):
            message = await tool.ainvoke(call)  # LangChain gives it a config without a graph runtime
    assert message.status == "success"


class _Listening(NoHost):
    """A host that hears the calls' progress."""

    def __init__(self, events: list[dict]) -> None:
        self.events = events

    def progress_sink(self) -> EventSink | None:
        return self.events.append


@pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "2025-11-25"])
async def test_a_call_asks_the_server_for_progress_only_when_someone_listens(
    tmp_path: Path, legacy: bool
) -> None:
    path = write_manifest(tmp_path, {"answers": server("answers", *(["--legacy"] if legacy else []))},
                          model="offline")
    async with load_agent(path, model=False) as runtime:
        with anyio.fail_after(40):
            unwatched = await runtime.caller.call("answers__progress", {"steps": 2})
            events: list[dict] = []
            listening = ToolCaller(lambda: runtime.catalog, host=_Listening(events))
            watched = await listening.call("answers__progress", {"steps": 2})
    assert unwatched.content == "done, without a progress token"
    assert watched.content == "done, with a progress token"
    assert [event["message"] for event in events] == ["step 1", "step 2"]


def test_the_call_command_shows_the_calls_progress_on_stderr(tmp_path: Path) -> None:
    asking_agent(tmp_path, legacy=False)
    result = mcp_run("call", "agent.yaml", "asking__slow", '{"steps": 2, "interval": 0.01}', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "… asking__slow: 1/2 (50%) step 1" in result.stderr
    assert "… asking__slow: 2/2 (100%) step 2" in result.stderr
    assert "step" not in result.stdout  # the result alone goes to stdout
