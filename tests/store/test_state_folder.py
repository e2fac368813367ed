"""When the state folder beside the manifest cannot be created, the run uses a per-user one and
says so once; when neither can be, it says so in one line and exits 1, with no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import mcp_run, server, write_manifest


def write_agent(folder: Path) -> Path:
    return write_manifest(folder, {"demo": server("demo")}, name="stateful", model="offline")


COMMANDS = [
    ("call", "agent.yaml", "demo__echo", '{"text": "hi"}'),
    ("agent.yaml", "-p", 'demo__echo {"text": "hi"}'),
]


@pytest.mark.parametrize("command", COMMANDS, ids=["call", "one-shot"])
def test_a_file_in_place_of_the_state_folder_moves_state_to_the_user_folder_with_one_warning(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    write_agent(agent)
    (agent / ".mcp-run").write_text("not a folder")
    result = mcp_run(*command, cwd=agent, env={"XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert result.returncode == 0, result.stderr
    assert "hi" in result.stdout
    assert result.stderr.count("cannot use the state folder") == 1
    assert "is a file, not a folder" in result.stderr
    logs = list((tmp_path / "xdg" / "mcp-run").glob("agent-*/logs/demo.log"))
    assert len(logs) == 1


@pytest.mark.parametrize("command", COMMANDS, ids=["call", "one-shot"])
def test_no_usable_state_folder_is_one_clear_line_and_exit_1(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    write_agent(tmp_path)
    (tmp_path / ".mcp-run").write_text("not a folder")
    (tmp_path / "xdg").write_text("not a folder either")
    result = mcp_run(*command, cwd=tmp_path, env={"XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot create the state folder ")
    assert str(tmp_path / ".mcp-run") in lines[0] and "remove what is in the way" in lines[0]
    assert "Traceback" not in result.stderr and "ExceptionGroup" not in result.stderr
