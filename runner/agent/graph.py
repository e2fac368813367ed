"""The LangGraph agent: a model node and a tool node around a live tool registry.

A small hand-written ``StateGraph`` rather than ``create_agent``: the tools and the system prompt
are read from providers at every model call and every tool execution, so a tool-list change is seen
at the next step of a running turn, and a checkpointed thread survives recompiling the graph with
another tool set. Tool calls of one model turn run concurrently, one LangGraph task each. Calls that
need approval interrupt the graph first, one at a time, before any call of that step runs, so
re-running the approval node on resume repeats no side effect. A call whose arguments do not fit
its tool's input schema is not asked: the tool node answers the model with the problems.

    START -> model -> (a call needs approval?) -> approve -> tool (one task per call) -> model
                   -> (tool calls, none needing approval) -> tool (one task per call) -> model
                   -> (no tool calls, or max_steps reached) -> END

Each superstep costs a checkpoint, so the common step (no approval) takes two: model, then tools.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import jsonschema
import mcp_types as types
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp, is_invalid_resume
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send, interrupt
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner import sdk
from runner.agent.call_ledger import StartedCalls, remember_stopped
from runner.agent.sampling import counted, metered, sampling_calls
from runner.errors import RunnerError, ToolError
from runner.models import ModelChain, as_model_chain
from runner.store.checkpointers import (
    open_checkpointer,  # noqa: F401 (imported from here too)
    turn_durability,
)
from runner.tools.search import ToolSearch, remember_found
from runner.tools.suggest import unknown_tool_text

logger = logging.getLogger(__name__)

ToolsProvider = Callable[[], Sequence[BaseTool]]
# Answers a tool call directly (ToolCatalog.run_tool_call); None: not its tool, use the LangChain tool.
DirectToolCall = Callable[[dict[str, Any]], Awaitable[ToolMessage | None]]
SystemPromptProvider = Callable[[], str | Awaitable[str]]
ApprovalPredicate = Callable[[str], bool]
# Whether a call's arguments fit its tool's input schema (ToolCatalog.argument_problems): a call
# that does not is not put to the user; the tool node answers the model with the problems.
ArgumentsCheck = Callable[[str, dict[str, Any]], bool]

MAX_STEPS_REASON = "max_steps"
NOT_RUN_TEXT = "This call did not run: the turn ended before it was executed."
STOPPED_TEXT = (
    "This call was stopped while it was running (the turn was interrupted): it may or may not "
    "have taken effect. Check before calling it again."
)


class ToolTask(TypedDict):
    call: dict[str, Any]  # one tool call, sent to the tool node as its own task
    steps_left: NotRequired[int]  # model calls the turn has left: completions servers may take


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    # Model calls in the current turn. A turn starts when the model is called after anything but
    # tool results (a user message, prompt messages): the count starts again there.
    model_calls: NotRequired[int]
    # Tools search_tools found in this thread: bound at every later step (runner.tools.search).
    found_tools: NotRequired[Annotated[list[str], remember_found]]
    # Ids of tool calls that had started when their turn was stopped (runner.agent.call_ledger).
    stopped_calls: NotRequired[Annotated[list[str], remember_stopped]]


# --------------------------------------------------------------------------- approvals


class Approve(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["approve"]


class Deny(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["deny"]
    reason: str | None = None


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["edit"]
    args: dict[str, Any]


Decision = Annotated[Approve | Deny | Edit, Field(discriminator="action")]


def approval_request(call: dict[str, Any]) -> dict[str, Any]:
    """The interrupt payload for one tool call waiting for approval."""
    return {"type": "tool_approval", "tool": call["name"], "args": call["args"], "id": call["id"]}


def _ask_approval(call: dict[str, Any]) -> Approve | Deny | Edit:
    """Interrupt for one call; the resume value is validated by LangGraph, and an invalid one is
    not saved, so the same question can be answered again."""
    try:
        return interrupt(approval_request(call), response_schema=Decision)
    except ValidationError as exc:
        raise ToolError(
            "an approval is resumed with {'action': 'approve'}, {'action': 'deny', 'reason': ...} "
            f"or {{'action': 'edit', 'args': {{...}}}}: {exc.errors()[0]['msg']}"
        ) from exc


# --------------------------------------------------------------------------- elicitation


class ElicitationAnswer(BaseModel):
    """The answer to a server's request for input: accept (with the form's values), decline, cancel."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool | list[str] | None] | None = None
    # URL mode: the request the answer was given for; a different request is asked, not answered.
    elicitation_id: str | None = None


def elicitation_request(server: str, request: types.ElicitRequestParams) -> dict[str, Any]:
    """The interrupt payload for a server's request for input (form or URL mode)."""
    payload: dict[str, Any] = {"type": "elicitation", "server": server, "message": request.message}
    if isinstance(request, types.ElicitRequestURLParams):
        return {**payload, "mode": "url", "url": request.url, "elicitation_id": request.elicitation_id}
    return {**payload, "mode": "form", "schema": request.requested_schema}


def _answer_schema(requested: dict[str, Any] | None) -> type[ElicitationAnswer]:
    """ElicitationAnswer whose accepted content must match the requested schema, so a bad value
    fails the resume (nothing is saved) and the same question can be answered again."""

    class Answer(ElicitationAnswer):
        @model_validator(mode="after")
        def _content_matches(self) -> Answer:
            if self.action == "accept" and requested:
                # The schema's defaults count as given: the server receives them filled in.
                given = {**_defaults(requested), **(self.content or {})}
                problems = sorted(jsonschema.Draft202012Validator(requested).iter_errors(given), key=str)
                if problems:
                    where = ".".join(map(str, problems[0].absolute_path)) or "content"
                    raise ValueError(f"{where}: {problems[0].message}")
            return self

    return Answer


def _defaults(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    return {name: field["default"] for name, field in properties.items()
            if isinstance(field, dict) and "default" in field}


def ask_by_interrupt(server: str, request: types.ElicitRequestParams) -> types.ElicitResult:
    """Interrupt the graph with the request; resume with ``Command(resume={"action": "accept",
    "content": {...}})`` (or decline / cancel). Outside a graph run no one can answer: declined."""
    try:
        get_config()
    except RuntimeError:  # a direct call (the chat's /call, `mcp-run call`): not in a graph
        return types.ElicitResult(action="decline")
    schema = request.requested_schema if isinstance(request, types.ElicitRequestFormParams) else None
    answer = interrupt(elicitation_request(server, request), response_schema=_answer_schema(schema))
    # Resume values are matched to interrupts by position: a retried call may ask for another
    # URL where an earlier one was answered. That answer is skipped and the new request asked.
    while isinstance(request, types.ElicitRequestURLParams) and answer.elicitation_id not in (
            None, request.elicitation_id):
        answer = interrupt(elicitation_request(server, request), response_schema=_answer_schema(None))
    if answer.action != "accept" or isinstance(request, types.ElicitRequestURLParams):
        return types.ElicitResult(action=answer.action)
    return types.ElicitResult(action="accept", content=answer.content or {})


# --------------------------------------------------------------------------- the graph


def build_graph(
    model: ModelChain | BaseChatModel,
    *,
    tools_provider: ToolsProvider,
    system_prompt_provider: SystemPromptProvider,
    max_steps: int,
    needs_approval: ApprovalPredicate = lambda name: False,
    arguments_fit: ArgumentsCheck = lambda name, arguments: True,
    checkpointer: BaseCheckpointSaver | None = None,
    tool_search: ToolSearch | None = None,
    direct_call: DirectToolCall | None = None,
) -> CompiledStateGraph:
    """Compile the agent graph. Invoke with ``{"messages": [HumanMessage(...)]}`` and a thread id;
    resume an approval interrupt with ``Command(resume={"action": "approve"})`` (or deny / edit).

    With ``tool_search``, each model step is offered what it selects (``search_tools``, pinned and
    found tools, or everything below its threshold); ``search_tools`` calls run in the ``search``
    node, which remembers the tools found in the thread's ``found_tools``."""
    chain = as_model_chain(model)

    def asks(call: dict[str, Any]) -> bool:
        # Invalid arguments would be refused once approved: the model fixes them first.
        return needs_approval(call["name"]) and arguments_fit(call["name"], call["args"])

    async def call_model(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        messages = state["messages"]
        continued = bool(messages) and isinstance(messages[-1], ToolMessage)
        calls = state.get("model_calls", 0) + sampling_calls(messages) if continued else 0
        if calls >= max_steps:
            logger.info("turn stopped after %d model call(s) (agent.max_steps)", max_steps)
            return {"messages": [_max_steps_message(max_steps)]}
        system_prompt = system_prompt_provider()
        if inspect.isawaitable(system_prompt):
            system_prompt = await system_prompt
        prompt: list[BaseMessage] = [SystemMessage(system_prompt)] if system_prompt else []
        prompt += _close_dangling_tool_calls(messages, state.get("stopped_calls", ()))
        if tool_search is None:
            tools = list(tools_provider())
        else:  # search_tools, pinned and found tools past the threshold; every tool below it
            tools = tool_search.offered(state.get("found_tools", []))
        reply = await chain.ainvoke(prompt, tools=tools, config=config)
        return {"messages": [reply], "model_calls": calls + 1}

    async def approve_calls(state: AgentState) -> dict[str, Any]:
        # Approvals are asked one at a time and settled before any call of the step runs;
        # resuming re-runs this node from the top, which has no side effects.
        request = _last_request(state["messages"])
        calls = [dict(call) for call in request.tool_calls]
        available = {tool.name for tool in tools_provider()}
        messages: list[BaseMessage] = []
        edited = False
        for call in calls:
            if call["name"] not in available or not asks(call):
                continue
            decision = _ask_approval(call)
            if isinstance(decision, Deny):
                messages.append(_denied(call, decision.reason))
            elif isinstance(decision, Edit):
                call["args"] = decision.args
                edited = True
        if edited:  # replaces the request (same id): the history shows the arguments that ran
            messages.insert(0, request.model_copy(update={"tool_calls": calls}))
        return {"messages": messages}

    # The routes are coroutines: LangGraph runs a plain function in a worker thread.
    async def dispatch_calls(state: AgentState) -> list[Send] | str:
        # One task per call: they run concurrently, and an interrupt inside one tool re-runs
        # only that call on resume, not its siblings.
        messages = state["messages"]
        request = _last_request(messages)
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        pending = [call for call in request.tool_calls if call["id"] not in answered]
        left = max_steps - state.get("model_calls", 0)
        sends = [Send(_node_for(call), ToolTask(call=dict(call), steps_left=left)) for call in pending]
        return sends or "model"

    def _node_for(call: dict[str, Any]) -> str:
        return "search" if tool_search is not None and tool_search.answers(call["name"]) else "tool"

    async def run_search(task: ToolTask) -> dict[str, Any]:
        assert tool_search is not None
        message, found = tool_search.answer(task["call"])
        return {"messages": [message], "found_tools": found}

    started = StartedCalls(checkpointer)

    async def run_tool(task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        step = started.begin(task["call"]["id"], config)
        try:
            return await _run_tool(task, config)
        except asyncio.CancelledError:
            await started.stopped(step)
            raise
        finally:
            started.end(step)

    async def _run_tool(task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        call = task["call"]
        with metered(task.get("steps_left")) as budget:
            if direct_call is not None:
                answered = await _answered(call, lambda: direct_call(call))
                if answered is not None:
                    return {"messages": [counted(answered, budget)]}
            available = {tool.name: tool for tool in tools_provider()}
            searching = tool_search is not None and tool_search.active()
            return {"messages": [counted(await _execute(call, available, config, searching), budget)]}

    async def route_after_model(state: AgentState) -> list[Send] | str:
        last = state["messages"][-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return END
        if any(asks(call) for call in last.tool_calls):
            return "approve"
        return await dispatch_calls(state)  # nothing to ask: the calls run at the next superstep

    graph = StateGraph(AgentState)
    graph.add_node("model", call_model)
    graph.add_node("approve", approve_calls)
    graph.add_node("tool", run_tool)
    graph.add_edge(START, "model")
    graph.add_edge("tool", "model")
    call_nodes = ["tool", "model"]
    if tool_search is not None:
        graph.add_node("search", run_search)
        graph.add_edge("search", "model")
        call_nodes.append("search")
    graph.add_conditional_edges("model", route_after_model, ["approve", *call_nodes, END])
    graph.add_conditional_edges("approve", dispatch_calls, call_nodes)
    compiled = graph.compile(checkpointer=checkpointer, name="mcp-run")
    # A model step takes at most three supersteps (model, approve, tool); max_steps is the limit that counts.
    # The durability is the run's default (a caller's own ``durability=`` still wins).
    return compiled.with_config(recursion_limit=3 * max_steps + 5,
                                configurable=sdk.durability_config(turn_durability(checkpointer)))


def _last_request(messages: Sequence[BaseMessage]) -> AIMessage:
    """The model message whose tool calls are being handled (routed here only after one)."""
    return next(m for m in reversed(messages) if isinstance(m, AIMessage))


def _max_steps_message(max_steps: int) -> AIMessage:
    return AIMessage(
        content=(
            f"I stopped after {max_steps} model call{'s' if max_steps != 1 else ''} in this turn "
            "(agent.max_steps). "
            "Say 'continue' to go on, or raise agent.max_steps in agent.yaml."
        ),
        response_metadata={"finish_reason": MAX_STEPS_REASON},
    )


def _close_dangling_tool_calls(
    messages: Sequence[BaseMessage], stopped: Sequence[str] = ()
) -> list[BaseMessage]:
    """The history with an error result for every tool call that never got one.

    A turn that ended early (an error, Ctrl-C, a new message instead of an approval) leaves tool
    calls without results, which providers reject. A call in ``stopped`` had started: the server
    may have acted on it, and the model is told so rather than that it did not run.
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    closed: list[BaseMessage] = []
    for message in messages:
        closed.append(message)
        if isinstance(message, AIMessage):
            closed += [
                ToolMessage(
                    content=STOPPED_TEXT if call["id"] in stopped else NOT_RUN_TEXT,
                    tool_call_id=call["id"],
                    name=call["name"],
                    status="error",
                )
                for call in message.tool_calls
                if call["id"] not in answered
            ]
    return closed


def _denied(call: dict[str, Any], reason: str | None) -> ToolMessage:
    because = f": {reason}" if reason else "."
    return _error_message(call, f"The user denied this call to {call['name']}{because}")


def _error_message(call: dict[str, Any], text: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call["id"], name=call["name"], status="error")


async def _execute(
    call: dict[str, Any], available: dict[str, BaseTool], config: RunnableConfig, searching: bool = False
) -> ToolMessage:
    """Run one tool call; failures the model should hear about become error results."""
    tool = available.get(call["name"])
    if tool is None:
        logger.info("the model called %r, which is not (or no longer) available", call["name"])
        return _error_message(call, unknown_tool_text(call["name"], available, searching=searching))
    result = await _answered(call, lambda: tool.ainvoke({**call, "type": "tool_call"}, config))
    if isinstance(result, ToolMessage):
        return result
    return ToolMessage(content=str(result), tool_call_id=call["id"], name=call["name"])


async def _answered(call: dict[str, Any], invoke: Callable[[], Awaitable[Any]]) -> Any:
    """What ``invoke`` returns; failures the model should hear about become error results."""
    try:
        return await invoke()
    except GraphBubbleUp:
        raise
    except (RunnerError, ToolException) as exc:
        text = str(exc)  # a server's own message often says "Error executing tool ..." already
        return _error_message(call, text if text.lower().startswith("error") else f"Error: {text}")
    except ValidationError as exc:
        if is_invalid_resume(exc):  # a bad answer to the tool's own interrupt: ask again
            raise
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return _error_message(call, f"Invalid arguments for {call['name']}: {problems}")
