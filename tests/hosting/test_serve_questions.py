"""What the served agent asks reaches the calling client as an elicitation: the approval of a tool
call and a server's own question, in both protocol eras (2025-11-25: a request during the call;
2026-07-28: a result asking for input, then the retried call). A client without elicitation gets
the non-interactive rule at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp_servers import gates as gates_server
from serving import call_message, stdio_agent, text_of, write_served_agent

LIMIT = 90
ERAS = ["legacy", "auto"]  # auto: the 2026-07-28 era, which mcp-run serve speaks


def answering(answer: types.ElicitResult, asked: list[types.ElicitRequestParams]) -> Any:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return answer

    return elicit


@pytest.mark.parametrize("mode", ERAS)
async def test_an_approval_is_asked_of_the_caller_and_an_accept_runs_the_tool(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], mode: str
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])
    asked: list[types.ElicitRequestParams] = []
    accept = answering(types.ElicitResult(action="accept", content={"approve": True}), asked)
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, mode=mode, elicitation_callback=accept) as client:
            result = await client.call_tool("ask", {"message": call_message("gates__note", text="yes")})
    assert text_of(result) == "gates__note returned: noted yes"
    [question] = asked
    assert question.message == 'The agent wants to call the tool gates__note with {"text": "yes"}. Allow it?'
    assert question.requested_schema["required"] == ["approve"]
    assert log.log == ["note yes"]


@pytest.mark.parametrize("mode", ERAS)
async def test_an_approval_the_caller_refuses_or_declines_denies_the_tool_call_with_the_reason(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], mode: str
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])
    answers = [types.ElicitResult(action="accept", content={"approve": False, "reason": "not today"}),
               types.ElicitResult(action="decline")]
    asked: list[types.ElicitRequestParams] = []

    async def refuse(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return answers[len(asked) - 1]

    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, mode=mode, elicitation_callback=refuse) as client:
            refused = await client.call_tool("ask", {"message": call_message("gates__note", text="no")})
            declined = await client.call_tool("ask", {"message": call_message("gates__note", text="nope"),
                                                       "thread": refused.structured_content["thread"]})
    assert "gates__note failed" in text_of(refused) and "not today" in text_of(refused)
    assert "gates__note failed" in text_of(declined)
    assert "the caller's user chose decline" in text_of(declined)
    assert len(asked) == 2
    assert log.log == []


async def test_a_client_without_elicitation_gets_the_approval_denied_at_once(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            result = await client.call_tool("ask", {"message": call_message("gates__note", text="x")})
            asked = await client.call_tool("ask", {"message": call_message("gates__ask_user")})
    assert "gates__note failed" in text_of(result)
    assert "its MCP client has no elicitation" in text_of(result)
    assert "colour: decline None" in text_of(asked)
    assert log.log == ["answer decline None"]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_servers_question_inside_the_agent_is_forwarded_to_the_caller(
    tmp_path: Path, gates: tuple[gates_server.Gates, str], mode: str
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url)
    asked: list[types.ElicitRequestParams] = []
    colour = answering(types.ElicitResult(action="accept", content={"colour": "teal"}), asked)
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, mode=mode, elicitation_callback=colour) as client:
            result = await client.call_tool("ask", {"message": call_message("gates__ask_user")})
    assert text_of(result) == "gates__ask_user returned: colour: accept teal"
    [question] = asked
    assert question.message == "[gates] Which colour?"
    assert log.log == ["answer accept {'colour': 'teal'}"]


async def test_a_question_the_caller_leaves_unanswered_is_refused_after_answer_within(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])
    asked: list[types.ElicitRequestParams] = []

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, "--answer-within", "500ms", mode="legacy",
                               elicitation_callback=never) as client:
            result = await client.call_tool("ask", {"message": call_message("gates__note", text="late")})
    assert len(asked) == 1
    assert "gates__note failed" in text_of(result)
    assert "the caller did not answer within 0.5 s" in text_of(result)
    assert log.log == []


async def test_a_2026_callers_answer_that_comes_later_than_answer_within_is_refused_and_the_tool_never_runs(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = write_served_agent(tmp_path, url, approve=["note"])
    asked: list[types.ElicitRequestParams] = []

    async def late(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        await anyio.sleep(1.0)  # not a wait: it makes the answer late (answer-within is 200 ms)
        return types.ElicitResult(action="accept", content={"approve": True})

    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, "--answer-within", "200ms", mode="auto",
                               elicitation_callback=late) as client:
            result = await client.call_tool("ask", {"message": call_message("gates__note", text="late")})
    assert len(asked) == 1
    assert "gates__note failed" in text_of(result)
    assert "the caller did not answer within 0.2 s" in text_of(result)
    assert log.log == []
