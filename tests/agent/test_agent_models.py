"""The models of the agents of ``agents:``. One with no model of its own, when the manifest's model
is the scripted one, would play the main agent's script (and the run fail when its turns run out),
so ``validate`` locates it where the agent is defined, in another file too. A server's completion
during an agent's tool call comes from that agent's model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from builders import invoke


def write(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if line.strip() == text)


def manifest(folder: Path, agents: dict[str, Any]) -> Path:
    write(folder / "main.yaml", [{"tool_calls": [{"name": "helper", "args": {"task": "hi"}}]}, "Done."])
    return write(folder / "agent.yaml", {
        "version": 1, "name": "desk", "model": {"id": "scripted", "script": "main.yaml"},
        "checkpointer": "memory", "agent": {"agents": ["helper"]}, "agents": agents})


def test_an_agent_without_a_model_under_a_scripted_main_model_is_located(tmp_path: Path) -> None:
    path = manifest(tmp_path, {"helper": {"description": "Helps."}})
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2
    output = result.stdout + result.stderr
    assert f"agent.yaml:{line_of(path, 'helper:')}:" in output
    assert "agents.helper: this agent has no model of its own" in output
    assert "script ('main.yaml') plays the main agent's turns" in output
    # The run refuses it before anything starts, as validate does (it used to fail mid-turn).
    run = invoke("agent.yaml", "-p", "hi", cwd=tmp_path)
    assert run.exit_code == 2 and "agents.helper" in run.stderr


def test_a_router_without_a_model_under_a_scripted_main_model_is_located(tmp_path: Path) -> None:
    manifest(tmp_path, {"helper": {"router": ["a", "b"]}, "a": {"description": "A.", "model": "offline"},
                        "b": {"description": "B.", "model": "offline"}})
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2
    output = result.stdout + result.stderr
    assert "agents.helper: this router has no model of its own" in output


def test_an_agent_of_another_file_naming_no_model_anywhere_is_located_in_that_file(tmp_path: Path) -> None:
    other = write(tmp_path / "helper.yaml", {
        "version": 1, "name": "helper", "description": "Helps.", "agent": {"agents": ["inner"]},
        "agents": {"inner": {"description": "Inside."}}})
    manifest(tmp_path, {"helper": {"file": "helper.yaml"}})
    result = invoke("validate", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 2
    output = result.stdout + result.stderr
    assert f"agent.yaml:{line_of(tmp_path / 'agent.yaml', 'helper:')}:" in output
    assert f"helper.yaml:{line_of(other, 'inner:')}:" in output
    assert "agents.inner: this agent has no model of its own" in output


def test_agents_with_models_of_their_own_or_an_offline_main_model_are_valid(tmp_path: Path) -> None:
    manifest(tmp_path, {"helper": {"description": "Helps.", "model": "offline"}})
    assert invoke("validate", "agent.yaml", cwd=tmp_path).exit_code == 0
    document = yaml.safe_load((tmp_path / "agent.yaml").read_text())
    write(tmp_path / "agent.yaml", {**document, "model": "offline",
                                    "agents": {"helper": {"description": "Helps."}}})
    assert invoke("validate", "agent.yaml", cwd=tmp_path).exit_code == 0


async def test_a_servers_completion_during_an_agents_call_comes_from_that_agents_model(
    tmp_path: Path,
) -> None:
    # Its own model, its file's for an agent of another file, else the manifest's (an agent
    # without one, a workflow, the main agent, a name a reload removed).
    import mcp_types as types

    from runner.agent.runtime import load_agent

    write(tmp_path / "scribe.yaml", ["the scribe's completion"])
    write(tmp_path / "reader-script.yaml", ["the reader's completion"])
    write(tmp_path / "reader.yaml", {"version": 1, "name": "reader", "description": "Reads.",
                                     "model": {"id": "scripted", "script": "reader-script.yaml"}})
    write(tmp_path / "agent.yaml", {
        "version": 1, "name": "desk", "model": "offline", "checkpointer": "memory",
        "agent": {"agents": ["scribe", "reader", "helper", "pipeline"]},
        "agents": {"scribe": {"description": "Writes.", "model": {"id": "scripted", "script": "scribe.yaml"}},
                   "reader": {"file": "reader.yaml"}, "helper": {"description": "Helps."},
                   "pipeline": {"description": "Both.", "chain": ["scribe", "helper"]}}})
    request = types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))],
        max_tokens=20)
    async with load_agent(tmp_path / "agent.yaml") as runtime:
        scribe = await runtime.sample("notes", request, "scribe")
        reader = await runtime.sample("notes", request, "reader")
        manifests = [runtime.model_of(agent) for agent in (None, "helper", "pipeline", "gone")]
        main = runtime.model
    assert isinstance(scribe.content, types.TextContent) and scribe.content.text == "the scribe's completion"
    assert isinstance(reader.content, types.TextContent) and reader.content.text == "the reader's completion"
    assert all(spec.id == "offline" and chain is main for spec, chain in manifests)
