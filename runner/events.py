"""The events of the agent: what ``--json`` prints, what a served turn reports as progress, what the
evals observe. Each is a JSON-ready dict with a ``type``; one TypedDict per type, their union
:data:`Event`. The README's "Chat events" table describes them, ``schemas/events.schema.json``
is :func:`events_json_schema`, and tests/test_events_schema.py keeps the three in step.

TypedDicts, not classes: an event is built by calling its type (``Token(type="token", text=...)``)
and stays a plain dict, so what is printed is ``json.dumps(event)``, fields in the order given.
Events come from below the agent too (a call's task status and URL visits, in ``servers``; its
progress, in ``tools``), so this module sits just under ``errors``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NotRequired, cast

# typing_extensions' TypedDict: pydantic reads it (for the schema) on Python < 3.12.
from typing_extensions import TypedDict, TypeIs

EVENTS_SCHEMA_ID = "https://mcp-run.dev/schemas/events.schema.json"

# --------------------------------------------------------------------------- a turn


class Token(TypedDict):
    """A piece of the model's answer, as it streams."""

    type: Literal["token"]
    text: str
    agent: NotRequired[str]  # the agent of 'agents:' it comes from; absent for the main agent


class ToolCall(TypedDict):
    """A tool is called (``id`` starts with ``direct_`` for ``/call``); after an ``edit`` answer it
    comes again with the edited ``args`` and ``edited: true``; ``unlisted: true``: ``/call`` of a
    tool its server does not list (the model is never offered it)."""

    type: Literal["tool_call"]
    name: str
    args: dict[str, Any]
    id: str
    edited: NotRequired[bool]
    unlisted: NotRequired[bool]
    agent: NotRequired[str]  # the agent of 'agents:' it comes from; absent for the main agent


class AgentStarted(TypedDict):
    """An agent of ``agents:`` starts on a task another agent or a workflow gave it (``caller``:
    ``main`` or the name of an agent of ``agents:``). ``call``: the id of the tool call that
    started it, whose ``tool_result`` is its answer; absent for a workflow's step."""

    type: Literal["agent"]
    agent: str
    caller: str
    task: str
    call: NotRequired[str]


# ``from`` is a Python keyword: that field is given as a mapping.
_HandedFrom = TypedDict("_HandedFrom", {"from": str})


class HandedOff(_HandedFrom):
    """The conversation is handed over: ``to`` (``main`` or an agent of ``agents:``) answers from
    now on, this turn too, instead of ``from``; ``reason``: why, when the agent said."""

    type: Literal["handoff"]
    to: str
    reason: NotRequired[str]


class ToolResult(TypedDict):
    """A tool's result; ``ms``: milliseconds since its ``tool_call`` (or since the turn resumed,
    for a call that waited for approval), absent for ``/call``."""

    type: Literal["tool_result"]
    name: str
    id: str
    status: Literal["success", "error"]
    text: str
    ms: NotRequired[float]
    agent: NotRequired[str]  # the agent of 'agents:' it comes from; absent for the main agent


class ToolRetried(TypedDict):
    """A tool call is made again: on ``fallback`` (``server``'s fallback) after ``server`` failed
    with a transient error, or, without ``fallback``, on ``server`` itself once the user visited
    the URL it asked for; ``reason`` says why. ``id``: the model's call, when it is one."""

    type: Literal["tool_retry"]
    tool: str
    server: str
    reason: str
    fallback: NotRequired[str]
    id: NotRequired[str]


class PolicyDecided(TypedDict):
    """A ``policy`` rule decided a tool call about to run (``allow``, ``ask`` once approved) or
    refused (``deny``): ``rule`` is its index in ``policy`` (null for a server's
    ``tools.approve`` entry), ``source`` where it is written; ``id`` the model's call, when it is one."""

    type: Literal["policy"]
    tool: str
    action: Literal["allow", "deny", "ask"]
    rule: int | None
    source: str
    reason: str | None
    id: NotRequired[str]


class PolicyReference(TypedDict):
    """The ``policy`` rule that asks: its index, where it is written, its reason."""

    rule: int
    source: str
    reason: str | None


class ApprovalAsked(TypedDict):
    """A tool call waits for the user's approval (approve, deny, or edit its arguments);
    ``policy``: the rule of ``policy`` that asks (absent for a ``tools.approve`` entry)."""

    type: Literal["approval"]
    tool: str
    args: dict[str, Any]
    id: str
    agent: NotRequired[str]  # the agent of 'agents:' it comes from; absent for the main agent
    policy: NotRequired[PolicyReference]


class ElicitationAsked(TypedDict):
    """A server asks the user for input: a form (``schema``) or a visit to ``url``."""

    type: Literal["elicitation"]
    server: str
    message: str
    mode: Literal["form", "url"]
    schema: NotRequired[dict[str, Any]]
    url: NotRequired[str]
    elicitation_id: NotRequired[str | None]
    agent: NotRequired[str]  # the agent of 'agents:' it comes from; absent for the main agent


class SampledMessage(TypedDict):
    """One message of a sampling request, as text."""

    role: str
    text: str


class SamplingAsked(TypedDict):
    """A server asks the agent's model for a completion; the user approves or denies it."""

    type: Literal["sampling"]
    server: str
    system_prompt: str | None
    messages: list[SampledMessage]
    max_tokens: int
    tools: list[str]
    agent: NotRequired[str]  # the agent of 'agents:' it comes from; absent for the main agent


class ToolProgress(TypedDict):
    """A running tool call's progress notification (``total`` may be null)."""

    type: Literal["progress"]
    tool: str
    server: str
    progress: float
    total: float | None
    message: str | None
    agent: NotRequired[str]  # the agent of 'agents:' it comes from; absent for the main agent


class ElicitationCompleted(TypedDict):
    """The server says the user's visit to a URL it asked for is complete."""

    type: Literal["elicitation_complete"]
    tool: str
    server: str
    elicitation_id: str


TaskState = Literal["working", "input_required", "completed", "failed", "cancelled"]


class TaskChanged(TypedDict):
    """A tool call running as a task was created or changed status."""

    type: Literal["task"]
    tool: str
    server: str
    task_id: str
    status: TaskState
    message: str | None


class FinalAnswer(TypedDict):
    """The model's answer ends the turn; ``reason`` is its finish reason, or null. ``ms`` (the
    turn's duration) and ``trace_id`` (its OpenTelemetry trace, or null) are stamped as it is
    yielded. ``output``: the answer object, valid against the manifest's ``output.schema`` (only
    with ``output:``; ``text`` is then that object as JSON)."""

    type: Literal["final"]
    text: str
    reason: str | None
    output: NotRequired[dict[str, Any]]
    ms: NotRequired[float]
    trace_id: NotRequired[str | None]
    agent: NotRequired[str]  # the agent of 'agents:' answering the conversation; absent for main


class ModelRetry(TypedDict):
    """A model request failed in a way worth another try: ``attempt`` (of ``max_attempts``) is
    made after ``delay`` seconds (the provider's Retry-After when it sent one); ``reason`` is
    ``rate_limited``, ``server_error``, ``timeout``, ``connection`` or ``cut_off``; ``status`` the
    HTTP status, or null; ``message`` says it for people."""

    type: Literal["model_retry"]
    model: str
    attempt: int
    max_attempts: int
    delay: float
    reason: Literal["rate_limited", "server_error", "timeout", "connection", "cut_off"]
    status: int | None
    message: str


class ModelFallback(TypedDict):
    """``model`` failed for good (``reason``): the request goes to ``fallback``, the next of
    ``model.fallbacks``."""

    type: Literal["model_fallback"]
    model: str
    fallback: str
    reason: str


class UsageTotals(TypedDict):
    """Tokens (input includes cached; output includes reasoning), cost in US dollars (null: no
    price known for any step; ``unpriced_steps`` of ``model_steps`` had none), tool calls, seconds."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    total_tokens: int
    cost: float | None
    unpriced_steps: int
    model_steps: int
    tool_calls: int
    seconds: float


class UsageReported(TypedDict):
    """A model step's usage (``step``), with the turn's and the thread's totals so far; ``agent``
    is the agent that took the step (``main``), ``model`` the model that answered, if known."""

    type: Literal["usage"]
    agent: str
    model: str | None
    step: UsageTotals
    turn: UsageTotals
    thread: UsageTotals


class LimitReached(TypedDict):
    """A budget (``limits.per_turn`` or ``per_thread``) ended the turn: which ``limit``, its
    ``max``, what was ``spent`` against it, and the turn's and thread's totals. A ``final``
    event naming it follows."""

    type: Literal["limit"]
    scope: Literal["turn", "thread"]
    limit: Literal["max_tokens", "max_cost", "max_tool_calls", "max_duration"]
    max: float
    spent: float
    turn: UsageTotals
    thread: UsageTotals


class ContextFitted(TypedDict):
    """A model request was made to fit ``context.max_tokens`` (the thread keeps every message):
    ``summarized`` oldest messages sent as a summary (``written``: computed at this step, else
    the thread's own), ``left_out`` more not sent, ``shortened`` old tool results sent as a
    reference; ``tokens`` it carries (approximately), ``whole`` the whole thread's request."""

    type: Literal["context"]
    action: Literal["trim", "summarize"]
    tokens: int
    limit: int
    whole: int
    summarized: int
    written: bool
    left_out: int
    shortened: int


class MediaSaved(TypedDict):
    """An image, audio or file from a tool's result, saved at ``path``."""

    type: Literal["media"]
    tool: str
    id: str
    mime_type: str
    path: str


class Interrupted(TypedDict):
    """Ctrl-C stopped ``what``: the turn (its tool calls and tasks are cancelled on the servers),
    or a chat command such as ``/call``."""

    type: Literal["interrupted"]
    what: str


# --------------------------------------------------------------------------- the chat


class ChatReady(TypedDict):
    """The chat has started (or a ``-p --json`` turn, its first event): agent name, model id,
    thread id, tool names, the agents of ``agents:`` the main agent may call, and its handoff
    tools (the model is offered a tool for each of these)."""

    type: Literal["ready"]
    name: str
    model: str
    thread: str
    tools: list[str]
    agents: list[str]
    handoffs: list[str]


class ChatCommandRow(TypedDict):
    """A chat command in ``/help``."""

    command: str
    usage: str
    description: str


class PromptRow(TypedDict):
    """A prompt command (an MCP prompt template offered as ``/command``)."""

    command: str
    server: str
    original: str
    arguments: str
    description: str


class ToolRow(TypedDict):
    """A tool in ``/tools``; ``offered``: offered to the model at its next step (as in
    ``mcp-run tools --json``); ``kind``: a server's or local tool, the tool that calls an agent of
    ``agents:``, or a handoff tool."""

    name: str
    server: str
    original: str
    description: str
    approval: bool
    offered: bool
    kind: Literal["tool", "agent", "handoff"]


class HelpShown(TypedDict):
    """``/help``: the chat commands and the prompt commands."""

    type: Literal["help"]
    commands: list[ChatCommandRow]
    prompts: list[PromptRow]


class ToolsListed(TypedDict):
    """``/tools``: each tool; ``search``: whether tool search is on."""

    type: Literal["tools"]
    tools: list[ToolRow]
    search: bool


class PromptsListed(TypedDict):
    """``/prompts``: each prompt command."""

    type: Literal["prompts"]
    prompts: list[PromptRow]


class AgentRow(TypedDict):
    """An agent in ``/agents``: ``main`` or one of ``agents:``; ``callers``: the agents that may
    call it (as a tool, or as a step of their workflow)."""

    name: str
    kind: Literal["model", "chain", "parallel", "router", "loop"]
    description: str
    callers: list[str]
    current: NotRequired[bool]  # true for the agent answering the conversation


class AgentsListed(TypedDict):
    """``/agents``: the main agent, then each agent of ``agents:``."""

    type: Literal["agents"]
    agents: list[AgentRow]


class AgentShown(TypedDict):
    """``/agent [NAME]``: the agent answering the conversation (after ``/agent NAME``, the one the
    next message goes to) and the agents it can be switched to."""

    type: Literal["current_agent"]
    agent: str
    choices: list[str]


class ThreadShown(TypedDict):
    """``/thread``: the current thread id; ``note`` says whether ``/thread ID`` resumed a thread or
    started a new one (else empty)."""

    type: Literal["thread"]
    thread: str
    note: str


class UsageShown(TypedDict):
    """``/usage``: the thread's totals, per agent and all together (read from the checkpoint)."""

    type: Literal["usage_totals"]
    thread: str
    agents: dict[str, UsageTotals]
    total: UsageTotals


class ContextShown(TypedDict):
    """``/context``: what the thread's next model request carries against the limit (``limit``
    null: none); ``sent`` of its ``messages`` go whole or shortened, ``summarized`` as the summary."""

    type: Literal["context_window"]
    thread: str
    tokens: int
    limit: int | None
    strategy: Literal["trim", "summarize"]
    messages: int
    sent: int
    summarized: int
    summary: bool
    shortened: int


class CaseSaved(TypedDict):
    """``/save``: the case written."""

    type: Literal["saved"]
    case: str
    path: str


class MediaListed(TypedDict):
    """``/media``: the paths of the media saved for the thread."""

    type: Literal["media_list"]
    thread: str
    folder: str
    files: list[str]


class CatalogueChanged(TypedDict):
    """A server's tools, prompts or resources changed (names as the server gives them), in the
    chat or during a ``-p`` turn."""

    type: Literal["change"]
    server: str
    kind: Literal["tools", "prompts", "resources"]
    added: list[str]
    removed: list[str]
    changed: list[str]


class ChatError(TypedDict):
    """A command or an input line could not be used; the chat goes on. With ``-p``: the turn
    failed (``message`` says why); it is the last event, and the run exits 1."""

    type: Literal["error"]
    message: str


# --------------------------------------------------------------------------- reloads


class Reloaded(TypedDict):
    """The agent was reloaded; ``tools`` (the tool names) is added by the chat and ``watch``."""

    type: Literal["reload"]
    ms: float
    started: list[str]
    stopped: list[str]
    restarted: list[str]
    rebuilt: list[str]
    failed: dict[str, str]
    summary: str
    tools: NotRequired[list[str]]
    # The agents of 'agents:' the edit touched: "added", "changed", "removed" -> names (those with any).
    agents: NotRequired[dict[str, list[str]]]


class Watching(TypedDict):
    """``watch --json`` has started: the tool names."""

    type: Literal["watching"]
    tools: list[str]


class ReloadFailed(TypedDict):
    """An edit is invalid: located problems; the last good agent keeps running."""

    type: Literal["reload_error"]
    problems: list[str]


Question = ApprovalAsked | ElicitationAsked | SamplingAsked
Event = (
    ChatReady | Token | ToolCall | AgentStarted | HandedOff | AgentShown | ApprovalAsked | ElicitationAsked
    | SamplingAsked
    | ToolProgress | ElicitationCompleted | TaskChanged | ToolRetried | ToolResult | MediaSaved | FinalAnswer
    | HelpShown
    | ToolsListed | AgentsListed | ModelRetry | ModelFallback
    | PromptsListed | ThreadShown | CaseSaved | MediaListed | Reloaded | Watching | ReloadFailed
    | CatalogueChanged | Interrupted | ChatError | UsageReported | LimitReached | UsageShown | PolicyDecided
    | ContextFitted | ContextShown
)
EventSink = Callable[[Event], None]
ReloadEvent = Reloaded | ReloadFailed

# --------------------------------------------------------------------------- not on the wire


class ToolApprovalRequest(TypedDict):
    """The interrupt payload of a call waiting for approval (what LangGraph Server clients see);
    a turn yields it as :class:`ApprovalAsked`."""

    type: Literal["tool_approval"]
    tool: str
    args: dict[str, Any]
    id: str
    agent: NotRequired[str]
    policy: NotRequired[PolicyReference]


def is_question(event: Event) -> TypeIs[Question]:
    """Whether the turn waits for an answer to ``event`` (an approval, or a server's question)."""
    return event["type"] in ("approval", "elicitation", "sampling")


def question(payload: Mapping[str, Any]) -> Question:
    """The event of a turn paused on an interrupt (``payload``: the interrupt's value)."""
    # The payloads are built by runner.agent (approval_request, elicitation_request,
    # sampling_request) and read back from the checkpointer: the same fields, untyped.
    kind = payload.get("type")
    if kind == "elicitation":
        return cast(ElicitationAsked, {**payload, "type": "elicitation"})
    if kind == "sampling":
        return cast(SamplingAsked, {**payload, "type": "sampling"})
    return cast(ApprovalAsked, {**payload, "type": "approval"})


class TaskUpdate(TypedDict):
    """What a connection says of a call's task; :func:`call_event` names the tool and server."""

    type: Literal["task"]
    task_id: str
    status: TaskState
    message: str | None


class VisitCompleted(TypedDict):
    """What a connection says of a completed URL visit; :func:`call_event` names the tool and server."""

    type: Literal["elicitation_complete"]
    elicitation_id: str


class CallRetried(TypedDict):
    """What a call's path says as it makes the call again (see :class:`ToolRetried`);
    :func:`call_event` names the tool and the call."""

    type: Literal["retry"]
    server: str
    reason: str
    fallback: NotRequired[str]


CallNotice = TaskUpdate | VisitCompleted | CallRetried


def call_event(notice: CallNotice, tool: str, server: str,
               call_id: str | None = None) -> TaskChanged | ElicitationCompleted | ToolRetried:
    """The event of a ``notice`` about a call of ``tool`` on ``server`` (``call_id``: the
    model's call, when it is one)."""
    if notice["type"] == "task":
        return TaskChanged(type="task", tool=tool, server=server, task_id=notice["task_id"],
                           status=notice["status"], message=notice["message"])
    if notice["type"] == "retry":
        retried = ToolRetried(type="tool_retry", tool=tool, server=notice["server"], reason=notice["reason"])
        if "fallback" in notice:
            retried["fallback"] = notice["fallback"]
        if call_id is not None:
            retried["id"] = call_id
        return retried
    return ElicitationCompleted(type="elicitation_complete", tool=tool, server=server,
                                elicitation_id=notice["elicitation_id"])


class ServingStdio(TypedDict):
    """``serve`` answers over stdio (for its own stderr line, not printed as JSON)."""

    type: Literal["ready"]
    name: str
    transport: Literal["stdio"]


class Listening(TypedDict):
    """``serve --http`` listens at ``url`` (for its own stderr line, not printed as JSON); with
    ``--a2a``, ``a2a`` is the URL of its A2A agent card."""

    type: Literal["listening"]
    url: str
    name: str
    a2a: NotRequired[str]


ServeEvent = ServingStdio | Listening | Reloaded | ReloadFailed


def events_json_schema() -> dict[str, Any]:
    """The JSON Schema of one event (one line of ``--json`` output), for programs and docs."""
    from typing import Annotated

    from pydantic import Field, TypeAdapter

    schema = TypeAdapter(Annotated[Event, Field(discriminator="type")]).json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": EVENTS_SCHEMA_ID,
        "title": "Event",
        "description": "One event of mcp-run's --json output (one JSON object a line).",
        **schema,
    }
