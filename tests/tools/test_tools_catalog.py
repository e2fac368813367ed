"""The tool catalog end to end: real stdio servers through the fleet, filters, names, argument
validation, content, output guard, fallbacks, local and resource tools, and the CLI."""

from __future__ import annotations

import builtins
import json
import os
import signal
import sys
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import ROOT, invoke, server, write_manifest
from fixtures import hooks

from runner.agent.reconcile import launch_spec
from runner.errors import BuildError, ToolError
from runner.manifest.loading import parse_manifest
from runner.servers import open_fleet
from runner.tools.asking import Answered
from runner.tools.caller import RETRIES_KEY, ToolCaller
from runner.tools.catalog import ToolCatalog
from runner.tools.naming import NAME_PATTERN

pytestmark = pytest.mark.anyio
TESTS = ROOT / "tests"
FAST = {"timeout": "10s", "startup_timeout": "30s",
        "restart": {"max_attempts": 3, "backoff": "50ms", "max_backoff": "200ms"}}


def demo(**settings: Any) -> dict[str, Any]:
    return server("demo", **settings)


def write_agent(folder: Path, servers: dict[str, Any], **top: Any) -> Path:
    return write_manifest(folder, servers, name="t", defaults=FAST, **top)


def calls(catalog: ToolCatalog) -> ToolCaller:
    """What calls ``catalog``'s tools on their own: servers' questions declined, no progress."""
    return ToolCaller(lambda: catalog)


@asynccontextmanager
async def catalog_for(tmp_path: Path, servers: dict[str, Any], **top: Any) -> AsyncIterator[ToolCatalog]:
    path = write_agent(tmp_path, servers, **top)
    loaded = parse_manifest(path.read_text(), file=str(path), path=path)
    specs = {key: launch_spec(spec) for key, spec in loaded.manifest.servers.items()}
    with anyio.fail_after(60):
        async with open_fleet(specs, base_dir=TESTS, state_dir=tmp_path / "state") as fleet:
            yield ToolCatalog(loaded.manifest, fleet.connections, TESTS)


async def test_tools_are_namespaced_filtered_renamed_and_valid_for_every_provider(tmp_path: Path) -> None:
    tools = {"only": ["echo", "add", "sle*"], "rename": {"add": "plus"}, "approve": ["sleep"]}
    async with catalog_for(tmp_path, {"demo": demo(tools=tools)}) as catalog:
        assert sorted(catalog.entries) == ["demo__echo", "demo__plus", "demo__sleep"]
        assert all(__import__("re").match(NAME_PATTERN, name) for name in catalog.entries)
        assert catalog.entries["demo__plus"].origin == ("demo", "add")
        assert catalog.needs_approval("demo__sleep") and not catalog.needs_approval("demo__echo")


async def test_two_servers_offering_the_same_tool_get_distinct_names(tmp_path: Path) -> None:
    async with catalog_for(tmp_path, {"one": demo(tools={"only": ["echo"]}),
                                      "two": demo(tools={"only": ["echo"]})}) as catalog:
        assert sorted(catalog.entries) == ["one__echo", "two__echo"]
        output = await calls(catalog).call("two__echo", {"text": "hi"})
        assert "hi" in str(output.content)


async def test_a_rename_that_collides_is_a_build_error_naming_both_sources(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as caught:
        async with catalog_for(tmp_path, {"demo": demo(tools={"rename": {"add": "echo"}})}):
            pass
    assert "add" in str(caught.value) and "echo" in str(caught.value)


async def test_a_filter_function_and_a_filter_entry_matching_nothing(tmp_path: Path) -> None:
    servers = {"a": demo(tools={"filter": "fixtures.hooks:only_arithmetic"}),
               "b": demo(tools={"only": ["echo", "ecko"]})}
    async with catalog_for(tmp_path, servers) as catalog:
        assert sorted(catalog.entries) == ["a__add", "a__echo", "b__echo"]
        assert any("ecko" in warning and "echo" in warning for warning in catalog.warnings)


async def test_invalid_arguments_are_listed_for_the_model_without_calling_the_server(tmp_path: Path) -> None:
    async with catalog_for(tmp_path, {"demo": demo()}) as catalog:
        with pytest.raises(ToolError) as caught:
            await calls(catalog).call("demo__add", {"a": "one", "c": 3})
        text = str(caught.value)
        assert "a:" in text and "'b' is a required property" in text


async def test_a_required_property_with_a_default_may_be_left_out_as_playwright_tools_allow(
    tmp_path: Path,
) -> None:
    screenshots = {"command": "python", "args": [str(TESTS / "mcp_servers" / "screenshots.py")]}
    async with catalog_for(tmp_path, {"browser": screenshots}) as catalog:
        arguments = {"type": "jpeg", "fullPage": True}
        output = await calls(catalog).call("browser__browser_take_screenshot", arguments)
        assert output.content == "screenshot type=jpeg scale=css fullPage=True"
        with pytest.raises(ToolError, match="scale: 'huge' is not one of"):
            await calls(catalog).call("browser__browser_take_screenshot", {"scale": "huge"})


async def test_a_domain_error_reaches_the_model_and_never_falls_back(tmp_path: Path) -> None:
    hooks.FALLBACKS.clear()
    servers = {"primary": demo(fallback="backup", on_fallback="fixtures.hooks:record_fallback"),
               "backup": demo(expose=False)}
    async with catalog_for(tmp_path, servers) as catalog:
        with pytest.raises(ToolError, match="broken on purpose"):
            await calls(catalog).call("primary__fail", {"message": "broken on purpose"})
    assert hooks.FALLBACKS == []


async def test_a_hanging_primary_falls_back_and_the_hook_sees_the_timeout(tmp_path: Path) -> None:
    hooks.FALLBACKS.clear()
    servers = {
        "primary": demo(fallback="backup", on_fallback="fixtures.hooks:record_fallback",
                        tools={"timeouts": {"sleep": "200ms"}}),
        "backup": demo(expose=False),
    }
    async with catalog_for(tmp_path, servers) as catalog:
        assert "backup__sleep" not in catalog.entries
        output = await calls(catalog).call("primary__sleep", {"seconds": 0.4})
    assert "0.4" in str(output.content)
    (event,) = hooks.FALLBACKS
    assert (event.server, event.fallback, event.tool) == ("primary", "backup", "sleep")
    assert type(event.error).__name__ == "ServerTimeoutError"


async def test_a_killed_primary_is_answered_by_its_fallback(tmp_path: Path) -> None:
    servers = {
        "primary": demo(fallback="backup", timeout="500ms",
                        restart={"max_attempts": 2, "backoff": "30s", "max_backoff": "30s"}),
        "backup": demo(expose=False),
    }
    async with catalog_for(tmp_path, servers) as catalog:
        primary = catalog.connections["primary"]
        backup_pid = catalog.connections["backup"].pid
        os.kill(primary.pid, signal.SIGKILL)
        with anyio.fail_after(10):
            await primary.wait_for_status("restarting", "failed")
        output = await calls(catalog).call("primary__pid", {})
    assert str(backup_pid) in str(output.content)


async def test_a_server_that_failed_to_start_offers_its_tools_through_its_fallback(tmp_path: Path) -> None:
    servers = {
        "flaky": {"command": "mcp-run-no-such-command", "fallback": "backup", "tools": {"except": ["add"]}},
        "backup": demo(expose=False),
    }
    async with catalog_for(tmp_path, servers) as catalog:
        assert catalog.connections["flaky"].status == "failed"
        assert "flaky__echo" in catalog.entries and "flaky__add" not in catalog.entries
        output = await calls(catalog).call("flaky__pid", {})
        assert str(catalog.connections["backup"].pid) in str(output.content)


class Listening:
    """A host that answers no question and keeps the events of the calls it runs."""

    answers_questions = False

    def __init__(self) -> None:
        self.events: list[Any] = []

    async def answer(self, server: str, question: Any) -> Any:
        return await Answered().decline(server, question)

    def progress_sink(self) -> Any:
        return self.events.append


async def test_a_call_made_again_on_the_fallback_is_an_event_naming_both_servers_and_why(
    tmp_path: Path,
) -> None:
    servers = {"flaky": {"command": "mcp-run-no-such-command", "fallback": "backup"},
               "backup": demo(expose=False)}
    async with catalog_for(tmp_path, servers) as catalog:
        host = Listening()
        caller = ToolCaller(lambda: catalog, host=host)
        message = await caller.run_tool_call({"name": "flaky__echo", "args": {"text": "hi"}, "id": "call-1"})
    assert message is not None and message.content == "hi"
    [retried] = [event for event in host.events if event["type"] == "tool_retry"]
    assert {key: retried[key] for key in ("tool", "server", "fallback", "id")} == {
        "tool": "flaky__echo", "server": "flaky", "fallback": "backup", "id": "call-1"}
    assert retried["reason"].startswith("tools/call 'echo': the server has failed (command not found")
    # Kept with the answer, for the thread's history (no provider is sent response_metadata).
    assert message.response_metadata[RETRIES_KEY] == [
        {"type": "retry", "server": "flaky", "reason": retried["reason"], "fallback": "backup"}]


async def test_an_unknown_tool_error_names_the_servers_that_are_down_and_why(tmp_path: Path) -> None:
    servers = {"flaky": {"command": "mcp-run-no-such-command"}, "demo": demo(tools={"only": ["echo"]})}
    async with catalog_for(tmp_path, servers) as catalog:
        with pytest.raises(ToolError) as raised:
            await calls(catalog).call("flaky__echo", {"text": "hi"})
    message = str(raised.value)
    assert "There is no tool named 'flaky__echo'. Available tools: demo__echo." in message
    assert "Server 'flaky' is down (failed: flaky: command not found: 'mcp-run-no-such-command')" in message


async def test_a_fallback_chain_is_followed_in_order(tmp_path: Path) -> None:
    quick = {"timeouts": {"sleep": "150ms"}}
    servers = {"a": demo(fallback="b", tools=quick), "b": demo(fallback="c", tools=quick, expose=False),
               "c": demo(expose=False)}
    async with catalog_for(tmp_path, servers) as catalog:
        output = await calls(catalog).call("a__sleep", {"seconds": 0.3})
    assert "0.3" in str(output.content)


async def test_a_hook_can_decline_a_fallback(tmp_path: Path) -> None:
    hooks.FALLBACKS.clear()
    servers = {"a": demo(fallback="b", on_fallback="fixtures.hooks:refuse_fallback",
                         tools={"timeouts": {"sleep": "150ms"}}), "b": demo(expose=False)}
    async with catalog_for(tmp_path, servers) as catalog:
        with pytest.raises(ToolError, match="declined"):
            await calls(catalog).call("a__sleep", {"seconds": 0.3})
    assert len(hooks.FALLBACKS) == 1


async def test_images_become_image_blocks_and_big_text_is_guarded(tmp_path: Path) -> None:
    async with catalog_for(tmp_path, {"demo": demo(max_output_chars=1000)}) as catalog:
        image = await calls(catalog).call("demo__image", {})
        big = await calls(catalog).call("demo__big_output", {"chars": 50_000})
    assert any(block.get("type") == "image" and block.get("base64") for block in image.content)
    assert isinstance(big.content, str) and len(big.content) < 1300
    assert "removed" in big.content


async def test_local_tools_sit_beside_mcp_tools_and_report_their_errors(tmp_path: Path) -> None:
    local = ["fixtures.hooks:multiply", "fixtures.hooks:shout", "fixtures.hooks:explode"]
    async with catalog_for(tmp_path, {"demo": demo(tools={"only": ["echo"]})},
                           local_tools=local) as catalog:
        assert sorted(catalog.entries) == ["demo__echo", "explode", "multiply", "shout"]
        assert (await calls(catalog).call("multiply", {"a": 6, "b": 7})).content == "42"
        assert (await calls(catalog).call("shout", {"text": "hi"})).content == "HI"
        with pytest.raises(ToolError, match="RuntimeError: nope"):
            await calls(catalog).call("explode", {"reason": "nope"})


async def test_a_direct_tool_call_answers_exactly_as_the_langchain_tool_does(tmp_path: Path) -> None:
    async with catalog_for(tmp_path, {"demo": demo(max_output_chars=1000)},
                           local_tools=["fixtures.hooks:multiply"]) as catalog:
        for name, arguments in (("demo__echo", {"text": "hi"}), ("demo__image", {})):
            call = {"name": name, "args": arguments, "id": f"call_{name}", "type": "tool_call"}
            direct = await calls(catalog).run_tool_call(call)
            through_langchain = await catalog.entries[name].tool.ainvoke(call)
            assert direct is not None
            assert (direct.content, direct.artifact, direct.status, direct.name, direct.tool_call_id) == (
                through_langchain.content, through_langchain.artifact, through_langchain.status,
                through_langchain.name, through_langchain.tool_call_id)
        with pytest.raises(ToolError, match="invalid arguments"):
            await calls(catalog).run_tool_call({"name": "demo__echo", "args": {"text": 5}, "id": "c"})
        # Local tools, and names the catalog does not know, are left to their LangChain tools.
        local = {"name": "multiply", "args": {"a": 1, "b": 2}, "id": "c"}
        assert await calls(catalog).run_tool_call(local) is None
        assert await calls(catalog).run_tool_call({"name": "nope", "args": {}, "id": "c"}) is None


async def test_a_direct_tool_call_imports_nothing_once_the_first_one_has_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    imported: list[str] = []  # by the runner's own code (the SDK's are its own business)
    real_import = builtins.__import__

    def counted_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__", "").startswith("runner."):
            imported.append(name)
        return real_import(name, *args, **kwargs)

    async with catalog_for(tmp_path, {"demo": demo()}) as catalog:
        call = {"name": "demo__echo", "args": {"text": "hi"}, "id": "first"}
        await calls(catalog).run_tool_call(call)  # the first call may import what the path needs
        monkeypatch.setattr(builtins, "__import__", counted_import)
        answer = await calls(catalog).run_tool_call({**call, "id": "second"})
        monkeypatch.undo()
    assert answer is not None and answer.content == "hi"
    assert imported == []


async def test_a_build_converts_no_schema_and_an_unusable_one_is_withdrawn_when_tools_are_offered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with catalog_for(tmp_path, {"wire": server("wire", "--unusable-schema")}) as catalog:
        assert catalog.schema_cache == {}  # nothing converted, no LangChain tool made
        assert all(entry.built is None for entry in catalog.entries.values())
        catalog.rebuild()  # unchanged tools keep their entries, still unconverted
        unusable = [e.name for e in catalog.entries.values() if "$ref" in str(e.definition.input_schema)]
        assert len(unusable) == 1
        offered = {tool.name for tool in catalog.tools}
        assert unusable[0] not in offered and unusable[0] not in catalog.entries
        assert "wire__echo" in offered
        assert [w for w in catalog.warnings if "skipped: unusable input schema" in w]
        catalog.rebuild()
        assert catalog.tools
    assert len([r for r in caplog.records if "unusable input schema" in r.getMessage()]) == 1


async def test_resource_tools_list_and_read_a_servers_resources(tmp_path: Path) -> None:
    async with catalog_for(tmp_path, {"demo": demo(resources=True, tools={"only": ["echo"]})}) as catalog:
        assert {"demo__list_resources", "demo__read_resource"} <= set(catalog.entries)
        listing = await calls(catalog).call("demo__list_resources", {})
        uri = str(listing.content).split()[0]
        read = await calls(catalog).call("demo__read_resource", {"uri": uri})
    assert uri in str(read.content)


def test_the_tools_command_lists_generated_names_with_their_origin(tmp_path: Path) -> None:
    write_agent(tmp_path, {"demo": demo(tools={"only": ["echo", "add"]})})
    result = invoke("tools", "agent.yaml", "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["name"], r["server"], r["original"]) for r in rows] == [
        ("demo__echo", "demo", "echo"), ("demo__add", "demo", "add")]


def test_the_call_command_goes_through_validation_and_prints_the_result(tmp_path: Path) -> None:
    write_agent(tmp_path, {"demo": demo()})
    ok = invoke("call", "agent.yaml", "demo__add", '{"a": 2, "b": 40}', cwd=tmp_path)
    assert ok.exit_code == 0 and ok.stdout.strip() == "42", ok.stderr
    bad = invoke("call", "agent.yaml", "demo__add", '{"a": "x"}', cwd=tmp_path)
    assert bad.exit_code == 2 and "required property" in bad.stderr  # invalid input, refused before the call
    domain = invoke("call", "agent.yaml", "demo__fail", '{"message": "nope"}', cwd=tmp_path)
    assert domain.exit_code == 1 and "nope" in domain.stderr and "Traceback" not in domain.stderr


async def test_a_fallback_lacking_a_tool_is_a_warning_naming_it(tmp_path: Path) -> None:
    paginated = server("paginated", expose=False)
    servers = {"primary": demo(fallback="other", tools={"only": ["echo"]}), "other": paginated}
    async with catalog_for(tmp_path, servers) as catalog:
        assert "primary__echo" in catalog.entries
    assert any("other" in w and "'echo'" in w for w in catalog.warnings), catalog.warnings


async def test_a_rebuild_after_tools_came_and_went_names_exactly_the_tools_offered_now(
    tmp_path: Path
) -> None:
    async with catalog_for(tmp_path, {"dyn": server("dynamic")}) as catalog:
        before = set(catalog.entries)
        connection = catalog.connections["dyn"]
        await connection.call_tool("add_tool", {"name": "fresh", "announce": False})
        await connection.refresh(("tools",))
        catalog.rebuild()
        assert set(catalog.entries) == before | {"dyn__fresh"}
        await connection.call_tool("remove_tool", {"name": "fresh"})
        await connection.refresh(("tools",))
        catalog.rebuild()
        assert set(catalog.entries) == before


async def test_a_build_of_many_tools_holds_under_half_a_kilobyte_a_tool(tmp_path: Path) -> None:
    async with catalog_for(tmp_path, {"box": server("toolbox")}) as catalog:
        assert len(catalog.entries) >= 500
        tracemalloc.start()
        try:
            again = ToolCatalog(catalog.manifest, catalog.connections, TESTS)
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(again.entries) == len(catalog.entries)
        assert held / len(again.entries) < 500, held / len(again.entries)


async def test_filter_entries_that_match_no_tool_are_warned_at_their_place_in_the_manifest(
    tmp_path: Path,
) -> None:
    from runner.agent.runtime import load_agent

    lines = ["version: 1", "name: globs", "model: offline", "checkpointer: memory", "servers:", "  demo:",
             "    command: python", f"    args: [{TESTS / 'mcp_servers' / 'demo.py'}]", "    tools:",
             '      approve: [echo, ech]', '      pin: ["zz_*", "ech["]', "      rename: {ad: plus}"]
    path = tmp_path / "agent.yaml"
    path.write_text("\n".join(lines) + "\n")
    with anyio.fail_after(60):
        async with load_agent(path) as runtime:
            warnings = runtime.catalog.warnings

    def at(row: int, text: str) -> str:  # where ``text`` starts on line ``row`` (from 0)
        return f"{path}:{row + 1}:{lines[row].index(text) + 1}"

    assert f"{at(9, 'ech]')}: servers.demo.tools.approve[1]: 'ech' matches no tool (did you mean 'echo'?)" \
        in warnings
    assert at(10, '"zz') + ": servers.demo.tools.pin[0]: 'zz_*' matches no tool" in warnings
    malformed = [warning for warning in warnings if "pin[1]" in warning]  # worded as validate words it
    assert malformed == [at(10, '"ech[') + ": servers.demo.tools.pin[1]: 'ech[' is a malformed glob: "
                         "its '[' is never closed, so it matches only a tool whose name has a literal '['"], \
        malformed
    assert f"{at(11, 'ad')}: servers.demo.tools.rename.ad: no tool is called 'ad' (did you mean 'add'?)" \
        in warnings


async def test_a_server_error_answer_says_the_server_request_message_and_code_once(tmp_path: Path) -> None:
    # As a database server on the TypeScript SDK answers: its message repeats the code.
    message = 'MCP error -32602: relation "nope" does not exist'
    async with catalog_for(tmp_path, {"pg": server("answers")}) as catalog:
        with pytest.raises(ToolError) as raised:
            await calls(catalog).call("pg__refused", {"message": message})
    assert str(raised.value) == "pg: tools/call 'refused': relation \"nope\" does not exist (code -32602)"


def test_the_offline_answer_to_a_failed_call_says_error_and_the_tool_once(tmp_path: Path) -> None:
    write_agent(tmp_path, {"pg": server("answers")}, model="offline")
    request = 'pg__refused {"message": "relation \\"nope\\" does not exist"}'
    result = invoke("agent.yaml", "-p", request, cwd=tmp_path)
    assert result.stdout.strip() == (
        "pg__refused failed: pg: tools/call 'refused': relation \"nope\" does not exist (code -32602)"
    ), result.stderr


def test_tools_json_shows_the_servers_input_schema_and_the_provider_form_beside_it(tmp_path: Path) -> None:
    copy = ROOT / "examples" / "notes_server.py"
    write_agent(tmp_path, {"notes": {"command": "python", "args": [str(copy)],
                                     "env": {"NOTES_FILE": str(tmp_path / "notes.json")}}},
                model="openai:gpt-4.1-mini")
    listed = invoke("tools", "agent.yaml", "--json", cwd=tmp_path)
    assert listed.exit_code == 0, listed.stderr
    row = next(row for row in json.loads(listed.stdout) if row["name"] == "notes__calculate")
    expression = row["input_schema"]["properties"]["expression"]
    assert expression["maxLength"] == 200 and "description" not in expression  # as the server sent it
    offered = row["provider_schema"]["properties"]["expression"]
    assert "at most 200 characters" in offered["description"]  # the constraint said in words for the model
