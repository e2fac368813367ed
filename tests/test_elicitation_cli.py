"""Requests for input from the command line: one-shot runs and `call` decline at once, never hang."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_elicitation_graph import write_agent


def mcp_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, stdin=subprocess.DEVNULL)


def test_a_one_shot_run_declines_the_servers_question_and_the_model_hears_it(tmp_path: Path) -> None:
    write_agent(tmp_path, legacy=True)
    result = mcp_run("agent.yaml", "-p", "asking__book", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e for e in events if e["type"] == "elicitation"] == []
    [tool_result] = [e for e in events if e["type"] == "tool_result"]
    assert tool_result["text"].startswith("not booked: the user chose decline")
    assert "this run cannot ask the user" in tool_result["text"]


def test_the_call_command_declines_the_servers_question(tmp_path: Path) -> None:
    write_agent(tmp_path, legacy=False)
    result = mcp_run("call", "agent.yaml", "asking__book", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "not booked: the user chose decline" in result.stdout
    assert "this run cannot ask the user" in result.stdout
