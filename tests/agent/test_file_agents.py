"""Agents from other manifest files (``agents: {research: {file: research.yaml}}``), run as a user
runs them (``-p --json``, ``validate``, in this process; the JSON-lines chat as a process), with
scripted models and the bundled notes server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import ROOT, JsonChat, invoke, server

NOTES_SERVER = ROOT / "examples" / "notes_server.py"


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def write(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def notes(args: str = "../notes_server.py") -> dict[str, Any]:
    return {"command": "python", "args": [args], "env": {"NOTES_FILE": "notes.json"}}


def researcher(folder: Path, turns: list[Any], **top: Any) -> Path:
    """``folder/parts/research.yaml``: a manifest of its own, with the notes server (from its folder)
    and a scripted model playing ``turns``."""
    shutil.copy(NOTES_SERVER, folder / "notes_server.py")
    write(folder / "parts" / "turns.yaml", turns)
    document = {"version": 1, "name": "research", "description": "Does arithmetic.",
                "model": {"id": "scripted", "script": "turns.yaml"}, "servers": {"notes": notes()}, **top}
    return write(folder / "parts" / "research.yaml", document)


def main(folder: Path, turns: list[Any], agents: dict[str, Any], **top: Any) -> Path:
    write(folder / "main.yaml", turns)
    document = {"version": 1, "name": "desk", "model": {"id": "scripted", "script": "main.yaml"},
                "checkpointer": "memory", "agent": {"agents": sorted(agents)}, **top, "agents": agents}
    return write(folder / "agent.yaml", document)


def one_shot(folder: Path, text: str = "go") -> list[dict[str, Any]]:
    result = invoke("agent.yaml", "-p", text, "--json", cwd=folder)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def results(events: list[dict[str, Any]], agent: str | None = None) -> dict[str, str]:
    return {e["name"]: e["text"] for e in events if e["type"] == "tool_result" and e.get("agent") == agent}


def line_of(path: Path, text: str) -> int:
    """The first line of ``path`` that is ``text`` (stripped)."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if line.strip() == text)


def validate(folder: Path) -> str:
    result = invoke("validate", "agent.yaml", cwd=folder)
    assert result.exit_code == 2, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_an_agent_from_another_file_runs_with_that_files_model_prompt_and_servers(tmp_path: Path) -> None:
    researcher(tmp_path, [call("notes__calculate", expression="6*7"), "It is 42."],
               prompts={"system": "I am {{ agent.name }} with {{ vars.unit }}.", "vars": {"unit": "sums"}})
    main(tmp_path, [call("research", task="What is 6*7?"), "Done: 42."],
         {"research": {"file": "parts/research.yaml"}})
    events = one_shot(tmp_path)
    called = next(e["id"] for e in events if e["type"] == "tool_call")
    assert [e for e in events if e["type"] == "agent"] == [
        {"type": "agent", "agent": "research", "caller": "main", "task": "What is 6*7?", "call": called}]
    # Its notes server was started from its own folder (the path in 'args' is relative to it).
    assert results(events, "research") == {"notes__calculate": "42"}
    assert results(events) == {"research": "It is 42."}
    assert events[-1]["type"] == "final" and events[-1]["text"] == "Done: 42."


def test_the_main_agent_is_not_given_the_servers_only_an_agent_from_a_file_brings(tmp_path: Path) -> None:
    researcher(tmp_path, ["Unused."])
    main(tmp_path, [call("notes__calculate", expression="1+1"), "Could not."],
         {"research": {"file": "parts/research.yaml"}})
    events = one_shot(tmp_path)
    failed = [e for e in events if e["type"] == "tool_result" and e["name"] == "notes__calculate"]
    assert len(failed) == 1 and failed[0]["status"] == "error" and "agent" not in failed[0]


@pytest.mark.parametrize("tool_search", ["off", "on"])
def test_the_main_model_is_not_offered_nor_finds_the_tools_of_servers_only_another_file_brings(
    tmp_path: Path, tool_search: str
) -> None:
    researcher(tmp_path, ["Unused."])
    main(tmp_path, [], {"research": {"file": "parts/research.yaml"}}, model="offline",
         agent={"agents": ["research"], "tool_search": tool_search})
    # The offline model calls a tool it is offered when the user names it, else lists those it has.
    events = one_shot(tmp_path, 'notes__calculate {"expression": "1+1"}')
    assert events[0]["type"] == "ready" and events[0]["tools"] == [] and events[0]["agents"] == ["research"]
    assert not [e for e in events if e["type"] == "tool_call"]
    if tool_search == "off":
        assert events[-1]["text"] == "There is no tool named 'notes__calculate'. Available tools: research."
    else:
        searched = one_shot(tmp_path, 'search_tools {"query": "calculate"}')
        found = [e["text"] for e in searched if e["type"] == "tool_result" and e["name"] == "search_tools"]
        assert found == ["No tool matches 'calculate'. Try other or fewer words."]


def test_tools_lists_only_the_tools_the_main_agent_can_call_not_those_another_file_brings(
        tmp_path: Path) -> None:
    researcher(tmp_path, ["Unused."])
    main(tmp_path, [], {"research": {"file": "parts/research.yaml"}},
         servers={"clock": server("demo")})
    result = invoke("tools", "agent.yaml", "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    listed = {row["name"] for row in rows if row["kind"] == "tool"}
    assert listed and not any(name.startswith("notes__") for name in listed)
    assert all(name.startswith("clock__") for name in listed), listed
    assert [row["name"] for row in rows if row["kind"] == "agent"] == ["research"]  # its agent, offered


def test_the_chats_tools_command_agrees_with_ready_on_the_main_agents_tools(tmp_path: Path) -> None:
    researcher(tmp_path, ["Unused."])
    main(tmp_path, [], {"research": {"file": "parts/research.yaml"}},
         servers={"clock": server("demo")})
    chat = JsonChat(tmp_path)
    try:
        ready = chat.wait_for("ready")
        chat.send({"text": "/tools"})
        listed = [row["name"] for row in chat.wait_for("tools")["tools"]]
        assert listed and sorted(listed) == sorted([*ready["tools"], *ready["agents"], *ready["handoffs"]])
        assert not any(name.startswith("notes__") for name in listed)
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)


def test_a_server_both_files_define_alike_is_one_server_used_by_both(tmp_path: Path) -> None:
    # The same definition: the same command, and the same folder (the other file's 'cwd: ..').
    researcher(tmp_path, [call("probe__pid"), "Done."], servers={"probe": server("instance", cwd="..")})
    main(tmp_path, [call("research", task="Your server's pid?"), call("probe__pid"), "Same."],
         {"research": {"file": "parts/research.yaml"}}, servers={"probe": server("instance")})
    events = one_shot(tmp_path)
    assert results(events, "research")["probe__pid"] == results(events)["probe__pid"]


def test_validate_locates_a_problem_inside_the_other_file_with_its_path_and_line(tmp_path: Path) -> None:
    researcher(tmp_path, ["Hi."], agent={"max_steps": 0})
    main(tmp_path, ["Hi."], {"research": {"file": "parts/research.yaml"}})
    output = validate(tmp_path)
    line = line_of(tmp_path / "parts" / "research.yaml", "max_steps: 0")
    assert f"parts/research.yaml:{line}:" in output and "agent.max_steps" in output


def test_a_missing_other_file_is_located_at_its_file_entry(tmp_path: Path) -> None:
    main(tmp_path, ["Hi."], {"research": {"file": "parts/nowhere.yaml"}})
    output = validate(tmp_path)
    assert "agent.yaml:" in output and "agents.research.file" in output
    assert "manifest 'parts/nowhere.yaml' does not exist" in output


def test_manifests_that_include_each_other_are_a_located_cycle(tmp_path: Path) -> None:
    write(tmp_path / "other.yaml", {"version": 1, "name": "other", "description": "Loops back.",
                                    "agents": {"back": {"file": "agent.yaml"}}})
    main(tmp_path, ["Hi."], {"other": {"file": "other.yaml"}})
    output = validate(tmp_path)
    assert "other.yaml:" in output and "agents.back.file" in output
    assert "manifests include each other in a cycle: agent.yaml -> other.yaml -> agent.yaml" in output


def test_a_server_key_defined_differently_in_both_files_names_both_places(tmp_path: Path) -> None:
    researcher(tmp_path, ["Hi."])
    main(tmp_path, ["Hi."], {"research": {"file": "parts/research.yaml"}},
         servers={"notes": {"command": "python", "args": ["other_server.py"]}})
    output = validate(tmp_path)
    main_line = line_of(tmp_path / "agent.yaml", "notes:")
    assert "parts/research.yaml:" in output and "servers.notes" in output
    assert f"is also defined at agent.yaml:{main_line}, differently" in output


def test_an_agent_from_a_file_without_any_description_is_located(tmp_path: Path) -> None:
    path = researcher(tmp_path, ["Hi."])
    document = yaml.safe_load(path.read_text())
    del document["description"]
    write(path, document)
    main(tmp_path, ["Hi."], {"research": {"file": "parts/research.yaml"}})
    output = validate(tmp_path)
    assert "agents.research" in output and "needs a description" in output


def test_keys_an_agent_from_a_file_cannot_carry_over_are_located_in_that_file(tmp_path: Path) -> None:
    researcher(tmp_path, ["Hi."], policy=[{"tool": "notes__*", "action": "deny"}])
    main(tmp_path, ["Hi."], {"research": {"file": "parts/research.yaml"}})
    output = validate(tmp_path)
    assert "parts/research.yaml:" in output and "policy" in output
    assert "follows the including manifest's policy" in output


def test_the_agents_of_the_other_file_join_and_its_agent_may_call_them(tmp_path: Path) -> None:
    researcher(tmp_path, [call("checker", task="Check 42."), "Checked: 42."],
               agent={"agents": ["checker"]},
               agents={"checker": {"description": "Checks sums.", "tools": ["notes"],
                                   "model": {"id": "scripted", "script": "checker.yaml"}}})
    write(tmp_path / "parts" / "checker.yaml", [call("notes__calculate", expression="6*7"), "Right."])
    main(tmp_path, [call("research", task="Sum?"), "Fine."], {"research": {"file": "parts/research.yaml"}})
    events = one_shot(tmp_path)
    assert [e["agent"] for e in events if e["type"] == "agent"] == ["research", "checker"]
    assert results(events, "checker") == {"notes__calculate": "42"}
    assert results(events, "research") == {"checker": "Right."}


def test_an_agent_name_both_files_define_differently_names_both_places(tmp_path: Path) -> None:
    researcher(tmp_path, ["Hi."], agents={"writer": {"description": "Writes poems.", "model": "offline"}})
    path = main(tmp_path, ["Hi."], {"research": {"file": "parts/research.yaml"},
                                    "writer": {"description": "Writes prose.", "model": "offline"}})
    output = validate(tmp_path)
    line = line_of(path, "writer:")
    assert "parts/research.yaml:" in output and "agents.writer" in output
    assert f"agent 'writer' is also defined at agent.yaml:{line}, differently" in output
