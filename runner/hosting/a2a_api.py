"""The served agent over A2A (``mcp-run serve --http ADDRESS --a2a``), with the official ``a2a-sdk``.

Mounted on serve's HTTP server under :data:`A2A_PATH`: the agent card at
``/a2a/.well-known/agent-card.json`` (built from the manifest at every request, so it follows
``--watch``: the agent's name, its description, one skill, and the bearer scheme when a token is
required), JSON-RPC at ``/a2a``. A task's
context is a conversation thread (the context id is the thread id; a task without one starts a
new thread), and its turns share the scheduler of the MCP callers (a thread's turns run in order).
While a turn runs, its tool calls and their results come as ``working`` status updates and the
model's text as chunks of the artifact ``answer``, at most one per 50 ms (a tool call starts it
again: the last chunk is the whole answer). What the agent asks (an approval, a server's form, a
sampling approval) makes the task ``input-required``, its status message the question with the
form's JSON schema as a data part (a URL question: its URL); the caller's next message on the
task answers it (a data part or a JSON object: the form's content; for an approval "yes"/"no",
anything else a refusal with that reason; "decline" or "cancel" for a form) and the paused turn
resumes (an answer that fits no form: the question is asked again).
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import anyio
import mcp_types as types
from langgraph.types import Command
from starlette.applications import Starlette

from runner.agent.resume import close_cut_off_thread
from runner.agent.runtime import Runtime
from runner.agent.turns import stream_turn
from runner.errors import RunnerError, ServeError
from runner.events import Question, is_question, question
from runner.hosting.mcp.ask import COALESCE_SECONDS
from runner.hosting.mcp.conversations import TurnScheduler, checked_thread_id, conversation_store
from runner.hosting.mcp.relayed_questions import (
    APPROVE_FIELD,
    REASON_FIELD,
    elicitation_request,
    resume_value,
)

EXTRA_HINT = "pip install 'mcp-run[a2a]'"
try:
    from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_task, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandlerV2
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        Message,
        SecurityRequirement,
        SecurityScheme,
        StringList,
        TaskState,
    )
    from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT, TransportProtocol
except ImportError as exc:  # the a2a extra is not installed
    raise ServeError(f"serving A2A (--a2a) needs the a2a-sdk package: {EXTRA_HINT}") from exc

A2A_PATH = "/a2a"
STOPPING = "the agent is stopping: this task was cancelled (its tool calls too); ask again when it is back"
ANSWER_ARTIFACT = "answer"
YES = frozenset({"y", "yes", "approve", "allow", "ok"})
BEARER = "bearer"  # the card's name of its security scheme, when a token is required


def card_url(url: str) -> str:
    """Where the agent card of the A2A endpoint at ``url`` (ending in :data:`A2A_PATH`) is served."""
    return url + AGENT_CARD_WELL_KNOWN_PATH


def agent_card(runtime: Runtime, url: str, *, bearer: bool = False) -> AgentCard:
    """The card of the agent the runtime holds now: its name, description and one skill; with
    ``bearer`` (served behind a token), the HTTP bearer scheme every request needs."""
    manifest = runtime.manifest
    description = manifest.description or f"The agent '{manifest.name}', declared with mcp-run."
    security: dict[str, Any] = {}
    if bearer:
        scheme = HTTPAuthSecurityScheme(
            scheme="Bearer", description="The token the agent is served with, on every request: "
                                         "'Authorization: Bearer TOKEN'.")
        security = {"security_schemes": {BEARER: SecurityScheme(http_auth_security_scheme=scheme)},
                    "security_requirements": [SecurityRequirement(schemes={BEARER: StringList()})]}
    return AgentCard(
        name=manifest.name,
        description=description,
        version="1",
        supported_interfaces=[AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC,
                                             protocol_version=PROTOCOL_VERSION_CURRENT)],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=manifest.name, name=manifest.name, description=description,
                           tags=["conversation"])],
        **security,
    )


def a2a_app(runtime: Runtime, scheduler: TurnScheduler, url: str, *, bearer: bool = False
            ) -> tuple[Starlette, AgentTurns]:
    """The A2A endpoints for a server whose A2A base URL is ``url`` (ending in :data:`A2A_PATH`), and
    the turns they run (:meth:`AgentTurns.stop` when the server stops). ``bearer``: the server
    requires a bearer token, and the card says so."""
    card = agent_card(runtime, url, bearer=bearer)
    turns = AgentTurns(runtime, scheduler)

    async def current_card(_: AgentCard) -> AgentCard:
        return agent_card(runtime, url, bearer=bearer)  # the manifest of now: a reload changes it

    handler = DefaultRequestHandlerV2(turns, InMemoryTaskStore(), card)
    routes = [*create_agent_card_routes(card, card_modifier=current_card,
                                        card_url=card_url(A2A_PATH)),
              *create_jsonrpc_routes(handler, rpc_url=A2A_PATH)]
    return Starlette(routes=routes), turns


class AgentTurns(AgentExecutor):
    """Each A2A task's message, a turn on the task's thread. A task lives on without its caller's
    connection (A2A's way: the caller may subscribe again); ``tasks/cancel`` or the server's stop
    ends it, its tool calls cancelled at their servers."""

    def __init__(self, runtime: Runtime, scheduler: TurnScheduler) -> None:
        self.runtime = runtime
        self.scheduler = scheduler
        self._running: set[anyio.CancelScope] = set()
        self._stopping = False
        self._none_running = anyio.Event()

    async def stop(self) -> None:
        """Stop every running turn (its task fails saying the agent is stopping) and wait until each
        has said so; tasks from now on fail at once."""
        self._stopping = True
        for turn in self._running:
            turn.cancel()
        if self._running:
            await self._none_running.wait()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        with anyio.CancelScope() as turn:  # cancelled by stop() alone
            self._running.add(turn)
            try:
                if not self._stopping:
                    await self._execute(context, event_queue)
                    return
            finally:
                self._running.discard(turn)
                if not self._running:
                    self._none_running.set()
                    self._none_running = anyio.Event()
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.failed(self._say(updater, STOPPING))

    async def _execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        thread = context.context_id or uuid.uuid4().hex
        task = context.task_id or uuid.uuid4().hex
        updater = TaskUpdater(event_queue, task, thread)
        if context.current_task is None:  # a new task: the caller hears of it first
            history = [context.message] if context.message is not None else []
            await event_queue.enqueue_event(new_task(task, thread, TaskState.TASK_STATE_SUBMITTED,
                                                     history=history))
        try:
            checked_thread_id(thread)
            with conversation_store():
                waiting = context.current_task is not None and (
                    context.current_task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED)
                message: str | Command
                if waiting and context.message is not None:
                    pending = await self._pending(thread)
                    try:
                        answer = reply_as_answer(pending, context.message)
                    except ServeError as exc:  # the task still waits: the caller may answer again
                        await self._ask(updater, pending, problem=str(exc))
                        return
                    message = Command(resume=resume_value(pending, answer))
                else:
                    message = context.get_user_input()
                    if not message.strip():
                        await updater.reject(self._say(updater, "the message has no text: say something "
                                                                "to the agent"))
                        return
                await updater.start_work()
                await self._turn(updater, thread, message)
        except RunnerError as exc:  # busy, a bad answer, or the turn failed (model, checkpointer)
            await updater.failed(self._say(updater, str(exc)))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The framework has cancelled the running turn (its tool calls too): say so."""
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel(self._say(updater, "cancelled by the caller"))

    @staticmethod
    def _say(updater: TaskUpdater, text: str) -> Message:
        return updater.new_agent_message([new_text_part(text)])

    async def _turn(self, updater: TaskUpdater, thread: str, message: str | Command) -> None:
        chunks = AnswerChunks(updater)
        async with self.scheduler.turn(thread):
            # A thread whose last turn was cut off (its process killed): the new message closes it.
            if not isinstance(message, Command) and (
                    cut_off := await close_cut_off_thread(self.runtime, thread)) is not None:
                await updater.start_work(self._say(updater, cut_off.closed_note()))
            pending: Question | None = None
            final: str | None = None
            async for event in stream_turn(self.runtime, message, thread_id=thread):
                if is_question(event):
                    pending = event
                elif event["type"] == "final":
                    final = event["text"]
                elif event["type"] == "token":
                    await chunks.add(event["text"])
                elif event["type"] == "tool_call":
                    await updater.start_work(self._say(
                        updater, f"tool call {event['name']} {json.dumps(event['args'], default=str)}"))
                    chunks.start_over()
                elif event["type"] == "tool_result":
                    await updater.start_work(self._say(
                        updater, f"tool result {event['name']} ({event['status']})"))
        if pending is not None:
            await self._ask(updater, pending)
            return
        if final is None:
            await updater.failed(self._say(updater, f"the turn on thread {thread} ended without an answer"))
            return
        await updater.add_artifact([new_text_part(final)], artifact_id=ANSWER_ARTIFACT, name=ANSWER_ARTIFACT,
                                   append=False, last_chunk=True)
        await updater.complete(self._say(updater, final))

    async def _pending(self, thread: str) -> Question:
        """The question the paused turn of ``thread`` waits on."""
        state = await self.runtime.graph.aget_state(self.runtime.config(thread))
        if not state.interrupts:
            raise ServeError(f"thread {thread} waits for no answer")
        return question(state.interrupts[0].value)

    async def _ask(self, updater: TaskUpdater, pending: Question, *, problem: str | None = None) -> None:
        """The task waits for the caller's answer to ``pending``: its text (after ``problem``, what
        was wrong with the last answer), then its URL or its form's schema."""
        request = elicitation_request(pending).params
        parts = [new_text_part(request.message if problem is None else f"{problem}. {request.message}")]
        if isinstance(request, types.ElicitRequestURLParams):
            parts.append(new_text_part(request.url))
        else:
            parts.append(new_data_part(request.requested_schema))
        await updater.requires_input(updater.new_agent_message(parts))


class AnswerChunks:
    """The model's tokens as chunks of the artifact ``answer``, coalesced: at most one chunk per
    COALESCE_SECONDS (a token arriving sooner waits for the next one, or for the answer's end,
    whose last chunk is the whole answer)."""

    def __init__(self, updater: TaskUpdater) -> None:
        self._updater = updater
        self._sent = 0  # chunks of the answer since it started (over)
        self._unsent = ""
        self._last_sent = -math.inf  # anyio's clock

    async def add(self, text: str) -> None:
        self._unsent += text
        if anyio.current_time() - self._last_sent >= COALESCE_SECONDS:
            await self._updater.add_artifact([new_text_part(self._unsent)], artifact_id=ANSWER_ARTIFACT,
                                             name=ANSWER_ARTIFACT, append=self._sent > 0)
            self._sent += 1
            self._unsent = ""
            self._last_sent = anyio.current_time()

    def start_over(self) -> None:
        """A tool call: the model's next text is a new answer (its first chunk replaces this one)."""
        self._sent = 0
        self._unsent = ""


def reply_as_answer(pending: Question, reply: Message) -> types.ElicitResult:
    """The caller's reply to ``pending``, read as the answer to its form."""
    data = [part for part in get_data_parts(reply.parts) if isinstance(part, dict)]
    text = " ".join(get_text_parts(reply.parts)).strip()
    if not data and text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            data = [parsed]
    if data:
        return types.ElicitResult(action="accept", content=_whole_numbers(data[0]))
    if pending["type"] in ("approval", "sampling"):
        if text.lower().rstrip(".!") in YES:
            return types.ElicitResult(action="accept", content={APPROVE_FIELD: True})
        content: dict[str, Any] = {APPROVE_FIELD: False}
        if text and text.lower() not in {"n", "no"}:
            content[REASON_FIELD] = text
        return types.ElicitResult(action="accept", content=content)
    if text.lower() == "decline":
        return types.ElicitResult(action="decline")
    if text.lower() == "cancel":
        return types.ElicitResult(action="cancel")
    schema = pending.get("schema") if pending["type"] == "elicitation" else None
    properties = list((schema or {}).get("properties") or {})
    if len(properties) == 1 and text:  # a form of one field: the text fills it
        return types.ElicitResult(action="accept", content={properties[0]: text})
    raise ServeError("the answer fits no form: send its fields as a data part (or a JSON object), "
                     "or 'decline'")


def _whole_numbers(data: dict[str, Any]) -> dict[str, Any]:
    """A data part's numbers come back as floats (protobuf's Value): whole ones made integers."""
    return {key: int(value) if isinstance(value, float) and value.is_integer() else value
            for key, value in data.items()}
