"""Garbage: junk on stdout (with and without newlines), JSON that is not JSON-RPC, answers to
unknown ids, invalid results, tool lists with broken entries, and 10 MB outputs."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from reliability.support import wire, write_manifest
from runner.agent.runtime import load_agent
from runner.errors import ServerRequestError, ServerTimeoutError, ToolError

pytestmark = pytest.mark.anyio

TEN_MB = 10 * 1024 * 1024
JUNK_TIMEOUT = 1.0

# What each kind of junk (tests/mcp_servers/wire.py) ends with: the answer, or the typed error.
JUNK_OUTCOMES = {
    "line": "wire: after line",
    "glued": "wire: after glued",
    "not_jsonrpc": "wire: after not_jsonrpc",
    "unknown_id": "wire: after unknown_id",
    "huge_line": "wire: after huge_line",
    "binary": "wire: after binary",
    "only_unknown_id": ServerTimeoutError,
    "bad_result": ServerRequestError,
}


async def test_junk_on_stdout_never_breaks_the_session_or_mismatches_an_answer(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, {"w": wire(tools={"timeouts": {"junk": f"{JUNK_TIMEOUT}s"}})})
    async with load_agent(path) as runtime:
        connection = runtime.fleet.connections["w"]
        for kind, expected in JUNK_OUTCOMES.items():
            with anyio.fail_after(JUNK_TIMEOUT + 5):
                if isinstance(expected, str):
                    assert (await runtime.caller.call("w__junk", {"kind": kind})).content == expected
                else:
                    with pytest.raises(ToolError) as raised:
                        await runtime.caller.call("w__junk", {"kind": kind})
                    assert isinstance(raised.value.__cause__, expected), kind
                answer = await runtime.caller.call("w__echo", {"text": f"after {kind}"})
            assert answer.content == f"wire: after {kind}"
        assert (connection.sessions, connection.restarts, connection.status) == (1, 0, "ready")
        error = raised.value.__cause__
        assert isinstance(error, ServerRequestError) and error.code == types.INTERNAL_ERROR
    log = (tmp_path / ".mcp-run" / "logs" / "w.log").read_text()
    assert "ignored non-JSON-RPC output on stdout: 'this line is not JSON-RPC'" in log
    assert "GLUED-JUNK" in log and "[1, 2, 3]" in log


async def test_broken_tool_list_entries_are_skipped_with_a_warning_and_the_rest_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    path = write_manifest(tmp_path, {"w": wire("--bad-tools")})
    async with load_agent(path) as runtime:
        names = set(runtime.catalog.entries)
        # Entries the protocol refuses: no name, a number for a name, no or a non-object schema.
        for refused in ("w__", "w__42", "w__no_schema", "w__schema_is_text", "w__schema_is_string_type",
                        "w__schema_remote_ref"):
            assert refused not in names
        # Names outside MCP's alphabet are not refused: they get provider-safe names.
        assert {"w__has_space", "w__slash_and_colon"} <= names
        assert {"w__echo", "w__pid", "w__hang", "w__big"} <= names
        # Calls work - the SDK re-lists tools on the first call of each, and must not choke.
        assert (await runtime.caller.call("w__echo", {"text": "fine"})).content == "wire: fine"
        assert (await runtime.caller.call("w__pid", {})).content == str(runtime.fleet.connections["w"].pid)
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    for name in ("''", "42", "'no_schema'", "'schema_is_text'", "'schema_is_string_type'",
                 "'schema_remote_ref'", "without a name"):
        assert sum(f"tool {name} skipped" in message for message in skipped) == 1, (name, skipped)


async def test_a_tool_whose_schema_cannot_be_given_to_a_model_is_skipped_with_a_warning(
    tmp_path: Path,
) -> None:
    path = write_manifest(tmp_path, {"w": wire("--unusable-schema")})
    async with load_agent(path) as runtime:
        # Schemas are converted when tools are first offered to a model: the unusable one is withdrawn then.
        assert "w__schema_ref_to_nothing" not in {tool.name for tool in runtime.catalog.tools}
        assert any("schema_ref_to_nothing" in warning for warning in runtime.catalog.warnings)
        assert (await runtime.caller.call("w__echo", {"text": "fine"})).content == "wire: fine"


async def test_a_ten_megabyte_output_is_guarded_before_it_reaches_the_model(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, {"w": wire(max_output_chars=20_000)})
    async with load_agent(path) as runtime:
        with anyio.fail_after(30):
            output = await runtime.caller.call("w__big", {"chars": TEN_MB})
            assert (await runtime.caller.call("w__echo", {"text": "next"})).content == "wire: next"
    assert isinstance(output.content, str)
    assert 20_000 <= len(output.content) < 21_000
    assert "removed" in output.content
