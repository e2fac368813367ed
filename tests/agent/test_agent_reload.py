"""Watch mode with several agents: an edit of one agent touches only that agent, the reload names
it, and a turn of another agent running meanwhile finishes unharmed; run as a user runs it (the JSON
chat with ``--watch``), with scripted models and a server whose tool waits for the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import JsonChat
from mcp_servers import gates as gates_server


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def write(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def desk(folder: Path, url: str, quick_script: str, other: Path | None = None) -> Path:
    """Main calls ``slow`` (which waits in gates__hold) in its first turn, ``quick`` in its second;
    ``quick`` answers from ``quick_script``, ``slow`` comes from ``other`` when given."""
    slow: dict[str, Any] = ({"file": other.name} if other is not None else
                            {"description": "Waits.", "tools": ["gates"],
                             "model": {"id": "scripted", "script": "slow.yaml"}})
    return write(folder / "agent.yaml", {
        "version": 1, "name": "desk", "model": {"id": "scripted", "script": "main.yaml"},
        "checkpointer": "memory", "servers": {"gates": {"url": url}},
        "agent": {"agents": ["quick", "slow"]},
        "agents": {"slow": slow, "quick": {"description": "Answers.",
                                           "model": {"id": "scripted", "script": quick_script}}}})


def scripts(folder: Path) -> None:
    write(folder / "main.yaml", [call("slow", task="Wait."), "First done.", call("quick", task="Now."),
                                 call("slow", task="Again."), "Second done."])
    write(folder / "slow.yaml", [call("gates__hold", key="a"), "Slow finished.", "Slow again."])
    write(folder / "quick-1.yaml", ["Quick, version one."])
    write(folder / "quick-2.yaml", ["Quick, version two."])


@pytest.fixture
def gates() -> gates_server.Gates:
    return gates_server.Gates()


@pytest.fixture
def url(gates: gates_server.Gates, serve_http: Any) -> str:
    """The gates server, over HTTP from this process: the test opens its gates."""
    return str(serve_http(gates_server.build(gates)))


def test_editing_one_agent_while_another_agents_turn_runs_leaves_that_turn_alone(
    tmp_path: Path, gates: gates_server.Gates, url: str
) -> None:
    scripts(tmp_path)
    desk(tmp_path, url, "quick-1.yaml")
    chat = JsonChat(tmp_path, "--watch")
    try:
        chat.wait_for("ready")
        chat.send({"text": "one"})
        gates.wait_for("enter a")  # slow's turn is running, inside its tool call
        desk(tmp_path, url, "quick-2.yaml")
        reload = chat.wait_for("reload")
        assert reload["agents"] == {"changed": ["quick"]}
        assert reload["summary"].endswith("changed agent quick")
        assert reload["restarted"] == [] and reload["started"] == [] and reload["stopped"] == []
        gates.open("a")
        first = chat.wait_for("final")
        assert first["text"] == "First done."
        answers = {e["name"]: e["text"] for e in chat.seen if e["type"] == "tool_result"}
        assert answers == {"gates__hold": "held a", "slow": "Slow finished."}
        chat.send({"text": "two"})
        second = chat.wait_for("final")
        assert second["text"] == "Second done."
        answers = {e["name"]: e["text"] for e in chat.seen if e["type"] == "tool_result"}
        assert answers["quick"] == "Quick, version two."
        # The agent the edit left alone kept its model: its script goes on where it was.
        assert answers["slow"] == "Slow again."
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)


def test_an_edit_of_another_file_an_agent_comes_from_reloads_that_agent(tmp_path: Path, url: str) -> None:
    scripts(tmp_path)
    slow = {"version": 1, "name": "slow", "description": "Waits.",
            "model": {"id": "scripted", "script": "slow.yaml"}, "servers": {"gates": {"url": url}},
            "prompts": {"system": "Version one."}}
    other = write(tmp_path / "slow-agent.yaml", slow)
    desk(tmp_path, url, "quick-1.yaml", other)
    chat = JsonChat(tmp_path, "--watch")
    try:
        chat.wait_for("ready")
        write(other, {**slow, "prompts": {"system": "Version two."}})
        reload = chat.wait_for("reload")
        assert reload["agents"] == {"changed": ["slow"]}
        write(other, {**slow, "agents": {"helper": {"description": "Helps.", "model": "offline"}}})
        assert chat.wait_for("reload")["agents"] == {"added": ["helper"], "changed": ["slow"]}
        # An invalid edit of the other file is located in it; the last good agent keeps running.
        write(other, {**slow, "agent": {"max_steps": 0}})
        problems = chat.wait_for("reload_error")["problems"]
        assert any(problem.startswith(f"{other}:") and "agent.max_steps" in problem
                   for problem in problems), problems
    finally:
        chat.process.terminate()
        chat.process.wait(timeout=60)
