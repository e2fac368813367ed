"""The Python entry points: runner.load_agent and the LangGraph server's graph factory."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from builders import copy_bundled_agent

import runner
from runner import langgraph as graph_factory

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent


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


async def test_the_langgraph_factory_reads_the_manifest_from_the_environment(
    agent_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(graph_factory.MANIFEST_ENV, str(agent_copy))
    with anyio.fail_after(60):
        async with graph_factory.graph({}) as graph:
            config = {"configurable": {"thread_id": "factory"}}
            result = await graph.ainvoke({"messages": [("user", "notes__list_notes")]}, config)
    assert result["messages"][-1].content.startswith("notes__list_notes returned")


def test_langgraph_json_names_the_factory() -> None:
    import json

    config = json.loads((ROOT / "langgraph.json").read_text())
    module_path, _, attribute = config["graphs"]["agent"].partition(":")
    assert (ROOT / module_path).is_file() and attribute == "graph"
