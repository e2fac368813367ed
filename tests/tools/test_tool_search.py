"""Tool search (runner.tools.search) in a running agent: real MCP servers over streamable HTTP with
many tools (tests/mcp_servers/toolbox.py), a scripted model that records what each request offered."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from builders import invoke, server, write_manifest
from langchain_core.messages import HumanMessage, ToolMessage
from mcp_servers.loopback import serve_app
from mcp_servers.toolbox import DOMAINS, NEEDLE, mount_path, wide_app

from runner.agent.host import Host
from runner.agent.runtime import Runtime, load_agent
from runner.manifest import ModelSpec
from runner.models import ModelChain, ScriptedChatModel
from runner.tools.catalog import _mcp_tool_class
from runner.tools.search import SEARCH_TOOL, catalog_definition_bytes, definition_bytes, openai_function
from runner.tools.suggest import unknown_tool_line, unknown_tool_text

WIDE_SERVERS, WIDE_TOOLS = 20, 500  # 10,000 tools, and the needle
SMALL_DOMAINS = ("payments", "weather")  # 2 x 30 tools, and the needle
SMALL_TOOLS = 30
TURN_LIMIT = 60.0


class ScriptedHost(Host):
    """Runs the agent with a scripted model the test holds (to read what each request offered)."""

    def __init__(self, model: ScriptedChatModel) -> None:
        super().__init__()
        self.recording = model

    def model(self, spec: ModelSpec, base_dir: Path) -> ModelChain:
        return ModelChain(self.recording)


@pytest.fixture(scope="module")
def wide_url() -> Iterator[str]:
    """20 toolbox servers of 500 tools on one loopback app (shared by the module's tests)."""
    with serve_app(wide_app(WIDE_SERVERS, WIDE_TOOLS)) as running:
        yield running.url("")


@pytest.fixture(scope="module")
def small_url() -> Iterator[str]:
    with serve_app(wide_app(len(SMALL_DOMAINS), SMALL_TOOLS, domains=SMALL_DOMAINS)) as running:
        yield running.url("")


def toolbox_servers(url: str, domains: Sequence[str], **settings: Any) -> dict[str, Any]:
    return {domain: {"url": url + mount_path(index), **settings.get(domain, {})}
            for index, domain in enumerate(domains)}


def agent(
    folder: Path, servers: dict[str, Any], *, search: Any = "auto", checkpointer: str = "memory", **top: Any
) -> Path:
    """The manifest of a scripted agent; the test's ScriptedAdapter supplies the turns."""
    (folder / "turns.yaml").write_text("- unused\n")
    return write_manifest(folder, servers, model={"id": "scripted", "script": "turns.yaml"},
                          checkpointer=checkpointer, agent={"tool_search": search}, **top)


async def turn(runtime: Runtime, text: str) -> dict[str, Any]:
    with anyio.fail_after(TURN_LIMIT):
        return await runtime.graph.ainvoke({"messages": [HumanMessage(text)]}, runtime.config())


def results(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def search_call(query: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": SEARCH_TOOL, "args": {"query": query, **args}}]}


def convert_call() -> dict[str, Any]:
    return {"tool_calls": [{"name": f"payments__{NEEDLE}",
                            "args": {"amount": 100, "source": "EUR", "target": "USD"}}]}


async def test_the_agent_finds_and_calls_one_tool_among_ten_thousand_sending_under_two_percent(
    tmp_path: Path, wide_url: str
) -> None:
    model = ScriptedChatModel([search_call("convert money into another currency"), convert_call(), "125 USD"])
    path = agent(tmp_path, toolbox_servers(wide_url, DOMAINS[:WIDE_SERVERS]))
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        assert len(runtime.catalog.entries) == WIDE_SERVERS * WIDE_TOOLS + 1
        state = await turn(runtime, "How much is 100 EUR in USD?")
        full_bytes = definition_bytes(runtime.catalog.tools)
        assert catalog_definition_bytes(runtime.catalog) == full_bytes  # sized without LangChain tools
    found, converted = results(state)
    assert found.text.splitlines()[1].startswith(f"- payments__{NEEDLE}: Convert an amount of money")
    assert (converted.status, converted.text) == ("success", "100 EUR = 125.00 USD")
    assert model.calls[0] == [SEARCH_TOOL]
    assert f"payments__{NEEDLE}" in model.calls[1] and len(model.calls[1]) <= 1 + 8
    assert state["found_tools"][0] == f"payments__{NEEDLE}"
    assert max(model.offered_bytes) <= 0.02 * full_bytes, (model.offered_bytes, full_bytes)


async def test_pinned_tools_are_offered_at_every_step_beside_search(tmp_path: Path, small_url: str) -> None:
    model = ScriptedChatModel(["hello"])
    servers = toolbox_servers(small_url, SMALL_DOMAINS, weather={"tools": {"pin": ["get_alert", "list_*"]}})
    async with load_agent(agent(tmp_path, servers, search="on"), host=ScriptedHost(model)) as runtime:
        await turn(runtime, "hi")
    assert model.calls[0][0] == SEARCH_TOOL
    assert sorted(model.calls[0][1:]) == ["weather__get_alert", "weather__list_account",
                                          "weather__list_address", "weather__list_alert"]


async def test_off_offers_every_tool_and_no_search(tmp_path: Path, small_url: str) -> None:
    model = ScriptedChatModel(["hello"])
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), search="off")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        await turn(runtime, "hi")
        everything = sorted(runtime.catalog.entries)
    assert sorted(model.calls[0]) == everything and len(everything) == 2 * SMALL_TOOLS + 1
    assert SEARCH_TOOL not in model.calls[0]


@pytest.mark.parametrize(("search", "searching"), [
    ({"max_tools": 61}, False),  # 61 tools: at the threshold, not past it
    ({"max_tools": 60}, True),
    ({"max_tools": 100, "max_bytes": 1_000_000}, False),
    ({"max_tools": 100, "max_bytes": 2_000}, True),  # the definitions are larger than that
])
async def test_auto_turns_search_on_past_the_tool_count_or_the_bytes_threshold(
    tmp_path: Path, small_url: str, search: dict[str, Any], searching: bool
) -> None:
    model = ScriptedChatModel(["hello"])
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), search={"mode": "auto", **search})
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        await turn(runtime, "hi")
    assert (model.calls[0] == [SEARCH_TOOL]) is searching
    assert len(model.calls[0]) == (1 if searching else 2 * SMALL_TOOLS + 1)


async def test_auto_searches_past_the_providers_tool_limit_and_offers_no_more_than_it(
    tmp_path: Path, small_url: str
) -> None:
    # OpenAI takes at most 128 tools: 3 servers of 50 are past it though max_tools allows 1,000.
    from runner.tools.catalog import ToolCatalog
    from runner.tools.search import ToolSearch

    with serve_app(wide_app(3, 50)) as running:
        path = write_manifest(tmp_path, toolbox_servers(running.url(""), DOMAINS[:3]),
                              model="openai:gpt-4.1-mini", agent={"tool_search": {"max_tools": 1000}})
        async with load_agent(path, model=False) as runtime:
            catalog = ToolCatalog(runtime.manifest, runtime.fleet.connections, tmp_path)
            search = ToolSearch(lambda: catalog, runtime.manifest.agent.tool_search)
            found = list(catalog.entries)  # as if the model had found them all
            offered = [tool.name for tool in search.offered(found)]
    assert search.active()
    assert len(offered) == 128 and offered[0] == SEARCH_TOOL
    assert offered[1:] == found[-127:]  # the tools found longest ago gave way


async def test_a_resumed_thread_keeps_the_tools_it_found(tmp_path: Path, small_url: str) -> None:
    servers = toolbox_servers(small_url, SMALL_DOMAINS)
    path = agent(tmp_path, servers, search="on", checkpointer="sqlite:///state.sqlite")
    first = ScriptedChatModel([search_call("weather alerts", limit=2), "found them"])
    async with load_agent(path, thread_id="kept", host=ScriptedHost(first)) as runtime:
        state = await turn(runtime, "find weather alerts")
    found = state["found_tools"]
    assert len(found) == 2 and all(name.startswith("weather__") for name in found)
    again = ScriptedChatModel(["still here"])
    async with load_agent(path, thread_id="kept", host=ScriptedHost(again)) as runtime:
        await turn(runtime, "and now?")
    assert again.calls[0] == [SEARCH_TOOL, *found]


async def test_a_tool_not_found_yet_can_still_be_called_by_its_name(tmp_path: Path, small_url: str) -> None:
    model = ScriptedChatModel([convert_call(), "done"])
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), search="on")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        state = await turn(runtime, "convert")
    [converted] = results(state)
    assert (converted.status, converted.text) == ("success", "100 EUR = 125.00 USD")
    assert model.calls == [[SEARCH_TOOL], [SEARCH_TOOL]]  # it ran, but was not added


async def test_a_search_without_a_query_or_without_matches_answers_the_model(
    tmp_path: Path, small_url: str
) -> None:
    model = ScriptedChatModel([search_call(""), search_call("quantum teleportation"), "none"])
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), search="on")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        state = await turn(runtime, "search")
    empty, nothing = results(state)
    assert empty.status == "error" and "needs a 'query'" in empty.text
    assert nothing.status == "success" and nothing.text.startswith("No tool matches")
    assert state.get("found_tools", []) == []


async def test_a_found_tool_that_disappears_is_no_longer_offered_and_one_added_can_be_found(
    tmp_path: Path
) -> None:
    model = ScriptedChatModel([
        search_call("added_one"),
        {"tool_calls": [{"name": "dynamic__remove_tool", "args": {"name": "added_one"}}]},
        {"tool_calls": [{"name": "dynamic__add_tool", "args": {"name": "added_two"}}]},
        search_call("added_two"),
        "done",
    ])
    path = agent(tmp_path, {"dynamic": server("dynamic")}, search="on")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        await runtime.caller.call("dynamic__add_tool", {"name": "added_one"})
        with anyio.fail_after(TURN_LIMIT):
            while "dynamic__added_one" not in runtime.catalog.entries:
                await runtime.settle()
        state = await turn(runtime, "go")
    assert "dynamic__added_one" in model.calls[1]
    assert "dynamic__added_one" not in model.calls[2]  # removed: dropped without a word
    assert "dynamic__added_two" in model.calls[4]
    assert all(m.status == "success" for m in results(state))


def test_the_chats_tools_command_lists_every_tool_and_marks_those_the_model_is_offered(
    tmp_path: Path,
) -> None:
    from builders import JsonChat

    write_manifest(tmp_path, {"pay": server("toolbox", "--transport", "stdio")}, model="offline",
                   checkpointer="memory", agent={"tool_search": "on"})
    chat = JsonChat(tmp_path)
    try:
        assert len(chat.wait_for("ready")["tools"]) == 501
        chat.send({"text": "/tools"})
        listed = chat.wait_for("tools")
        assert listed["search"] is True and len(listed["tools"]) == 501
        assert not any(row["offered"] for row in listed["tools"])
        chat.send({"text": 'search_tools {"query": "convert money", "limit": 1}'})
        assert chat.wait_for("tool_result")["text"].splitlines()[1].startswith(f"- pay__{NEEDLE}:")
        chat.wait_for("final")
        chat.send({"text": "/tools"})
        offered = [row["name"] for row in chat.wait_for("tools")["tools"] if row["offered"]]
        assert offered == [f"pay__{NEEDLE}"]
        chat.send({"text": "/exit"})
        assert chat.process.wait(timeout=60) == 0
    finally:
        if chat.process.poll() is None:
            chat.process.terminate()
            chat.process.wait(timeout=60)


async def test_a_reload_keeps_the_found_tools_and_applies_new_pins_and_modes(
    tmp_path: Path, small_url: str
) -> None:
    from runner.agent.reload import reload_runtime

    servers = toolbox_servers(small_url, SMALL_DOMAINS)
    model = ScriptedChatModel([search_call(NEEDLE, limit=1), "found", "pinned", "everything"])
    path = agent(tmp_path, servers, search="on")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        await turn(runtime, "find the converter")
        servers["weather"]["tools"] = {"pin": ["get_alert"]}
        agent(tmp_path, servers, search="on")
        with anyio.fail_after(TURN_LIMIT):
            await reload_runtime(runtime)
        await turn(runtime, "again")
        agent(tmp_path, servers, search="off")
        with anyio.fail_after(TURN_LIMIT):
            await reload_runtime(runtime)
        await turn(runtime, "and now")
        everything = sorted(runtime.catalog.entries)
    assert model.calls[1] == [SEARCH_TOOL, f"payments__{NEEDLE}"]
    assert sorted(model.calls[2]) == sorted([SEARCH_TOOL, "weather__get_alert", f"payments__{NEEDLE}"])
    assert sorted(model.calls[3]) == everything


async def test_a_search_and_a_call_in_the_same_step_both_answer_before_the_next_model_call(
    tmp_path: Path, small_url: str
) -> None:
    both = {"tool_calls": [*search_call("weather alerts")["tool_calls"], *convert_call()["tool_calls"]]}
    model = ScriptedChatModel([both, "done"])
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), search="on")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        state = await turn(runtime, "both")
    found, converted = results(state)
    assert found.text.startswith("Found 8 tools") and converted.text == "100 EUR = 125.00 USD"
    assert len(model.calls) == 2 and len(model.calls[1]) == 1 + 8


async def test_a_tool_of_its_own_named_search_tools_keeps_search_off_and_stays_callable(
    tmp_path: Path,
) -> None:
    (tmp_path / "mine.py").write_text('def search_tools(query: str) -> str:\n'
                                      '    """My own search."""\n    return "mine: " + query\n')
    model = ScriptedChatModel([search_call("x"), "done"])
    path = agent(tmp_path, {}, search="on", local_tools=["mine:search_tools"])
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        state = await turn(runtime, "search")
    assert [m.text for m in results(state)] == ["mine: x"]
    assert runtime.generation.tool_search is not None and not runtime.generation.tool_search.active()


async def test_auto_turns_search_on_mid_turn_when_a_server_adds_tools_past_the_threshold(
    tmp_path: Path,
) -> None:
    model = ScriptedChatModel([
        {"tool_calls": [{"name": "dynamic__add_tools", "args": {"names": ["one", "two"]}}]}, "done"])
    path = agent(tmp_path, {"dynamic": server("dynamic")}, search={"max_tools": 9})
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        assert len(runtime.catalog.entries) == 8
        await turn(runtime, "add two tools")
        assert len(runtime.catalog.entries) == 10
    assert len(model.calls[0]) == 8 and SEARCH_TOOL not in model.calls[0]
    assert model.calls[1] == [SEARCH_TOOL]


async def test_auto_never_searches_for_the_offline_model_which_calls_the_tools_named(
    tmp_path: Path, small_url: str
) -> None:
    path = write_manifest(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), model="offline",
                          checkpointer="memory", agent={"tool_search": {"max_tools": 10}})
    async with load_agent(path) as runtime:
        state = await turn(runtime, f'payments__{NEEDLE} {{"amount": 100, "source": "EUR", "target": "USD"}}')
    assert results(state)[0].text == "100 EUR = 125.00 USD"


async def test_an_unknown_tool_is_answered_with_close_names_and_search_not_the_whole_catalog(
    tmp_path: Path, small_url: str
) -> None:
    wrong = {"tool_calls": [{"name": "payments__get_acount", "args": {}}]}
    model = ScriptedChatModel([wrong, "sorry"])
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), search="on")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        state = await turn(runtime, "account")
    [answer] = results(state)
    assert answer.status == "error"
    assert answer.text.startswith(
        "There is no tool named 'payments__get_acount'. Did you mean 'payments__get_account'"
    )
    assert answer.text.endswith(
        f"{2 * SMALL_TOOLS + 1} tools available; use search_tools to find one by what it does."
    )
    assert "weather__" not in answer.text and len(answer.text) < 400


def test_an_unknown_name_lists_a_few_close_names_and_a_count_never_thousands() -> None:
    names = [f"big__tool_{number:04}" for number in range(2000)]
    text = unknown_tool_text("big__tool_12345", names)
    assert text.count("big__tool_") <= 1 + 5 and text.endswith("2000 tools available.")
    assert unknown_tool_text("echo", ["demo__echo", "demo__add"]) == (
        "There is no tool named 'echo'. Available tools: demo__add, demo__echo.")
    line = unknown_tool_line("tool_0001", names)
    assert "'big__tool_0001'" in line and line.endswith("2000 tools, `mcp-run tools FILE` lists them")
    assert len(line) < 300
    assert "offered to the model only" in unknown_tool_line(SEARCH_TOOL, names)


async def test_search_tools_is_an_unknown_tool_when_search_is_off(tmp_path: Path, small_url: str) -> None:
    model = ScriptedChatModel([search_call("convert money"), "ok"])
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), search="off")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        state = await turn(runtime, "convert")
    [answer] = results(state)
    assert answer.status == "error" and answer.text.startswith(f"There is no tool named '{SEARCH_TOOL}'.")
    assert state.get("found_tools", []) == []


async def test_a_search_that_finds_one_tool_says_one_tool(tmp_path: Path, small_url: str) -> None:
    model = ScriptedChatModel([search_call("convert money into another currency", limit=1), "ok"])
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS), search="on")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        state = await turn(runtime, "convert")
    [found] = results(state)
    assert found.text.startswith(f"Found 1 tool; call it from your next step:\n- payments__{NEEDLE}: ")


async def test_a_tool_the_filters_remove_cannot_be_called_by_name_and_a_pin_on_it_is_warned(
    tmp_path: Path, small_url: str
) -> None:
    removed = {"tool_calls": [{"name": "weather__get_alert", "args": {}}]}
    model = ScriptedChatModel([removed, "ok"])
    filters = {"tools": {"except": ["get_alert"], "pin": ["get_alert", "list_alert"]}}
    path = agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS, weather=filters), search="on")
    async with load_agent(path, host=ScriptedHost(model)) as runtime:
        state = await turn(runtime, "alert")
        warnings = runtime.catalog.warnings
    [answer] = results(state)
    assert answer.status == "error" and answer.text.startswith("There is no tool named 'weather__get_alert'.")
    assert "weather__get_alert" not in model.calls[0] and "weather__list_alert" in model.calls[0]
    assert any(warning.endswith(": servers.weather.tools.pin[0]: 'get_alert' pins only tools that "
                                "tools.except removes") for warning in warnings), warnings
    assert not any("pin[1]" in warning for warning in warnings)


def test_the_tools_command_marks_what_the_model_starts_with_when_search_is_on(
    tmp_path: Path, small_url: str
) -> None:
    servers = toolbox_servers(small_url, SMALL_DOMAINS, weather={"tools": {"pin": ["get_alert"]}})
    path = agent(tmp_path, servers, search="on")
    env = {"COLUMNS": "200"}
    listed = invoke("tools", str(path), env=env)
    assert listed.exit_code == 0, listed.stderr
    assert "* weather__get_alert" in listed.stdout and "* payments__" not in listed.stdout
    assert "tool search is on: the model is offered search_tools and the 1 marked *" in listed.stdout
    rows = json.loads(invoke("tools", str(path), "--json", env=env).stdout)
    assert [row["name"] for row in rows if row["offered"]] == ["weather__get_alert"]
    off = invoke("tools", str(agent(tmp_path, servers, search="off")), env=env)
    assert off.exit_code == 0, off.stderr
    assert "tool search" not in off.stdout and "* " not in off.stdout


async def test_deciding_on_search_by_size_makes_no_langchain_tool_of_a_server_tool(
    tmp_path: Path, small_url: str
) -> None:
    model = ScriptedChatModel(["hello"])
    async with load_agent(agent(tmp_path, toolbox_servers(small_url, SMALL_DOMAINS)),
                          host=ScriptedHost(model)) as runtime:
        assert runtime.generation.tool_search.active() is False  # 61 small tools: under every limit
        made = [name for name, entry in runtime.catalog.entries.items()
                if entry.definition is not None and entry.built is not None]
    assert made == []


TRICKY_SCHEMAS = [
    {"type": "object", "properties": {"text": {"title": "Text", "type": "string"}}, "required": ["text"],
     "title": "echoArguments"},
    {"type": "object", "title": "T", "description": "the schema's own words",
     "properties": {"title": {"title": "Title", "type": "string"}, "nested": {
         "type": "object", "title": "Nested", "properties": {"title": {"type": "integer", "title": "N"}}}}},
    {"type": "object", "properties": {"item": {"$ref": "#/$defs/Item"}, "items": {
        "type": "array", "items": {"$ref": "#/$defs/Item"}}},
     "$defs": {"Item": {"title": "Item", "type": "object", "properties": {"name": {"type": "string"}}}}},
    {"type": "object", "properties": {"choice": {"anyOf": [{"title": "A", "type": "string"},
                                                           {"title": "B", "type": "integer"}]}}},
    {"type": "object", "properties": {}},
]


@pytest.mark.parametrize("schema", TRICKY_SCHEMAS)
@pytest.mark.parametrize("description", ["Does one thing.", ""])
def test_a_definition_is_sized_in_the_form_langchain_sends_it(
    schema: dict[str, Any], description: str
) -> None:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    async def run(**arguments: Any) -> str:
        return ""

    tool = _mcp_tool_class()(name="srv__tool", description=description, args_schema=schema, coroutine=run)
    assert {"type": "function", "function": openai_function("srv__tool", description, schema)} == \
        convert_to_openai_tool(tool)
