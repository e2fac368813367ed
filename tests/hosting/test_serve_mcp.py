"""`mcp-run serve`: a real MCP client asks the agent over stdio and over HTTP, continues a thread,
receives the turn's progress, reads the agent's prompt commands and its threads, and gets clear
tool errors for bad requests."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_servers import gates as gates_server
from serving import Progress, call_message, http_agent, http_client, stdio_agent, text_of, write_served_agent

LIMIT = 90


async def test_a_client_over_stdio_asks_continues_its_thread_and_reads_it_back(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["ask"]
            first = await client.call_tool("ask", {"message": call_message("gates__note", text="one")})
            assert not first.is_error, text_of(first)
            thread = first.structured_content["thread"]
            assert first.structured_content["answer"] == text_of(first) == "gates__note returned: noted one"

            second = await client.call_tool("ask", {"message": call_message("gates__note", text="two"),
                                                    "thread": thread})
            assert second.structured_content["thread"] == thread
            assert first.structured_content["new"] is True and second.structured_content["new"] is False
            mistyped = await client.call_tool("ask", {"message": "hello", "thread": "nobody-here"})
            assert mistyped.structured_content["new"] is True
            assert mistyped.structured_content["thread"] == "nobody-here"
            assert log.log == ["note one", "note two"]

            listed = (await client.list_resources()).resources
            assert f"mcp-run://threads/{thread}" in [resource.uri for resource in listed]
            read = await client.read_resource(f"mcp-run://threads/{thread}")
            history = json.loads(read.contents[0].text)
            assert history["thread"] == thread
            assert [(m["role"], m["text"]) for m in history["messages"] if m["role"] != "assistant"] == [
                ("user", call_message("gates__note", text="one")), ("tool", "noted one"),
                ("user", call_message("gates__note", text="two")), ("tool", "noted two")]
            templates = (await client.list_resource_templates()).resource_templates
            assert [template.uri_template for template in templates] == ["mcp-run://threads/{thread}"]
            with pytest.raises(MCPError) as unknown:
                await client.read_resource("mcp-run://threads/nobody-there")
            assert unknown.value.code == -32002
            assert "an ask with this thread id starts it, and says new: true" in unknown.value.message


async def test_a_client_over_http_receives_the_turns_tool_calls_and_tokens_as_progress(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url)
    with http_agent(manifest) as served:
        with anyio.fail_after(LIMIT):
            async with http_client(served.url) as client:
                progress = Progress()
                result = await client.call_tool("ask", {"message": call_message("gates__note", text="hi")},
                                                progress_callback=progress)
    assert text_of(result) == "gates__note returned: noted hi"
    assert progress.messages[:2] == ['tool call gates__note {"text": "hi"}',
                                     "tool result gates__note (success): noted hi"]
    assert progress.messages[-1] == "gates__note returned: noted hi"  # the answer so far, at its end


async def test_a_tools_progress_reaches_the_caller_in_the_words_the_chat_shows(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url, demo=True)
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            progress = Progress()
            result = await client.call_tool("ask", {"message": call_message("demo__progress", steps=2)},
                                            progress_callback=progress)
    assert text_of(result) == "demo__progress returned: done 2"
    assert [message for message in progress.messages if message.startswith("demo__progress:")] == [
        "demo__progress: 1/2 (50%) step 1", "demo__progress: 2/2 (100%) step 2"]


async def test_the_agents_prompt_commands_are_offered_as_prompts(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    binding = {"server": "demo", "name": "review", "as": "python_review", "arguments": {"language": "python"}}
    manifest = write_served_agent(tmp_path, url, demo=True, prompts={"mcp": [binding]})
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            prompts = {prompt.name: prompt for prompt in (await client.list_prompts()).prompts}
            assert set(prompts) == {"demo__greet", "demo__review", "python_review"}
            assert [argument.name for argument in prompts["python_review"].arguments] == ["code"]
            got = await client.get_prompt("python_review", {"code": "x = 1"})
            assert "x = 1" in got.messages[0].content.text
            assert "python" in got.messages[0].content.text
            with pytest.raises(MCPError) as missing:
                await client.get_prompt("demo__greet", {})
            assert "name" in missing.value.message


BAD_REQUESTS = [
    ({"message": ""}, "message is empty"),
    ({"message": "   "}, "message is empty"),
    ({"message": 42}, "message must be a string, got int"),
    ({}, "message is missing"),
    ({"message": "hi", "thread": "no spaces allowed"}, "invalid thread id"),
    ({"message": "hi", "thread": 7}, "thread must be a string (the thread id of an earlier answer), got int"),
    ({"message": None}, "message must be a string, got null"),
    ({"thread": "t1"}, "message is missing"),
    ({"message": "hi", "colour": "red"}, "unknown argument colour"),
]


async def test_a_bad_ask_gets_a_tool_error_that_says_what_is_wrong(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            for arguments, complaint in BAD_REQUESTS:
                result = await client.session.call_tool("ask", arguments)
                assert result.is_error, arguments
                assert complaint in text_of(result), (arguments, text_of(result))
            other = await client.session.call_tool("summon", {"message": "hi"})
            assert other.is_error and "this agent has one tool, 'ask'" in text_of(other)
    assert log.log == []


async def test_a_turn_that_fails_in_the_model_is_a_tool_error_and_the_server_keeps_serving(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    (tmp_path / "script.yaml").write_text("- the only answer\n")
    manifest = write_served_agent(tmp_path, url)
    manifest.write_text(manifest.read_text().replace("model: offline",
                                                     "model: {id: scripted, script: script.yaml}"))
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            first = await client.call_tool("ask", {"message": "hello"})
            failed = await client.call_tool("ask", {"message": "again"})
            assert [tool.name for tool in (await client.list_tools()).tools] == ["ask"]
    assert text_of(first) == "the only answer" and not first.is_error
    assert failed.is_error
    assert "the scripted model has no turn left" in text_of(failed)
