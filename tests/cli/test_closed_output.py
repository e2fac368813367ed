"""A closed output pipe (``mcp-run … | head -1``) ends every command the same way: its servers
stopped, exit 141 (128 + SIGPIPE), no traceback and no "Exception ignored" noise.

Each command runs as a process whose stdout (and, for ``2>&1``, stderr) is a real pipe: closed
before the command writes, or closed once its first line is read while it waits for input or edits.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from builders import COMMAND_LIMIT, MCP_RUN, copy_bundled_agent
from child_processes import ChildProcessGuard

BROKEN_PIPE_EXIT = 141

# Every command that writes output, on the bundled agent (a stdio server, the offline model).
WRITING_COMMANDS = [
    ("validate", "agent.yaml"),
    ("schema",),
    ("tools", "agent.yaml"),
    ("tools", "agent.yaml", "--json"),
    ("call", "agent.yaml", "notes__list_notes"),
    ("prompts", "agent.yaml"),
    ("prompts", "agent.yaml", "--json"),
    ("prompt", "agent.yaml", "summary"),
    ("config", "agent.yaml"),
    ("config", "agent.yaml", "--json"),
    ("agent.yaml", "-p", "notes__list_notes"),
    ("agent.yaml", "-p", "notes__list_notes", "--json"),
    ("agent.yaml",),  # the chat, input at its end
    ("agent.yaml", "--json"),
    ("init", "fresh"),
    ("import", "claude_desktop_config.json"),
    ("auth", "status", "agent.yaml"),
    ("test", "agent.yaml", "--replay"),
]


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    folder = copy_bundled_agent(tmp_path)
    (folder / "claude_desktop_config.json").write_text(json.dumps(
        {"mcpServers": {"notes": {"command": "python", "args": ["examples/notes_server.py"]}}}))
    return folder


@contextmanager
def no_orphans() -> Iterator[None]:
    guard = ChildProcessGuard()
    yield
    assert guard.leftovers() == []


@contextmanager
def mcp_run_into_pipe(folder: Path, args: tuple[str, ...], *, stderr_too: bool,
                      stdin: int = subprocess.DEVNULL) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``mcp-run ARGS`` writing into a pipe (its read end handed to the block); stderr into a file
    unless ``stderr_too`` (``2>&1``)."""
    read_end, write_end = os.pipe()
    errors = Path(tempfile.mkstemp(dir=folder, suffix=".stderr")[1])
    with errors.open("wb") as error_file:
        process = subprocess.Popen([str(MCP_RUN), *args], cwd=folder, stdin=stdin, stdout=write_end,
                                   stderr=write_end if stderr_too else error_file)
    os.close(write_end)
    try:
        yield process, read_end, errors
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdin is not None:
            process.stdin.close()
        with suppress(OSError):  # the test closed it
            os.close(read_end)


def assert_quiet_broken_pipe_exit(process: subprocess.Popen[bytes], errors: Path) -> None:
    assert process.wait(timeout=COMMAND_LIMIT) == BROKEN_PIPE_EXIT, errors.read_text()
    said = errors.read_text()
    assert "Traceback" not in said and "Exception ignored" not in said, said


@pytest.mark.parametrize("args", WRITING_COMMANDS, ids=" ".join)
def test_a_command_whose_output_pipe_is_closed_stops_its_servers_and_exits_141(
        agent: Path, args: tuple[str, ...]) -> None:
    with no_orphans(), mcp_run_into_pipe(agent, args, stderr_too=False) as (process, read_end, errors):
        os.close(read_end)
        assert_quiet_broken_pipe_exit(process, errors)


@pytest.mark.parametrize("args", [("agent.yaml", "-p", "notes__list_notes"),
                                  ("agent.yaml", "-p", "notes__list_notes", "--json"),
                                  ("tools", "agent.yaml")], ids=" ".join)
def test_a_run_whose_output_and_diagnostics_share_a_closed_pipe_exits_141(
        agent: Path, args: tuple[str, ...]) -> None:
    """``mcp-run agent.yaml -p … 2>&1 | head -1``: diagnostics on stderr fail too."""
    with no_orphans(), mcp_run_into_pipe(agent, args, stderr_too=True) as (process, read_end, errors):
        os.close(read_end)
        assert process.wait(timeout=COMMAND_LIMIT) == BROKEN_PIPE_EXIT


@pytest.mark.parametrize("args", [("agent.yaml", "--json"), ("agent.yaml",), ("watch", "agent.yaml")],
                         ids=" ".join)
def test_a_command_waiting_for_input_or_edits_exits_141_when_its_reader_goes(
        agent: Path, args: tuple[str, ...]) -> None:
    """The chat with its input still open, and ``watch``, write nothing until a line or an edit
    comes: the closed pipe is noticed without a write."""
    with no_orphans(), mcp_run_into_pipe(agent, args, stderr_too=False, stdin=subprocess.PIPE) as (
            process, read_end, errors):
        with os.fdopen(read_end, "rb", closefd=False) as output:
            assert output.readline()  # the chat's first line, or watch's tool list
        os.close(read_end)
        assert_quiet_broken_pipe_exit(process, errors)
