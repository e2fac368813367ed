"""The Python entry points: runner.load_agent and the LangGraph server's graph factory."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from builders import ROOT, copy_bundled_agent

import runner
from runner.errors import RunnerError
from runner.hosting import langgraph_server as graph_factory
from runner.hosting.agent_host import HOST, MANIFEST_ENV, AgentHost

pytestmark = pytest.mark.anyio


@pytest.fixture
def agent_copy(tmp_path: Path) -> Path:
    manifest = copy_bundled_agent(tmp_path) / "agent.yaml"
    manifest.write_text(manifest.read_text() + "checkpointer: memory\n")
    return manifest


async def test_load_agent_runs_a_turn_through_the_bundled_server(agent_copy: Path) -> None:
    with anyio.fail_after(60):
        async with runner.load_agent(agent_copy) as agent:
            result = await agent.graph.ainvoke(
                {"messages": [("user", 'notes__calculate {"expression": "5*5"}')]}, agent.config())
    assert result["messages"][-1].content == "notes__calculate returned: 25"


async def test_the_langgraph_factory_starts_the_agent_of_the_environment_once(
    agent_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MANIFEST_ENV, str(agent_copy))
    try:
        with anyio.fail_after(60):
            graph = await graph_factory.graph({})
            again = await graph_factory.graph({})
            config = {"configurable": {"thread_id": "factory"}}
            result = await again.ainvoke({"messages": [("user", "notes__list_notes")]}, config)
    finally:
        await HOST.close()
    assert again is graph  # one agent per process, not one per call
    assert result["messages"][-1].content.startswith("notes__list_notes returned")


async def test_an_agent_that_failed_to_start_is_started_again_at_the_next_call(
    agent_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = AgentHost()
    monkeypatch.setenv(MANIFEST_ENV, str(tmp_path / "missing.yaml"))
    with anyio.fail_after(60), pytest.raises(RunnerError):
        await host.runtime()
    monkeypatch.setenv(MANIFEST_ENV, str(agent_copy))
    try:
        with anyio.fail_after(60):
            runtime = await host.runtime()
        assert runtime.manifest.name == "notes-assistant"
    finally:
        await host.close()


def test_langgraph_json_names_the_factory_and_the_app_of_one_module() -> None:
    import importlib
    import json

    config = json.loads((ROOT / "langgraph.json").read_text())
    for reference in (config["graphs"]["agent"], config["http"]["app"]):
        module, _, attribute = reference.partition(":")
        assert hasattr(importlib.import_module(module), attribute)
