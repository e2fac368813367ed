"""A tool call during which the server may ask the user for input (or to approve a completion).

The server's question arrives in the SDK's task (2025-11-25) or in the call's own (2026-07-28);
the answer must come from the task that runs the tool, because that is where LangGraph's
``interrupt()`` works. ``call_answering`` relays each question to the tool's task and the answer
back. An ``Answer`` either returns the user's answer, or raises (``GraphInterrupt``: the graph
pauses: the pending question is refused (so a server that keeps working on cancel is not left
waiting), the call is cancelled on the server, and the tool runs again on resume, when the same
question gets the saved answer). Without an ``Answer`` every question is declined at once and
the declines are reported, so the result can tell the model why the server got no input.

A server that asks again after every answer (or after every decline) would never let the call
end, nor the turn: one call may ask at most ``MAX_QUESTIONS_PER_CALL`` questions (on a re-run
after a pause, the questions answered again from the saved answers count too, as does each
saved answer an ``Answer`` passes over: :func:`count_question`); the next one is refused, the
call stopped, and the model told why (a ToolError).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import mcp_types as types

from runner.errors import ToolError
from runner.servers.inbound_requests import SAMPLING_REFUSED, Ask, Question, Reply, declined
from runner.task_groups import background_tasks

Answer = Callable[[str, Question], Awaitable[Reply]]
"""``answer(server_key, request)``, run in the tool's task; may raise to pause the graph."""

_Result = TypeVar("_Result")

MAX_QUESTIONS_PER_CALL = 10


@dataclass(eq=False)  # each call's own
class QuestionCount:
    """The questions one tool call has put to the user (or declined)."""

    asked: int = 0

    def one_more(self, server: str) -> None:
        """Another question of ``server``; raises ToolError once the call has asked its maximum."""
        if self.asked >= MAX_QUESTIONS_PER_CALL:
            raise ToolError(
                f"the call was stopped: server {server!r} asked for input more than "
                f"{MAX_QUESTIONS_PER_CALL} times in one tool call (it asks again after every answer)"
            )
        self.asked += 1


# The count of the call whose questions are answered in this task (None outside call_answering).
_questions: contextvars.ContextVar[QuestionCount | None] = contextvars.ContextVar(
    "questions_of_the_call", default=None
)


def count_question(server: str) -> None:
    """One more question of ``server`` in the call being answered (an ``Answer`` asking the user
    again instead of taking a saved answer); raises ToolError past the call's maximum."""
    count = _questions.get()
    if count is not None:
        count.one_more(server)


@dataclass
class _Question:
    server: str
    request: Question
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Reply | None = None

    def reply(self, answer: Reply) -> None:
        """Answer the question: the task waiting in ``ask`` takes ``answer`` to the server."""
        self.answer = answer
        self.answered.set()


@dataclass
class Answered:
    """What the user was asked during one call; ``declined`` holds the questions no one could answer."""

    declined: list[str] = field(default_factory=list)

    async def decline(self, server: str, request: Question) -> Reply:
        """The ``ask`` of a call no one can answer: every question is refused, and remembered."""
        if isinstance(request, types.CreateMessageRequestParams):
            self.declined.append("a completion from the model")
            return types.ErrorData(code=SAMPLING_REFUSED, message="sampling was refused: not interactive")
        self.declined.append(request.message)
        return declined("the run is not interactive")

    def note(self) -> str:
        if not self.declined:
            return ""
        asked = "; ".join(f'"{message}"' for message in self.declined)
        return (f"\n\n[mcp-run] The server asked the user for input ({asked}) and it was declined: "
                "this run cannot ask the user.")


async def call_answering(
    call: Callable[[Ask], Awaitable[_Result]], answer: Answer | None
) -> tuple[_Result, Answered]:
    """Run ``call(ask)``; the questions ``ask`` receives are answered by ``answer`` in this task."""
    answered = Answered()
    # Declines too go through the relay: past the maximum, the call is stopped in this task.
    answer = answer or answered.decline
    count = QuestionCount()
    send, receive = anyio.create_memory_object_stream[_Question]()
    outcome: list[_Result] = []
    failure: Exception | None = None

    async def ask(server: str, request: Question) -> Reply:
        question = _Question(server, request)
        await send.send(question)
        await question.answered.wait()
        assert question.answer is not None
        return question.answer

    # An answer's exception (a pause) leaves the group unwrapped, and before the call's: the call
    # then only failed from the refusal sent to the server.
    async with background_tasks() as tg:

        async def run() -> None:
            nonlocal failure
            try:
                outcome.append(await call(ask))
            except Exception as exc:  # re-raised below, outside the group, unwrapped
                failure = exc
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        async with receive:
            async for question in receive:
                token = _questions.set(count)
                try:
                    count.one_more(question.server)
                    reply = await answer(question.server, question.request)
                except Exception:  # the graph pauses (or the answer was invalid): stop the call
                    # The server's request is answered before the call is cancelled: a server
                    # that keeps working on cancel would otherwise wait for it forever.
                    question.reply(_refusal(question.request))
                    raise
                finally:
                    _questions.reset(token)
                question.reply(reply)
    if failure is not None:
        raise failure
    return outcome[0], answered


def _refusal(request: Question) -> Reply:
    if isinstance(request, types.CreateMessageRequestParams):
        return types.ErrorData(code=SAMPLING_REFUSED, message="sampling was refused: the call was paused")
    return types.ElicitResult(action="cancel")
