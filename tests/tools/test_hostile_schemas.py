"""A tool whose schema's ``$ref``s loop without end (``a`` is ``b``, ``b`` is ``a``) is skipped when
it is listed, with a warning naming it; the tool beside it still works (``tests/mcp_servers/hostile.py``).
Before, the argument validator followed the loop to a RecursionError at the call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from builders import server, write_manifest

from runner.tools.schemas import reference_loop

LIMIT = 120
SKIPPED = "hostile: tool 'loop' skipped: its input schema's references loop without end"


@pytest.mark.parametrize(("schema", "loop"), [
    ({"properties": {"n": {"$ref": "#/$defs/a"}},
      "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}},
     ["#/$defs/a", "#/$defs/b", "#/$defs/a"]),
    ({"allOf": [{"$ref": "#"}]}, ["#", "#"]),
    ({"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/a"}]}}},
     ["#/$defs/a", "#/$defs/a"]),
    # Recursion through the value's parts ends with the value: a list, a tree.
    ({"properties": {"x": {"$ref": "#"}}}, None),
    ({"$defs": {"a": {"type": "object", "properties": {"next": {"$ref": "#/$defs/a"}}}},
      "properties": {"n": {"$ref": "#/$defs/a"}}}, None),
    ({"properties": {"x": {"$ref": "https://example.com/x"}}}, None),  # said elsewhere: outside
])
def test_a_loop_of_references_in_place_is_found(schema: dict, loop: list[str] | None) -> None:
    assert reference_loop(schema) == loop


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    write_manifest(tmp_path, {"hostile": server("hostile")}, name="hostile", model="offline")
    return tmp_path


def mcp_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True,
                          timeout=LIMIT, cwd=cwd, stdin=subprocess.DEVNULL)


def test_the_listing_skips_the_looping_tool_with_a_warning(agent_dir: Path) -> None:
    result = mcp_run("tools", "agent.yaml", cwd=agent_dir)
    assert result.returncode == 0, result.stderr
    assert SKIPPED in result.stderr and "#/$defs/node -> #/$defs/link -> #/$defs/node" in result.stderr
    assert "hostile__fine" in result.stdout and "hostile__loop" not in result.stdout


@pytest.mark.parametrize("command", [("call", "agent.yaml", "hostile__loop", '{"node": {"a": 1}}'),
                                     ("agent.yaml", "-p", 'hostile__loop {"node": {"a": 1}}')])
def test_calling_the_looping_tool_is_refused_without_a_traceback(
    agent_dir: Path, command: tuple[str, ...]
) -> None:
    result = mcp_run(*command, cwd=agent_dir)
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr, result.stderr[-2000:]
    assert SKIPPED in result.stderr
    assert "no tool named 'hostile__loop'" in result.stdout or "unknown tool 'hostile__loop'" in result.stderr


@pytest.mark.parametrize("command", [("call", "agent.yaml", "hostile__fine", '{"text": "hi"}'),
                                     ("agent.yaml", "-p", 'hostile__fine {"text": "hi"}')])
def test_the_good_tool_beside_it_still_works(agent_dir: Path, command: tuple[str, ...]) -> None:
    result = mcp_run(*command, cwd=agent_dir)
    assert result.returncode == 0, result.stderr
    assert "fine: hi" in result.stdout
