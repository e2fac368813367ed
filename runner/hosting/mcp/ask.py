"""The ``ask`` tool of the served agent: one turn of a conversation, from a calling MCP client.

``ask {message, thread?}`` runs a turn on ``thread`` (a new thread without one) and returns the
answer and the thread id, as text and as structured content. While it runs, the model's tokens,
its tool calls and their results reach the caller as progress notifications (when the caller
sent a progress token). A question of the agent (an approval, a server's elicitation, a sampling
approval) is put to the caller as an elicitation: during the call on 2025-11-25 connections, as
a result asking for input on 2026-07-28 ones (the caller retries with the answer, and the turn,
paused in the checkpointer, resumes). A caller without elicitation gets deny / decline at once.
A call whose HTTP connection closes (the caller exited or was killed) is stopped, its question
too: its thread is free for the next call at once. A question asked during the call and not
answered within ``answer_within`` seconds gets the non-interactive rule (a caller that stays
connected but never answers holds its thread no longer than that); on 2026-07-28 the same holds
for a retried call whose answer comes later than that after the question was returned.
"""

from __future__ import annotations

import base64
import json
import math
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio
import mcp_types as types
from langgraph.types import Command
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request

from runner import telemetry
from runner.agent.nodes import MAX_STEPS_REASON
from runner.agent.resume import close_cut_off_thread
from runner.agent.runtime import Runtime
from runner.agent.spending import LIMIT_REASON, TurnSpending
from runner.agent.team import TASK_DESCRIPTION, agent_thread
from runner.agent.turns import stream_turn
from runner.errors import AskError, RunnerError
from runner.events import Event, FinalAnswer, Question, is_question, question
from runner.hosting.callers import caller_of, thread_in_space
from runner.hosting.mcp.conversations import (
    THREAD_PATTERN,
    TurnScheduler,
    checked_thread_id,
    conversation_store,
    thread_started,
)
from runner.hosting.mcp.relayed_questions import (
    NOT_ASKED,
    STATELESS_NOT_ASKED,
    can_elicit,
    elicitation_request,
    question_key,
    refusal,
    resume_value,
)
from runner.manifest import MAIN_AGENT
from runner.models.retries import model_call_line
from runner.task_groups import background_tasks
from runner.tools.caller import progress_summary

ASK_TOOL = "ask"
QUESTION_KEY = "question"  # the key of the one input request a paused turn sends (2026-07-28)
PREVIEW_CHARS = 200
COALESCE_SECONDS = 0.05  # a turn sends its tokens at most this often (one notification each time)
ANSWER_TAIL_CHARS = 1000  # the most of the answer so far one progress message carries
CALLER_GONE = "the caller's connection closed: this turn was cancelled (its tool calls too)"
DEFAULT_ANSWER_WITHIN = 600.0  # seconds a caller has to answer a question asked during its call
NOT_ANSWERED_WITHIN = "the caller did not answer within {:g} s"
STOPPING = "the agent is stopping: this turn was cancelled (its tool calls too); ask again when it is back"

ASK_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "minLength": 1, "description": "What to say to the agent."},
        "thread": {"type": "string", "pattern": THREAD_PATTERN,
                   "description": "The conversation to continue (the thread id of an earlier answer); "
                                  "a new conversation without it."},
    },
    "required": ["message"],
    "additionalProperties": False,
}
# An agent of 'agents:' served under its own name: the task it gets, as when another agent calls it.
AGENT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "minLength": 1, "description": TASK_DESCRIPTION},
        "thread": {"type": "string", "pattern": THREAD_PATTERN,
                   "description": "The agent's thread to continue (the thread id of an earlier answer); "
                                  "a new one without it. Its threads are its own, apart from ask's."},
    },
    "required": ["task"],
    "additionalProperties": False,
}
ASK_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "thread": {"type": "string"},
        "new": {"type": "boolean",
                "description": "True when this call started the thread: no thread id was given, or the "
                               "one given had no messages yet (a mistyped id starts a new conversation)."},
        "note": {"type": "string",
                 "description": "What the call found and did before the turn: the thread's last turn "
                                "was cut off (its process killed) and this message closed it."},
    },
    "required": ["answer", "thread", "new"],
}


def ask_tool(agent_name: str, description: str | None, output: dict[str, Any] | None = None) -> types.Tool:
    """The ``ask`` tool; with ``output`` (the manifest's ``output.schema``) its results carry the
    answer object under ``output``, declared in its output schema."""
    about = f" ({description})" if description else ""
    return types.Tool(
        name=ASK_TOOL,
        description=(f"Ask the agent '{agent_name}'{about}. Returns its answer and the thread id; pass "
                     "the thread id back to continue the same conversation."),
        input_schema=ASK_INPUT_SCHEMA,
        output_schema=ask_output_schema(output),
    )


def ask_output_schema(output: dict[str, Any] | None) -> dict[str, Any]:
    """``ask``'s output schema, with the answer object's schema as its ``output`` property: the
    object's own definitions move to the root, where its local ``$ref``s point."""
    if output is None:
        return ASK_OUTPUT_SCHEMA
    moved = ("$defs", "definitions")
    inner = {key: value for key, value in output.items() if key not in (*moved, "$schema", "$id")}
    schema = {**ASK_OUTPUT_SCHEMA,
              "properties": {**ASK_OUTPUT_SCHEMA["properties"], "output": inner},
              "required": [*ASK_OUTPUT_SCHEMA["required"], "output"]}
    schema.update({key: output[key] for key in moved if key in output})
    return schema


def agent_tools(runtime: Runtime, output: dict[str, Any] | None = None) -> list[types.Tool]:
    """The tools ``serve`` offers: ``ask`` (the main agent), then each agent of ``agents:`` under
    its own name (one named ``ask`` is reached only through the agents that call it)."""
    manifest = runtime.manifest
    tools = [ask_tool(manifest.name, manifest.description, output)]
    for name in sorted(manifest.agents):
        if name == ASK_TOOL:
            continue
        about = f" ({description})" if (description := manifest.agents[name].description) else ""
        tools.append(types.Tool(
            name=name,
            description=(f"Give the agent '{name}' of '{manifest.name}'{about} a task. Returns its answer "
                         "and the thread id; pass the thread id back to continue on the same thread."),
            input_schema=AGENT_INPUT_SCHEMA, output_schema=ASK_OUTPUT_SCHEMA))
    return tools


def served_agent(runtime: Runtime, tool: str) -> str | None:
    """The agent a call of ``tool`` runs: ``main`` for ``ask``, an agent of ``agents:`` under its
    own name, None for any other name."""
    if tool == ASK_TOOL:
        return MAIN_AGENT
    return tool if tool in runtime.manifest.agents else None


@dataclass(frozen=True)
class AskRequest:
    message: str
    thread: str | None


def parse_ask(arguments: dict[str, Any] | None, agent: str = MAIN_AGENT) -> AskRequest:
    """The checked arguments of ``ask`` (``message``), or of agent ``agent``'s tool (``task``);
    AskError names what is wrong."""
    arguments = arguments or {}
    tool, said = (ASK_TOOL, "message") if agent == MAIN_AGENT else (agent, "task")
    unknown = sorted(set(arguments) - {said, "thread"})
    if unknown:
        raise AskError(f"unknown argument {', '.join(unknown)}: {tool} takes {said} and thread")
    if said not in arguments:
        raise AskError(f"{said} is missing: say something to the agent")
    message = arguments[said]
    if not isinstance(message, str):
        raise AskError(f"{said} must be a string, got {_json_type(message)}")
    if not message.strip():
        raise AskError(f"{said} is empty: say something to the agent")
    thread = arguments.get("thread")
    if thread is not None and not isinstance(thread, str):
        raise AskError(
            f"thread must be a string (the thread id of an earlier answer), got {_json_type(thread)}"
        )
    return AskRequest(message, None if thread is None else checked_thread_id(thread))


def _json_type(value: Any) -> str:
    """What the caller sent instead of a string: ``null``, or the type's name (int, list, ...)."""
    return "null" if value is None else type(value).__name__


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


class Progress:
    """The progress notifications of one call, their values increasing from ``start`` (a retried
    2026-07-28 call goes on from the count its question was returned at).

    The model's tokens are coalesced: at most one notification per COALESCE_SECONDS carries them,
    its message the answer so far (its last ANSWER_TAIL_CHARS characters, after "…" when longer):
    a client showing the latest message shows the answer growing. The tokens still unsent go out
    before any other notification and when the block of :meth:`coalescing` ends, so the last
    notification of an answer always carries its end. Tool calls, their results, a tool's progress
    and the call's own notes (queued, a question answered for the caller) are each one notification."""

    def __init__(self, ctx: ServerRequestContext[Any], *, start: int = 0) -> None:
        self._ctx = ctx
        self.count = start
        self._answer = ""  # the model's text since its last tool call
        self._unsent = False  # tokens arrived since the last notification
        self._tokens_arrived = anyio.Event()
        self._last_sent = -math.inf  # anyio's clock
        self._sending = anyio.Lock()  # one notification at a time: values leave in order

    @asynccontextmanager
    async def coalescing(self) -> AsyncIterator[None]:
        """The block's tokens sent as they are coalesced; those left unsent go out when it ends
        (unless it raised or was cancelled: then nobody is told more)."""
        async with background_tasks() as group:
            group.start_soon(self._send_later)
            yield
            await self.flush()

    async def note(self, message: str) -> None:
        async with self._sending:
            await self._send_tokens()
            await self._send(message)

    async def flush(self) -> None:
        """Send the tokens not sent yet, now."""
        async with self._sending:
            await self._send_tokens()

    async def event(self, event: Event) -> None:
        if event["type"] == "token":
            if "agent" in event:  # an agent working for another: its answer is that call's result
                return
            self._answer += event["text"]
            self._unsent = True
            if anyio.current_time() - self._last_sent >= COALESCE_SECONDS:
                await self.flush()  # the first token of a pause goes out at once
            else:
                self._tokens_arrived.set()
        elif event["type"] == "tool_call":
            await self.note(f"tool call {event['name']} {json.dumps(event['args'], default=str)}")
            self._answer = ""  # the model's next text is a new answer
        elif event["type"] == "tool_result":
            text = event["text"]
            text = text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + " …"
            await self.note(f"tool result {event['name']} ({event['status']}): {text}")
        elif event["type"] == "progress":  # in the chat's words; its numbers are the tool's, not the call's
            await self.note(progress_summary(event))
        elif event["type"] in ("model_retry", "model_fallback"):
            await self.note(model_call_line(event))

    async def _send_later(self) -> None:
        while True:
            await self._tokens_arrived.wait()
            self._tokens_arrived = anyio.Event()
            await anyio.sleep_until(self._last_sent + COALESCE_SECONDS)
            await self.flush()

    async def _send_tokens(self) -> None:
        if self._unsent:
            self._unsent = False
            answer = self._answer
            await self._send(answer if len(answer) <= ANSWER_TAIL_CHARS
                             else "…" + answer[-ANSWER_TAIL_CHARS:])

    async def _send(self, message: str) -> None:
        self.count += 1
        self._last_sent = anyio.current_time()
        await self._ctx.session.report_progress(self.count, None, message)


async def _cancel_when_gone(ctx: ServerRequestContext[Any], call: anyio.CancelScope) -> None:
    """Cancel ``call`` once the HTTP request that carries it is disconnected.

    The SDK's session learns of a dead caller only when a write to it fails, and a call waiting
    for the caller's answer writes nothing: without this its turn (and so its thread) would wait
    for ever. The streamable HTTP transport of 2026-07-28 does the same for its own calls. Over
    stdio there is no request: the end of stdin ends the session, and its calls with it."""
    if not isinstance(ctx.request, Request):
        return
    receive = ctx.request.receive  # the body is read: what comes next is the disconnect
    while (await receive())["type"] != "http.disconnect":
        pass
    call.cancel()


def answered_late(asked_here: float | None, saved_at: str | None, *, within: float, now: float) -> bool:
    """Whether an answer arriving at ``now`` comes more than ``within`` seconds after its question.

    The question was asked when this process returned it (``asked_here``, a wall-clock time); one
    returned by another instance (scale-out) or before a restart is dated by the checkpoint its
    turn paused in (``saved_at``, ISO 8601), written before the question was asked: an answer is
    never given longer than ``within``."""
    asked = asked_here
    if asked is None and saved_at is not None:
        asked = datetime.fromisoformat(saved_at).timestamp()
    return asked is not None and now - asked > within


@dataclass(frozen=True)
class QuestionState:
    """What a question returned to a 2026-07-28 caller carries to the retried call: its thread,
    which question, and how many progress notifications the call had sent (the retry goes on
    counting from there: progress values increase over the whole turn)."""

    thread: str
    question: str
    progress: int

    def token(self) -> str:
        raw = json.dumps({"thread": self.thread, "question": self.question, "progress": self.progress})
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @classmethod
    def read(cls, token: str | None) -> QuestionState:
        try:
            data = json.loads(base64.urlsafe_b64decode((token or "").encode()))
            progress = data.get("progress", 0)
            if type(progress) is not int or progress < 0:
                raise ValueError("progress is no count")
            return cls(checked_thread_id(data["thread"]), str(data["question"]), progress)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise AskError("the answer came without the state of the question it answers") from exc


class AskHandler:
    """Runs ``ask`` calls over one runtime, through one scheduler."""

    def __init__(self, runtime: Runtime, scheduler: TurnScheduler, *, stateless: bool = False,
                 answer_within: float = DEFAULT_ANSWER_WITHIN) -> None:
        self.runtime = runtime
        self.scheduler = scheduler
        self.answer_within = answer_within
        self.stateless = stateless  # no session: a question cannot be sent during the call
        self._calls: set[anyio.CancelScope] = set()  # the calls running now
        self._stopping = False
        self._no_calls = anyio.Event()
        # When each question returned to a 2026-07-28 caller was asked (wall clock), by state token.
        self._asked: dict[str, float] = {}

    async def stop(self) -> None:
        """Cancel every running call and wait until each has answered its caller (that the agent
        is stopping); calls from now on get that answer at once."""
        self._stopping = True
        for call in self._calls:
            call.cancel()
        if self._calls:
            await self._no_calls.wait()

    async def __call__(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams,
                       agent: str = MAIN_AGENT) -> types.CallToolResult | types.InputRequiredResult:
        if self._stopping:
            return error_result(STOPPING)
        with anyio.CancelScope() as call:
            self._calls.add(call)
            try:
                async with anyio.create_task_group() as watching:
                    watching.start_soon(_cancel_when_gone, ctx, call)
                    try:
                        return await self._answer(ctx, params, agent)
                    finally:
                        watching.cancel_scope.cancel()
            finally:
                self._calls.discard(call)
                if not self._calls:
                    self._no_calls.set()
                    self._no_calls = anyio.Event()
        # Only reached when the call was cancelled: by stop(), or because its caller is gone (and
        # then nobody hears this).
        return error_result(STOPPING if self._stopping else CALLER_GONE)

    async def _answer(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, agent: str
                      ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            request = parse_ask(params.arguments, agent)
            message: str | Command
            caller = caller_of(ctx.request.scope if isinstance(ctx.request, Request) else None)
            with conversation_store():
                progress_from = 0
                if params.input_responses or params.request_state:
                    state = QuestionState.read(params.request_state)
                    thread, progress_from = state.thread, state.progress
                    message = await self._answered(params, state, caller, agent)
                    new = False
                elif request.thread is None:
                    thread, message, new = uuid.uuid4().hex, request.message, True
                else:
                    thread, message = request.thread, request.message
                    new = not await thread_started(self.runtime, thread_in_space(caller, thread), agent)
                return await self._turn(ctx, thread, message, new=new, caller=caller, agent=agent,
                                        progress_from=progress_from)
        except RunnerError as exc:  # a bad request, busy, or the turn failed (model, checkpointer)
            return error_result(str(exc))

    async def _answered(self, params: types.CallToolRequestParams, asked: QuestionState,
                        caller: str | None, agent: str) -> Command:
        """The resume command of a retried call carrying the caller's answer to question ``asked``
        (the thread it names is looked up among the caller's own)."""
        thread, key = asked.thread, asked.question
        asked_here = self._asked.pop(params.request_state or "", None)
        response = (params.input_responses or {}).get(QUESTION_KEY)
        if response is None:
            raise AskError("the retried call carries no answer to the agent's question")
        try:
            answer = types.ElicitResult.model_validate(response.model_dump(by_alias=True))
        except ValidationError as exc:
            raise AskError("the retried call's answer is no answer to a question (elicitation)") from exc
        config = self.runtime.config(thread_in_space(caller, thread), agent=agent)
        state = await self.runtime.agents[agent].aget_state(config)
        for pending in state.interrupts:
            event = question(pending.value)
            if question_key(event) == key:
                if answered_late(asked_here, state.created_at, within=self.answer_within, now=time.time()):
                    late = NOT_ANSWERED_WITHIN.format(self.answer_within)
                    return Command(resume=refusal(event, late))
                return Command(resume=resume_value(event, answer))
        raise AskError(f"thread {thread} no longer waits for that answer")

    def _note_asked(self, token: str) -> None:
        """Date a question returned to a 2026-07-28 caller; questions already past answering go."""
        now = time.time()
        expired = [known for known, asked in self._asked.items() if now - asked > self.answer_within]
        for known in expired:  # their answers are late either way (their checkpoints are older)
            del self._asked[known]
        self._asked[token] = now

    async def _close_cut_off(self, stored: str, agent: str, progress: Progress) -> str | None:
        """A new message on a thread whose last turn was cut off (its process killed) closes that
        turn: its unanswered calls are answered as stopped (:mod:`runner.agent.resume`). What the
        caller is told of it, in the progress and the result (None: nothing was cut off)."""
        if (cut_off := await close_cut_off_thread(self.runtime, stored, agent=agent)) is None:
            return None
        await progress.note(cut_off.closed_note())
        return cut_off.closed_note()

    async def _turn(self, ctx: ServerRequestContext[Any], thread: str, message: str | Command, *, new: bool,
                    caller: str | None, agent: str, progress_from: int = 0
                    ) -> types.CallToolResult | types.InputRequiredResult:
        progress = Progress(ctx, start=progress_from)
        telemetry.join_trace(ctx.meta)  # a caller that traces sees the turn in its own trace
        stored = thread_in_space(caller, thread)
        spent = TurnSpending()
        turn = self.scheduler.turn(agent_thread(agent, stored), waiting=progress.note)
        note: str | None = None
        async with progress.coalescing(), turn:
            if not new and not isinstance(message, Command):
                note = await self._close_cut_off(stored, agent, progress)
            while True:
                pending: Question | None = None
                final: FinalAnswer | None = None
                async for event in stream_turn(self.runtime, message, thread_id=stored, agent=agent):
                    spent.see(event)
                    if is_question(event):
                        pending = event
                    elif event["type"] == "final":
                        final = event
                    else:
                        await progress.event(event)
                if pending is None:
                    break
                modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
                sessionless = self.stateless and not modern
                if sessionless or not can_elicit(ctx.session.client_capabilities, pending):
                    why = STATELESS_NOT_ASKED if sessionless else NOT_ASKED
                    answer = refusal(pending, why)
                    await progress.note(
                        f"{pending['type']} answered for the caller: {answer['action']} ({why})"
                    )
                    message = Command(resume=answer)
                elif modern:
                    await progress.flush()  # the count the retried call goes on from is final
                    token = QuestionState(thread, question_key(pending), progress.count).token()
                    self._note_asked(token)
                    return types.InputRequiredResult(
                        input_requests={QUESTION_KEY: elicitation_request(pending)}, request_state=token)
                else:
                    message = Command(resume=await self._ask_caller(ctx, pending))
        if final is None:
            return error_result(f"the turn on thread {thread} ended without an answer")
        text = final["text"]
        structured: dict[str, Any] = {"answer": text, "thread": thread, "new": new}
        if note is not None:
            structured["note"] = note
        if "output" in final:  # the answer object (``output:``), as ask's output schema declares it
            structured["output"] = final["output"]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
            is_error=final["reason"] in (MAX_STEPS_REASON, LIMIT_REASON),
            _meta=spent.meta(),
        )

    async def _ask_caller(self, ctx: ServerRequestContext[Any], pending: Question) -> dict[str, Any]:
        """The caller's answer, asked during the call (2025-11-25): the thread's turn waits for it."""
        with anyio.move_on_after(self.answer_within):  # cancelling the request tells the caller
            try:
                answer = await ctx.session.send_request(
                    elicitation_request(pending), types.ElicitResult,
                    metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return refusal(pending)  # the client refused the request or went away: nobody answered
            return resume_value(pending, answer)
        return refusal(pending, NOT_ANSWERED_WITHIN.format(self.answer_within))
