"""One Chat Completions turn: the agent's turn on a thread, its text as it comes, and its usage.

Tool calls stay inside the agent: the caller hears the text the model writes (streamed, the text
it writes before calling a tool too, a blank line between two steps). A question the agent would
put to its user (a tool's approval, a server's form, a server's sampling request) cannot be asked
over this API: it gets the non-interactive answer (approvals and sampling denied, forms declined),
and the model reads why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.types import Command

from runner.agent.nodes import MAX_STEPS_REASON
from runner.agent.runtime import Runtime
from runner.agent.turns import stream_turn
from runner.errors import ServeError
from runner.events import Question, is_question
from runner.hosting.mcp.relayed_questions import refusal
from runner.manifest import MAIN_AGENT

NOT_ASKED_HERE = ("nobody can answer it: the agent is served over the OpenAI-compatible API, which "
                  "cannot put questions to its caller")
STEP_BREAK = "\n\n"

Text = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def json(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}


@dataclass(frozen=True)
class Answer:
    text: str
    finish_reason: str  # "stop", or "length" when the agent ran out of steps
    usage: Usage


async def answer(runtime: Runtime, thread: str, messages: list[BaseMessage], on_text: Text, *,
                 agent: str = MAIN_AGENT) -> Answer:
    """Run the turn of ``messages`` on ``agent``'s ``thread`` (the checkpointer's id), ``on_text``
    hearing its text as it comes; the final answer and the usage of the model calls the turn made
    (what the provider reported of them: zeros when it reported nothing). An agent of ``agents:``
    takes the last message as its task, on its own thread (:func:`runner.agent.team.agent_thread`);
    the text it streams is the answer, that of the agents it calls is their calls' results."""
    before = {message.id for message in await _messages(runtime, thread, agent)}
    own = None if agent == MAIN_AGENT else agent  # what the served agent's own events name
    message: list[BaseMessage] | Command = messages
    streamed = step_text = False
    final_text: str | None = None
    reason: str | None = None
    while True:
        pending: Question | None = None
        async for event in stream_turn(runtime, message, thread_id=thread, agent=agent):
            if is_question(event):
                pending = event
            elif event["type"] == "token" and event.get("agent") == own:  # another's: its call's result
                text = event["text"]
                if streamed and not step_text:
                    text = STEP_BREAK + text
                streamed = step_text = True
                await on_text(text)
            elif event["type"] == "tool_result" and event.get("agent") == own:
                step_text = False
            elif event["type"] == "final":
                final_text, reason = event["text"], event["reason"]
        if pending is None:
            break
        message = Command(resume=refusal(pending, NOT_ASKED_HERE))
    if final_text is None:
        raise ServeError("the turn ended without an answer")
    if not step_text and final_text:  # a model that does not stream: its answer comes whole
        await on_text(STEP_BREAK + final_text if streamed else final_text)
    after = await _messages(runtime, thread, agent)
    return Answer(final_text, "length" if reason == MAX_STEPS_REASON else "stop",
                  _usage(message for message in after if message.id not in before))


async def _messages(runtime: Runtime, thread: str, agent: str) -> list[BaseMessage]:
    state = await runtime.agents[agent].aget_state(runtime.config(thread, agent=agent))
    messages: list[BaseMessage] = (state.values or {}).get("messages", [])
    return messages


def _usage(messages: Any) -> Usage:
    prompt = completion = 0
    for message in messages:
        if isinstance(message, AIMessage) and message.usage_metadata:
            prompt += message.usage_metadata.get("input_tokens", 0)
            completion += message.usage_metadata.get("output_tokens", 0)
    return Usage(prompt, completion)
