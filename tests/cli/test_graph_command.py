"""``mcp-run graph FILE`` prints the agents and workflows as a Mermaid flowchart."""

from __future__ import annotations

from pathlib import Path

import yaml
from builders import ROOT, invoke


def test_graph_draws_each_agent_workflow_and_who_calls_whom() -> None:
    result = invoke("graph", str(ROOT / "examples" / "agents" / "research.yaml"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "flowchart TD"
    assert '  agent_main["main: research-desk"]' in lines
    assert "  agent_main -->|calls| agent_researcher" in lines
    assert "  agent_main -->|calls| agent_writer" in lines
    assert '  agent_researcher -.- server_notes[("notes")]' in lines


def test_graph_draws_an_agent_from_another_file_with_its_servers_not_given_to_the_main_agent() -> None:
    result = invoke("graph", str(ROOT / "examples" / "agents" / "team.yaml"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "  agent_main -->|calls| agent_researcher" in lines
    assert '  agent_researcher["researcher"]' in lines
    assert '  agent_researcher -.- server_notes[("notes")]' in lines
    assert not any(line.startswith("  agent_main -.- ") for line in lines)


def test_graph_draws_workflows_with_their_steps(tmp_path: Path) -> None:
    manifest = {
        "version": 1, "name": "flows", "agent": {"agents": ["desk", "board", "polish", "pipeline"]},
        "agents": {
            "a": {"description": "A."}, "b": {"description": "B."}, "c": {"description": "C."},
            "pipeline": {"chain": ["a", "b"]},
            "board": {"parallel": ["a", "b"], "join": "c"},
            "desk": {"router": ["a", "b"], "fallback": "b"},
            "polish": {"loop": {"generator": "a", "evaluator": "c", "max_rounds": 2}},
        },
    }
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(manifest))
    result = invoke("graph", str(tmp_path / "agent.yaml"))
    assert result.exit_code == 0, result.output
    lines = set(result.output.splitlines())
    assert {'  agent_pipeline{{"pipeline: chain"}}', "  agent_pipeline -->|1| agent_a",
            "  agent_pipeline -->|2| agent_b"} <= lines
    assert {"  agent_board -->|each| agent_a", "  agent_board -->|join| agent_c"} <= lines
    assert {"  agent_desk -->|route| agent_a", "  agent_desk -.->|fallback| agent_b"} <= lines
    assert {"  agent_polish -->|write| agent_a", "  agent_polish -->|judge| agent_c"} <= lines


def test_graph_keeps_the_manifests_text_out_of_the_diagrams_syntax(tmp_path: Path) -> None:
    manifest = {"version": 1, "name": 'x"] --> evil["<b>', "agents": {"a": {"description": '"]'}},
                "agent": {"agents": ["a"]}}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(manifest))
    result = invoke("graph", str(tmp_path / "agent.yaml"))
    assert result.exit_code == 0, result.output
    assert '  agent_main["main: x__ --_ evil___b_"]' in result.output.splitlines()
    assert "<b>" not in result.output


def test_graph_of_an_invalid_manifest_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(
        {"version": 1, "name": "x", "agent": {"agents": ["nobody"]}}))
    result = invoke("graph", str(tmp_path / "agent.yaml"))
    assert result.exit_code == 2
    assert "agent.agents[0]" in result.output and "unknown agent 'nobody'" in result.output


def test_graph_draws_handoffs_as_thick_labelled_arrows_apart_from_calls() -> None:
    result = invoke("graph", str(ROOT / "examples" / "agents" / "handoff.yaml"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert sorted(line for line in lines if "==>" in line) == [
        "  agent_billing ==>|hands off| agent_support",
        "  agent_main ==>|hands off| agent_billing",
        "  agent_main ==>|hands off| agent_support",
    ]
    assert not any("-->|calls| agent_billing" in line for line in lines)
