"""The questions of one tool call: relayed to the caller's task, and at most MAX_QUESTIONS_PER_CALL
of them, whoever answers (the user, or nobody: declined at once)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from runner.errors import ToolError
from runner.servers.inbound_requests import Ask, Reply
from runner.tools.asking import MAX_QUESTIONS_PER_CALL, call_answering

pytestmark = pytest.mark.anyio

QUESTION = types.ElicitRequestURLParams(message="Visit once more", url="https://nag.example/again",
                                        elicitation_id="again")


def server_asking(times: int | None, replies: list[Reply]) -> Any:
    """A call whose server asks ``times`` questions (None: after every answer, forever)."""

    async def call(ask: Ask) -> str:
        while times is None or len(replies) < times:
            replies.append(await ask("nagging", QUESTION))
        return f"asked {len(replies)} times"

    return call


async def accept(server: str, request: Any) -> Reply:
    return types.ElicitResult(action="accept")


@pytest.mark.parametrize("answer", [None, accept], ids=["declined", "answered"])
async def test_a_call_whose_server_asks_after_every_answer_is_stopped_with_a_tool_error(answer: Any) -> None:
    replies: list[Reply] = []
    with anyio.fail_after(20), pytest.raises(ToolError) as stopped:
        await call_answering(server_asking(None, replies), answer)
    assert f"server 'nagging' asked for input more than {MAX_QUESTIONS_PER_CALL} times" in str(stopped.value)
    assert len(replies) == MAX_QUESTIONS_PER_CALL + 1  # the last one refused, so the server stops waiting
    assert replies[-1] == types.ElicitResult(action="cancel")


async def test_a_call_may_ask_its_maximum_of_questions() -> None:
    replies: list[Reply] = []
    with anyio.fail_after(20):
        result, answered = await call_answering(server_asking(MAX_QUESTIONS_PER_CALL, replies), None)
    assert result == f"asked {MAX_QUESTIONS_PER_CALL} times"
    assert answered.declined == ["Visit once more"] * MAX_QUESTIONS_PER_CALL
