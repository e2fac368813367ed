"""Chat models from the manifest: providers, API keys, fallbacks, the offline and scripted models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures.openai_stub import OpenAIStub, StubReply
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from mcp_servers.loopback import serve_app
from started_tasks import started_tasks

from runner.agent.graph import build_graph
from runner.errors import ManifestError, ModelError
from runner.manifest import ModelSpec
from runner.models import (
    ModelChain,
    OfflineChatModel,
    ScriptedChatModel,
    TextTurn,
    ToolCallsTurn,
    build_chat_model,
    build_model_chain,
    load_script,
)
from runner.models.registry import install_hint, known_providers, model_requirements, provider_of

SECRET = "sk-test-0123456789-do-not-print"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph runs on asyncio only


@tool
async def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather of a city."""
    return f"sunny, 21 degrees {unit} in {city}"


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def graph_for(model: Any, tools: list[Any]) -> Any:
    return build_graph(
        model,
        tools_provider=lambda: tools,
        system_prompt_provider=lambda: "You report the weather.",
        max_steps=5,
        checkpointer=InMemorySaver(),
    )


# --------------------------------------------------------------------------- provider models


def test_a_provider_without_its_package_names_the_package_to_install(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"pip install langchain-google-genai"):
        build_chat_model(ModelSpec(id="google_genai:gemini-2.5-flash"), base_dir=tmp_path)


def test_an_id_without_a_known_provider_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="provider:model"):
        build_chat_model(ModelSpec(id="my-own-model"), base_dir=tmp_path)


def test_an_unknown_provider_prefix_names_the_known_providers_and_the_closest(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as caught:
        build_chat_model(ModelSpec(id="opnai:gpt-4.1-mini"), base_dir=tmp_path)
    message = str(caught.value)
    assert "unknown model provider 'opnai' (did you mean 'openai'?)" in message
    assert all(name in message for name in ("anthropic", "groq", "ollama", "'offline'", "'scripted'"))


@pytest.mark.parametrize(("model_id", "provider"), [
    ("openai:gpt-4.1-mini", "openai"), ("gpt-4.1-mini", "openai"), ("claude-sonnet-4-5", "anthropic"),
    ("ollama:llama3.1:8b", "ollama"), ("gpt-4o:latest", "openai"),
])
def test_a_provider_is_read_from_the_prefix_or_inferred_as_init_chat_model_does(
    model_id: str, provider: str
) -> None:
    assert provider_of(model_id) == provider


def test_the_providers_read_from_langchains_source_are_those_init_chat_model_imports() -> None:
    from langchain.chat_models import base

    from runner.models.registry import _registry

    assert _registry() == {name: entry[0] for name, entry in base._BUILTIN_PROVIDERS.items()}
    assert known_providers() == sorted(base._BUILTIN_PROVIDERS)


@pytest.mark.parametrize("model_id", ["foo:bar", "llama3.1"])
def test_an_id_with_no_provider_known_or_inferable_is_refused(model_id: str) -> None:
    with pytest.raises(ModelError, match="provider:model"):
        provider_of(model_id)


def test_a_missing_provider_package_names_the_extra_or_the_package_to_install() -> None:
    assert install_hint("langchain-openai") == "pip install 'mcp-run[openai]'"
    assert install_hint("langchain_anthropic") == "pip install 'mcp-run[anthropic]'"
    assert install_hint("langchain-groq") == "pip install langchain-groq"
    (missing, _) = model_requirements("groq:llama-3.1-8b", "groq", spec=None, environ={})
    assert missing == ("model 'groq:llama-3.1-8b' needs the langchain-groq package, which is not "
                       "installed: pip install langchain-groq")


def test_an_unset_api_key_variable_is_named_unless_the_key_comes_another_way() -> None:
    spec = ModelSpec(id="openai:gpt-4.1-mini")
    (missing,) = model_requirements(spec.id, "openai", spec=spec, environ={})
    assert "OPENAI_API_KEY, which is not set: export OPENAI_API_KEY=" in missing
    assert model_requirements(spec.id, "openai", spec=spec, environ={"OPENAI_API_KEY": SECRET}) == []
    with_params = ModelSpec(id="openai:gpt-4.1-mini", params={"api_key": SECRET})
    assert model_requirements(spec.id, "openai", spec=with_params, environ={}) == []
    own = ModelSpec(id="openai:gpt-4.1-mini", api_key_env="MY_LLM_KEY")
    (missing,) = model_requirements(own.id, "openai", spec=own, environ={"OPENAI_API_KEY": SECRET})
    assert "MY_LLM_KEY (model.api_key_env), which is not set" in missing
    (missing,) = model_requirements("google_genai:gemini-2.5-flash", "google_genai", spec=None,
                                    environ={})[1:]
    assert "GOOGLE_API_KEY or GEMINI_API_KEY, none of which is set" in missing
    assert model_requirements("ollama:llama3.1", "ollama", spec=None, environ={})[1:] == []


def test_an_unset_api_key_variable_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_LLM_KEY", raising=False)
    spec = ModelSpec(id="openai:gpt-4.1-mini", api_key_env="MY_LLM_KEY")
    with pytest.raises(ModelError, match="MY_LLM_KEY"):
        build_chat_model(spec, base_dir=tmp_path)


def test_the_api_key_is_read_from_its_variable_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_LLM_KEY", SECRET)
    spec = ModelSpec(
        id="openai:gpt-4.1-mini",
        api_key_env="MY_LLM_KEY",
        base_url="http://127.0.0.1:9/v1",
        params={"temperature": 0.25, "max_retries": 0},
        fallbacks=["offline"],
    )
    chain = build_model_chain(spec, base_dir=tmp_path)
    model = chain.primary
    assert model.openai_api_key.get_secret_value() == SECRET
    assert (model.temperature, model.max_retries) == (0.25, 0)
    assert isinstance(chain.fallbacks[0], OfflineChatModel)
    assert SECRET not in repr(model) and SECRET not in repr(chain) and SECRET not in str(model)


async def test_chat_openai_sends_tools_over_the_wire_and_completes_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_weather_turn_against_stub(tmp_path, monkeypatch, stream=False)


async def test_chat_openai_streams_tool_calls_and_text_through_the_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run_weather_turn_against_stub(tmp_path, monkeypatch, stream=True)


async def run_weather_turn_against_stub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, stream: bool
) -> None:
    monkeypatch.setenv("STUB_KEY", SECRET)
    stub = OpenAIStub([
        StubReply(tool_calls=[("get_weather", {"city": "Paris"})]),
        StubReply(content="It is sunny in Paris."),
    ])
    with serve_app(stub) as server:
        spec = ModelSpec(id="openai:gpt-4.1-mini", base_url=server.url("/v1"), api_key_env="STUB_KEY")
        graph = graph_for(build_chat_model(spec, base_dir=tmp_path), [get_weather])
        request = {"messages": [HumanMessage("Weather in Paris?")]}
        config = {"configurable": {"thread_id": "w"}}
        if stream:
            streamed = [
                chunk async for chunk, _ in graph.astream(request, config, stream_mode="messages")
            ]
            text = "".join(c.content for c in streamed if not isinstance(c, ToolMessage))
            assert text.strip() == "It is sunny in Paris."
            state = (await graph.aget_state(config)).values
        else:
            state = await graph.ainvoke(request, config)
    first, second = stub.requests
    assert [bool(r.get("stream")) for r in stub.requests] == [stream, stream]
    assert stub.headers[0]["authorization"] == f"Bearer {SECRET}"
    (offered,) = first["tools"]
    assert offered["function"]["name"] == "get_weather"
    parameters = offered["function"]["parameters"]
    assert parameters["properties"]["city"]["type"] == "string"
    assert parameters["required"] == ["city"]
    assert first["messages"][0] == {"role": "system", "content": "You report the weather."}
    tool_result = second["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["tool_call_id"] == "call_0"
    assert tool_result["content"] == "sunny, 21 degrees celsius in Paris"
    assert state["messages"][-1].content.strip() == "It is sunny in Paris."


async def test_a_failing_provider_falls_back_to_the_next_model_with_the_same_tools(
    tmp_path: Path,
) -> None:
    stub = OpenAIStub([StubReply(status=500), StubReply(status=500)])
    with serve_app(stub) as server:
        spec = ModelSpec(
            id="openai:gpt-4.1-mini",
            base_url=server.url("/v1"),
            params={"max_retries": 0, "api_key": "unused"},
            fallbacks=["offline"],
            retries={"max_attempts": 1},  # straight to the fallback
        )
        graph = graph_for(build_model_chain(spec, base_dir=tmp_path), [add])
        state = await graph.ainvoke(
            {"messages": [HumanMessage('/call add {"a": 1, "b": 2}')]},
            {"configurable": {"thread_id": "f"}},
        )
    assert len(stub.requests) == 2 and stub.requests[0]["tools"][0]["function"]["name"] == "add"
    assert state["messages"][-1].content == "add returned: 3"


async def test_a_model_error_no_fallback_absorbs_is_a_model_error(tmp_path: Path) -> None:
    stub = OpenAIStub([StubReply(status=500)])
    with serve_app(stub) as server:
        spec = ModelSpec(
            id="openai:gpt-4.1-mini",
            base_url=server.url("/v1"),
            params={"max_retries": 0, "api_key": "unused"},
            retries={"max_attempts": 1},
        )
        chain = build_model_chain(spec, base_dir=tmp_path)
        with pytest.raises(ModelError):
            await chain.ainvoke([HumanMessage("hi")], tools=[add])


# --------------------------------------------------------------------------- the offline model


async def offline_reply(text: str, tools: list[Any]) -> AIMessage:
    return await ModelChain(OfflineChatModel()).ainvoke([HumanMessage(text)], tools=tools)


@pytest.mark.parametrize(
    ("text", "args"),
    [('/call add {"a": 1, "b": 2}', {"a": 1, "b": 2}), ('add {"a": 5, "b": 6}', {"a": 5, "b": 6})],
)
async def test_the_offline_model_turns_a_call_request_into_a_tool_call(
    text: str, args: dict[str, Any]
) -> None:
    reply = await offline_reply(text, [add, get_weather])
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("add", args)]


async def test_the_offline_model_calls_a_tool_without_required_arguments_by_name() -> None:
    @tool
    async def now() -> str:
        """The time."""
        return "noon"

    reply = await offline_reply("now", [now, add])
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("now", {})]


@pytest.mark.parametrize(
    "text",
    ["add", "/call add {not json", "/call add [1, 2]", "/call nothing {}", "hello there", "add me"],
)
async def test_the_offline_model_answers_other_text_without_calling_a_tool(text: str) -> None:
    reply = await offline_reply(text, [add])
    assert reply.tool_calls == [] and reply.content


async def test_the_offline_model_explains_tools_and_how_to_configure_a_real_model() -> None:
    reply = await offline_reply("hello", [add, get_weather])
    assert '/call add {"a": ..., "b": ...}' in reply.content
    assert '/call get_weather {"city": ...}' in reply.content
    assert "model.id" in reply.content


async def test_the_offline_model_reports_every_result_of_the_last_step() -> None:
    messages = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[
            {"name": "add", "args": {}, "id": "1"}, {"name": "get_weather", "args": {}, "id": "2"}
        ]),
        ToolMessage("3", tool_call_id="1", name="add"),
        ToolMessage("no such city", tool_call_id="2", name="get_weather", status="error"),
    ]
    reply = await ModelChain(OfflineChatModel()).ainvoke(messages, tools=[add, get_weather])
    assert reply.content == "add returned: 3\nget_weather failed: no such city"


# --------------------------------------------------------------------------- the scripted model


def test_a_script_file_gives_text_and_tool_call_turns(tmp_path: Path) -> None:
    (tmp_path / "turns.yaml").write_text(
        '- "Hello"\n'
        "- {text: Hi again}\n"
        "- tool_calls:\n"
        "    - {name: add, args: {a: 1, b: 2}, id: c1}\n"
        "    - {name: now}\n"
    )
    model = build_chat_model(ModelSpec(id="scripted", script="turns.yaml"), base_dir=tmp_path)
    assert isinstance(model, ScriptedChatModel)
    assert model.turns[:2] == [TextTurn(text="Hello"), TextTurn(text="Hi again")]
    assert isinstance(model.turns[2], ToolCallsTurn)
    assert [(c.name, c.args, c.id) for c in model.turns[2].tool_calls] == [
        ("add", {"a": 1, "b": 2}, "c1"), ("now", {}, None)
    ]


def test_script_problems_are_located_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "turns.yaml"
    path.write_text(
        '- "fine"\n'
        "- tool_calls:\n"
        "    - args: {a: 1}\n"
        "- 42\n"
        "- {text: hi, colour: red}\n"
    )
    with pytest.raises(ManifestError) as caught:
        load_script(path)
    located = [(p.line, p.column, p.path) for p in caught.value.problems]
    assert located == [
        (3, 7, "1.tool_calls.0.name"),
        (4, 3, "2"),
        (5, 14, "3.colour"),  # the unknown key itself
    ]
    assert all(p.file == str(path) for p in caught.value.problems)


def test_a_script_with_bad_yaml_or_no_file_is_a_located_manifest_error(tmp_path: Path) -> None:
    path = tmp_path / "turns.yaml"
    path.write_text('- "ok"\n- [unclosed\n')
    with pytest.raises(ManifestError) as caught:
        load_script(path)
    assert caught.value.problems[0].line == 3
    with pytest.raises(ManifestError):
        load_script(tmp_path / "missing.yaml")


async def test_the_scripted_model_records_offered_tools_and_fails_clearly_when_used_up() -> None:
    model = ScriptedChatModel([{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 1}}]}, "two"])
    chain = ModelChain(model)
    first = await chain.ainvoke([HumanMessage("1+1")], tools=[add, get_weather])
    assert first.tool_calls[0]["id"] == "call_0_0"
    assert (await chain.ainvoke([HumanMessage("and?")], tools=[])).content == "two"
    assert model.calls == [["add", "get_weather"], []]
    assert model.received[1] == [HumanMessage("and?")]
    with pytest.raises(ModelError):
        await chain.ainvoke([HumanMessage("more")], tools=[])


def test_turns_that_are_not_turns_are_rejected() -> None:
    with pytest.raises(ModelError):
        ScriptedChatModel([{"tool_calls": []}])


@pytest.mark.parametrize("text", ["server__ad {}", "server__ad"])
async def test_the_offline_model_says_a_requested_tool_is_unknown_and_names_the_near_one(text: str) -> None:
    @tool
    async def server__add(a: int) -> int:
        """Add."""
        return a

    reply = await offline_reply(text, [server__add, get_weather])
    assert reply.tool_calls == []
    assert "There is no tool named 'server__ad' (did you mean 'server__add'?)" in reply.content


class CountingModel(ScriptedChatModel):
    """Records the tool sets it is bound to in ``BINDINGS``."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        BINDINGS.append([t.name for t in tools])
        return super().bind_tools(tools, **kwargs)


BINDINGS: list[list[str]] = []


async def test_a_model_chain_binds_a_tool_set_once_and_binds_again_when_the_tools_change() -> None:
    @tool
    async def other(a: int) -> int:
        """Another tool."""
        return a

    BINDINGS.clear()
    model = CountingModel(["one", "two", "three", "four"])
    chain = ModelChain(model)
    prompt = [HumanMessage("hi")]
    await chain.ainvoke(prompt, tools=[add])
    await chain.ainvoke(prompt, tools=[add])  # the same tools, listed again
    assert BINDINGS == [["add"]]
    await chain.ainvoke(prompt, tools=[add, other])  # a tool added: bound anew
    renamed = add.model_copy(update={"name": "plus"})  # another object under the old name's place
    await chain.ainvoke(prompt, tools=[renamed])
    assert BINDINGS == [["add"], ["add", "other"], ["plus"]]
    assert model.calls == [["add"], ["add"], ["add", "other"], ["plus"]]


async def test_the_events_of_a_streamed_model_step_start_no_task_of_their_own() -> None:
    # Each piece moves the attempt's deadline on: LangChain gave that handler a task per event.
    answer = "It is sunny in Paris, as every day this week."
    graph = graph_for(ScriptedChatModel([answer]), [get_weather])
    request = {"messages": [HumanMessage("Weather in Paris?")]}
    config = {"configurable": {"thread_id": "w"}}
    with started_tasks() as handled:
        streamed = [chunk async for chunk, _ in graph.astream(request, config, stream_mode="messages")]
    assert "".join(str(chunk.content) for chunk in streamed) == answer
    assert "_ahandle_event_for_handler" not in handled
