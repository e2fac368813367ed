"""URL-mode elicitation (2025-11-25): the server's ``notifications/elicitation/complete`` is an
event of the call, and a call answered -32042 ("visit this URL first") asks the user, waits for
the completion and is made again. Against ``tests/mcp_servers/asking.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from builders import asking_agent
from langgraph.types import Command
from test_elicitation_graph import of_type, turn

from runner.agent.host import Host
from runner.agent.runtime import load_agent
from runner.errors import ServerRequestError
from runner.tools.asking import MAX_QUESTIONS_PER_CALL

pytestmark = pytest.mark.anyio

WAIT = 40.0


def as_the_chat_answers(action: str, question: dict[str, Any]) -> dict[str, Any]:
    """The resume value the chat sends: the action, for that request and its page."""
    return {"action": action, "elicitation_id": question["elicitation_id"], "url": question["url"]}


def as_the_page_answers(action: str, question: dict[str, Any]) -> dict[str, Any]:
    """The resume value the web page sends: the action, for that request."""
    return {"action": action, "elicitation_id": question["elicitation_id"]}


async def test_the_servers_completion_of_a_url_visit_is_an_event_of_the_call(tmp_path: Path) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        [question] = of_type(await turn(runtime, "asking__visit"), "elicitation")
        events = await turn(runtime, Command(resume={"action": "accept"}))
    [complete] = of_type(events, "elicitation_complete")
    assert complete == {"type": "elicitation_complete", "tool": "asking__visit", "server": "asking",
                        "elicitation_id": question["elicitation_id"]}
    kinds = [event["type"] for event in events]
    assert kinds.index("elicitation_complete") < kinds.index("tool_result")


async def test_a_call_that_needs_a_url_visit_first_waits_for_its_completion_then_runs_again(
    tmp_path: Path,
) -> None:
    asked: list[types.ElicitRequestParams] = []
    events: list[dict[str, Any]] = []

    async def accept(server: str, request: Any) -> types.ElicitResult:
        asked.append(request)
        return types.ElicitResult(action="accept")

    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        connection = runtime.fleet.connections["asking"]
        with anyio.fail_after(WAIT):
            result = await connection.call_tool("portal", {"delay": 0.5}, ask=accept, events=events.append)
    [request] = asked
    assert isinstance(request, types.ElicitRequestURLParams)
    assert (request.url, request.elicitation_id) == ("https://portal.example/connect", "connect-1")
    visited = "the user visited the URL the server asked for"
    assert events == [{"type": "elicitation_complete", "elicitation_id": "connect-1"},  # then made again
                      {"type": "retry", "server": "asking", "reason": visited}]
    assert result.content[0].text == "connected after 2 calls"  # not retried before the completion


async def test_a_url_visit_asked_by_error_goes_through_the_graph_and_the_call_runs_again(
    tmp_path: Path,
) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        [question] = of_type(await turn(runtime, 'asking__portal {"delay": 0.2}'), "elicitation")
        assert (question["mode"], question["url"]) == ("url", "https://portal.example/connect")
        assert question["message"] == "Connect your account"
        events = await turn(runtime, Command(resume={"action": "accept"}))
    [result] = of_type(events, "tool_result")
    assert result["status"] == "success" and result["text"].startswith("connected after")


async def test_a_declined_url_visit_tells_the_model_which_url_the_server_needs(tmp_path: Path) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        await turn(runtime, "asking__portal")
        events = await turn(runtime, Command(resume={"action": "decline"}))
    [result] = of_type(events, "tool_result")
    assert result["status"] == "error"
    assert "visit https://portal.example/connect (Connect your account)" in result["text"]
    assert "the user chose decline" in result["text"]


async def test_a_one_shot_run_does_not_wait_and_tells_the_model_the_url(tmp_path: Path) -> None:
    declining = Host(answers_questions=False)
    async with load_agent(asking_agent(tmp_path, legacy=True), host=declining) as runtime:
        with anyio.fail_after(WAIT):
            events = await turn(runtime, 'asking__portal {"delay": 60}')
    assert of_type(events, "elicitation") == []
    [result] = of_type(events, "tool_result")
    assert result["status"] == "error" and "https://portal.example/connect" in result["text"]
    assert "this run cannot ask the user" in result["text"] and "the user chose" not in result["text"]


def test_a_url_required_error_is_not_sent_to_the_fallback() -> None:
    error = ServerRequestError("asking", "needs a visit", code=types.URL_ELICITATION_REQUIRED)
    assert error.kind.value == "permanent"


def test_the_chat_shows_the_url_and_then_that_the_visit_is_complete(tmp_path: Path) -> None:
    from builders import chat_in_a_terminal

    asking_agent(tmp_path, legacy=True)
    with chat_in_a_terminal(tmp_path) as chat:
        chat.sendline('asking__portal {"delay": 0.5}')
        chat.expect(r"\[asking\] asks you to visit https://portal.example/connect")
        chat.expect("Connect your account")
        chat.sendline("y")
        chat.expect(r"\[asking\] the visit connect-1 is complete")
        chat.expect("connected after")
        chat.expect("> ")


async def test_an_answer_to_one_url_visit_is_not_taken_for_a_different_url_on_the_retried_call(
    tmp_path: Path,
) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        [first] = of_type(await turn(runtime, "asking__steps"), "elicitation")
        assert (first["url"], first["elicitation_id"]) == ("https://portal.example/step-1", "step-1")
        events = await turn(runtime, Command(resume=as_the_chat_answers("accept", first)))
        [second] = of_type(events, "elicitation")  # asked, not accepted with step-1's answer
        assert (second["url"], second["elicitation_id"]) == ("https://portal.example/step-2", "step-2")
        assert not of_type(events, "tool_result")
        events = await turn(runtime, Command(resume=as_the_chat_answers("accept", second)))
    [result] = of_type(events, "tool_result")
    assert result["status"] == "success" and result["text"].startswith("through both steps")


async def test_a_url_question_with_a_new_id_at_every_call_is_asked_once_and_the_answer_ends_the_call(
    tmp_path: Path,
) -> None:
    # The tool runs again on resume and the server asks with a new id (and query): the answer
    # given, by the chat or the page, whatever the action, is its answer.
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        for answer in (as_the_chat_answers, as_the_page_answers):
            for action in ("accept", "decline", "cancel"):
                [question] = of_type(await turn(runtime, "asking__sign_in"), "elicitation")
                assert question["url"].startswith("https://mail.example/sign-in?session=")
                events = await turn(runtime, Command(resume=answer(action, question)))
                assert of_type(events, "elicitation") == []
                [result] = of_type(events, "tool_result")
                assert (result["status"], result["text"]) == ("success", f"sign-in: {action}")


async def test_a_server_that_asks_again_after_every_answer_ends_its_call_with_an_error_not_a_loop(
    tmp_path: Path,
) -> None:
    async with load_agent(asking_agent(tmp_path, legacy=True)) as runtime:
        for new_page in ("false", "true"):  # the same page each time, or a new one
            events = await turn(runtime, f'asking__nag {{"new_page": {new_page}}}')
            asked = 0
            while not of_type(events, "tool_result") and asked <= MAX_QUESTIONS_PER_CALL:
                [question] = of_type(events, "elicitation")
                asked += 1
                events = await turn(runtime, Command(resume=as_the_chat_answers("cancel", question)))
            [result] = of_type(events, "tool_result")
            assert asked == MAX_QUESTIONS_PER_CALL
            assert result["status"] == "error"
            stopped = f"server 'asking' asked for input more than {MAX_QUESTIONS_PER_CALL} times"
            assert stopped in result["text"]


async def test_a_run_that_cannot_ask_ends_a_call_whose_server_asks_again_after_every_decline(
    tmp_path: Path,
) -> None:
    declining = Host(answers_questions=False)
    async with load_agent(asking_agent(tmp_path, legacy=True), host=declining) as runtime:
        events = await turn(runtime, "asking__nag")
    [result] = of_type(events, "tool_result")
    assert result["status"] == "error" and "asked for input more than" in result["text"]
