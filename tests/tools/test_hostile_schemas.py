"""A tool whose schema's ``$ref``s loop without end (``a`` is ``b``, ``b`` is ``a``) is skipped when
it is listed, with a warning naming it; the tool beside it still works (``tests/mcp_servers/hostile.py``).
Before, the argument validator followed the loop to a RecursionError at the call. So are a schema
that refers outside itself (`tools` failed whole on it) and one nested too deep (its listing, past
the 200 levels of pydantic's JSON parser, lost the whole server): ``tests/mcp_servers/schema_traps.py``;
so did one past pydantic's serialisation depth, some 130 levels: ``tests/mcp_servers/deep_listing.py``.
The commands run in this process (``invoke``): a warning is a log record (``caplog``), a traceback an
exception out of the command or a log record carrying one."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from builders import invoke, server, write_manifest

from runner.tools.schemas import MAX_NESTING, nests_too_deeply, reference_loop

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


def warned(caplog: pytest.LogCaptureFixture) -> str:
    """The runner's warnings, one a line."""
    return "\n".join(record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING)


def no_traceback(caplog: pytest.LogCaptureFixture, output: str) -> bool:
    """No record carries an exception and nothing printed one (an uncaught one fails ``invoke``)."""
    logged = [record for record in caplog.records if record.exc_info or "Traceback" in record.getMessage()]
    return not logged and "Traceback" not in output and "RecursionError" not in output + warned(caplog)


def test_the_listing_skips_the_looping_tool_with_a_warning(
        agent_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    result = invoke("tools", "agent.yaml", cwd=agent_dir)
    assert result.exit_code == 0, result.output
    assert SKIPPED in warned(caplog) and "#/$defs/node -> #/$defs/link -> #/$defs/node" in warned(caplog)
    assert "hostile__fine" in result.stdout and "hostile__loop" not in result.stdout


@pytest.mark.parametrize("command", [("call", "agent.yaml", "hostile__loop", '{"node": {"a": 1}}'),
                                     ("agent.yaml", "-p", 'hostile__loop {"node": {"a": 1}}')])
def test_calling_the_looping_tool_is_refused_without_a_traceback(
    agent_dir: Path, command: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    result = invoke(*command, cwd=agent_dir)
    assert no_traceback(caplog, result.output), result.output[-2000:] + warned(caplog)
    assert SKIPPED in warned(caplog)
    assert "no tool named 'hostile__loop'" in result.stdout or "unknown tool 'hostile__loop'" in result.stderr


@pytest.mark.parametrize("command", [("call", "agent.yaml", "hostile__fine", '{"text": "hi"}'),
                                     ("agent.yaml", "-p", 'hostile__fine {"text": "hi"}')])
def test_the_good_tool_beside_it_still_works(agent_dir: Path, command: tuple[str, ...]) -> None:
    result = invoke(*command, cwd=agent_dir)
    assert result.exit_code == 0, result.output
    assert "fine: hi" in result.stdout


def test_nesting_is_measured_in_objects_and_arrays_without_recursion() -> None:
    schema: dict = {"type": "string"}  # one level
    for _ in range(MAX_NESTING // 2 - 1):  # two levels each: the object and its properties
        schema = {"type": "object", "properties": {"a": schema}}
    assert not nests_too_deeply([schema])  # exactly the limit
    assert nests_too_deeply([[schema]])
    deep: list = []
    for _ in range(100_000):  # far past Python's recursion limit
        deep = [deep]
    assert nests_too_deeply(deep)


OUTSIDE = "traps: tool 'outside' skipped: unusable input schema: reference 'https://example.invalid/"
DEEP = f"traps: tool 'deep' skipped: its input schema nests deeper than {MAX_NESTING} levels"


@pytest.mark.parametrize("command", [("tools", "agent.yaml"), ("tools", "agent.yaml", "--json"),
                                     ("agent.yaml", "-p", 'traps__fine {"text": "hi"}')])
def test_a_tool_whose_schema_refers_outside_or_nests_too_deep_is_skipped_and_the_rest_kept(
    tmp_path: Path, command: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    traps = server("schema_traps", timeout="20s", startup_timeout="60s")
    write_manifest(tmp_path, {"traps": traps}, name="traps", model="offline")
    result = invoke(*command, cwd=tmp_path)
    assert result.exit_code == 0, result.output[-2000:]
    assert OUTSIDE in warned(caplog) and DEEP in warned(caplog), warned(caplog)[-2000:]
    assert "non-JSON-RPC" not in result.output + warned(caplog) and no_traceback(caplog, result.output)
    if command[0] == "tools":
        assert "traps__fine" in result.stdout
        assert "traps__outside" not in result.stdout and "traps__deep" not in result.stdout
    else:
        assert "fine: hi" in result.stdout


def test_a_schema_nested_deep_but_within_the_limit_is_offered(tmp_path: Path) -> None:
    traps = server("schema_traps", "--depth", str(MAX_NESTING // 2 - 1), timeout="20s", startup_timeout="60s")
    write_manifest(tmp_path, {"traps": traps}, name="traps", model="offline")
    result = invoke("tools", "agent.yaml", cwd=tmp_path)
    assert result.exit_code == 0, result.output[-2000:]
    assert "traps__deep" in result.stdout and "traps__fine" in result.stdout


@pytest.mark.parametrize("depth", [140, 199, 450])
def test_a_listing_past_the_sdks_serialisation_depth_skips_only_the_deep_tool(
    tmp_path: Path, depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Past some 130 levels the SDK's check of the listing (validate, then serialise) failed and
    took the server down ("killed by SIGTERM before finishing the handshake", 0 tools)."""
    deep = server("deep_listing", "--depth", str(depth), timeout="20s", startup_timeout="60s")
    write_manifest(tmp_path, {"raw": deep}, name="raw", model="offline")
    listed = invoke("tools", "agent.yaml", cwd=tmp_path)
    assert listed.exit_code == 0, listed.output[-2000:]
    skipped = f"raw: tool 'deep' skipped: its input schema nests deeper than {MAX_NESTING} levels"
    assert skipped in warned(caplog), warned(caplog)[-2000:]
    assert "raw__fine" in listed.stdout and "raw__deep" not in listed.stdout
    called = invoke("agent.yaml", "-p", 'raw__fine {"text": "hi"}', cwd=tmp_path)
    assert called.exit_code == 0 and "fine: hi" in called.stdout, called.output[-2000:]
