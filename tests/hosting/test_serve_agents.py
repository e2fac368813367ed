"""`mcp-run serve` offers each agent of ``agents:`` as a tool of its own name: a real MCP client
gives it a task directly, on threads kept apart from the main agent's, and answers its questions."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from builders import ROOT
from mcp.shared.exceptions import MCPError
from mcp_servers import gates as gates_server
from serving import call_message, stdio_agent, text_of, write_served_agent
from test_serve_questions import ERAS, answering

LIMIT = 90


async def test_a_client_calls_an_agent_of_agents_directly_by_its_name_over_stdio() -> None:
    with anyio.fail_after(LIMIT):
        async with stdio_agent(ROOT / "examples" / "agents" / "research.yaml") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert list(tools) == ["ask", "researcher", "writer"]
            assert tools["researcher"].input_schema["required"] == ["task"]
            assert "Finds facts and does arithmetic" in (tools["researcher"].description or "")

            result = await client.call_tool("researcher", {"task": "What is 6*7?"})
            assert not result.is_error, text_of(result)
            assert result.structured_content is not None
            assert result.structured_content["answer"] == text_of(result) == "6*7 is 42."
            assert result.structured_content["new"] is True
            thread = result.structured_content["thread"]

            # The same thread id names another conversation for the main agent: still new there.
            asked = await client.call_tool("ask", {"message": "hello", "thread": thread})
            assert asked.structured_content is not None and asked.structured_content["new"] is True
            # Both are listed: the agent's as the checkpointer keeps it, and readable so.
            listed = sorted(resource.uri for resource in (await client.list_resources()).resources)
            assert listed == [f"mcp-run://threads/{thread}", f"mcp-run://threads/{thread}@researcher"]
            read = await client.read_resource(f"mcp-run://threads/{thread}@researcher")
            history = json.loads(read.contents[0].text)  # type: ignore[union-attr]
            assert (history["thread"], history["agent"]) == (thread, "researcher")
            messages = [(m["role"], m["text"]) for m in history["messages"]]
            assert (messages[0], messages[-1]) == (("user", "What is 6*7?"), ("assistant", "6*7 is 42."))
            main = await client.read_resource(f"mcp-run://threads/{thread}")
            main_history = json.loads(main.contents[0].text)  # type: ignore[union-attr]
            assert [m["text"] for m in main_history["messages"] if m["role"] == "user"] == ["hello"]
            for uri, why in ((f"mcp-run://threads/{thread}@nobody", 'unknown agent "nobody"'),
                             ("mcp-run://threads/new@writer", "a call of writer with this thread id")):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(uri)
                assert refused.value.code == -32002 and why in refused.value.message
            # A caller still names only a thread id in a call: the @ form is the store's.
            named = await client.call_tool("researcher", {"task": "6*7?", "thread": f"{thread}@researcher"})
            assert named.is_error and "invalid thread id" in text_of(named)

            wrong = await client.call_tool("researcher", {"message": "What is 6*7?"})
            assert wrong.is_error
            assert text_of(wrong) == "unknown argument message: researcher takes task and thread"
            unknown = await client.call_tool("nobody", {"task": "x"})
            assert unknown.is_error and "'ask', 'researcher', 'writer'" in text_of(unknown)


@pytest.mark.parametrize("mode", ERAS)
async def test_an_approval_an_agent_of_agents_asks_is_relayed_to_the_client_that_called_it(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], mode: str
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"],
                                  agents={"helper": {"description": "Takes notes.", "tools": ["gates"]}})
    asked: list[types.ElicitRequestParams] = []
    accept = answering(types.ElicitResult(action="accept", content={"approve": True}), asked)
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, mode=mode, elicitation_callback=accept) as client:
            result = await client.call_tool("helper", {"task": call_message("gates__note", text="yes")})
    assert text_of(result) == "gates__note returned: noted yes"
    [question] = asked
    assert question.message == 'helper wants to call the tool gates__note with {"text": "yes"}. Allow it?'
    assert log.log == ["note yes"]


async def test_an_approval_and_a_form_a_sub_agent_asks_during_the_main_agents_turn_name_that_agent(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"], agent={"agents": ["helper"]},
                                  agents={"helper": {"description": "Takes notes.", "tools": ["gates"]}})
    asked: list[types.ElicitRequestParams] = []
    answer = types.ElicitResult(action="accept", content={"approve": True, "colour": "teal"})  # fits both
    accept = answering(answer, asked)
    task = call_message("gates__note", text="deep")
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, elicitation_callback=accept) as client:
            result = await client.call_tool("ask", {"message": call_message("helper", task=task)})
            assert not result.is_error, text_of(result)
            form = await client.call_tool("ask", {"message": call_message(
                "helper", task=call_message("gates__ask_user"))})
    assert "colour: accept teal" in text_of(form)
    approval, question = asked
    assert approval.message == 'helper wants to call the tool gates__note with {"text": "deep"}. Allow it?'
    assert question.message == "[helper · gates] Which colour?"
