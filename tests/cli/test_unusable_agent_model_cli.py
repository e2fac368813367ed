"""An agent whose model cannot be used here (its API key variable unset) fails only when called:
the manifest's main agent and the other agents keep working (issue #34)."""

from __future__ import annotations

import json
from pathlib import Path

from builders import mcp_run, write_manifest

UNSET_KEY = "T34_NOPE_KEY"


def several_agents(folder: Path) -> Path:
    return write_manifest(
        folder, {}, model="offline", agent={"agents": ["cloud", "helper"]},
        agents={
            "cloud": {"description": "Asks the cloud.",
                      "model": {"id": "openai:gpt-4.1-mini", "api_key_env": UNSET_KEY}},
            "helper": {"description": "Helps offline."},
        })


def agent_result(folder: Path, agent: str) -> dict[str, object]:
    """The tool result of one call of ``agent``, the key variable unset, in a one-shot turn."""
    result = mcp_run("agent.yaml", "-p", f'{agent} {{"task": "what is new"}}', "--json", cwd=folder,
                     env={UNSET_KEY: None})
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-1]["type"] == "final", events
    return next(event for event in events if event["type"] == "tool_result" and event["name"] == agent)


def test_a_turn_that_never_calls_the_agent_with_an_unusable_model_succeeds_and_the_warning_names_its_place(
        tmp_path: Path) -> None:
    several_agents(tmp_path)
    result = mcp_run("agent.yaml", "-p", "hi", cwd=tmp_path, env={UNSET_KEY: None})
    assert result.returncode == 0, result.stderr
    assert "This is the offline model" in result.stdout
    warning = next(line for line in result.stderr.splitlines() if "warning" in line)
    assert "agents.cloud.model" in warning and UNSET_KEY in warning


def test_calling_the_agent_with_an_unusable_model_is_a_tool_error_naming_it_and_why(tmp_path: Path) -> None:
    outcome = agent_result(several_agents(tmp_path).parent, "cloud")
    assert outcome["status"] == "error"
    text = str(outcome["text"])
    assert "agents.cloud.model: " in text and UNSET_KEY in text, outcome


def test_the_other_agents_work_beside_one_whose_model_cannot_be_used(tmp_path: Path) -> None:
    outcome = agent_result(several_agents(tmp_path).parent, "helper")
    assert outcome["status"] == "success", outcome


def test_a_router_whose_model_cannot_be_used_is_a_tool_error_naming_it_when_called(tmp_path: Path) -> None:
    write_manifest(
        tmp_path, {}, model="offline", agent={"agents": ["pick"]},
        agents={
            "pick": {"description": "Routes.", "router": ["helper", "other"],
                     "model": {"id": "openai:gpt-4.1-mini", "api_key_env": UNSET_KEY}},
            "helper": {"description": "Helps offline."},
            "other": {"description": "Helps too."},
        })
    outcome = agent_result(tmp_path, "pick")
    assert outcome["status"] == "error"
    assert "agents.pick.model: " in str(outcome["text"]), outcome
