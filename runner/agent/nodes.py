"""The agent graph's nodes and routes, each a small callable given what it needs at construction.

:func:`runner.agent.graph.build_graph` wires them into a ``StateGraph``; each can also be called
alone with a state (or a task) and a config, which is how tests/agent/test_graph_nodes.py exercises them.
They are callable objects rather than closures: LangGraph reads each one's signature (whether it
takes ``config``, the input type of a ``Send`` target) from its ``__call__``, and runs it on the
event loop because ``__call__`` is a coroutine (a plain function would go to a worker thread).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Protocol, TypedDict, cast, runtime_checkable

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langgraph.errors import GraphBubbleUp, is_invalid_resume
from langgraph.graph import END
from langgraph.graph.message import add_messages
from langgraph.types import Send, interrupt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner import sdk
from runner.agent.call_ledger import StartedCalls, remember_stopped
from runner.agent.context import ContextSummary, ContextWindow
from runner.agent.sampling import counted, metered, sampling_calls
from runner.agent.spending import (
    Spending,
    add_usage,
    latest_totals,
    refused_call,
    step_event,
    tool_call_usage,
)
from runner.agent.structured import StructuredOutput
from runner.agent.turn_stream import RERUN, naming_agent, stream_writer
from runner.errors import OutputError, RunnerError, ToolError
from runner.events import Event, ToolApprovalRequest
from runner.events import ToolCall as ToolCallEvent
from runner.models import ModelChain
from runner.tools.policy import PolicyDecision
from runner.tools.search import ToolSearch, remember_found
from runner.tools.suggest import unknown_tool_text

logger = logging.getLogger(__name__)

ToolsProvider = Callable[[], Sequence[BaseTool]]
# Answers a tool call directly (ToolCatalog.run_tool_call); None: not its tool, use the LangChain tool.
DirectToolCall = Callable[[dict[str, Any]], Awaitable[ToolMessage | None]]
SystemPromptProvider = Callable[[], str | Awaitable[str]]


@runtime_checkable
class AnswersCalls(Protocol):
    """A tool that answers a call itself, given the tool node's config (an agent of ``agents:``,
    :class:`runner.agent.team.AgentTool`): the node runs it without LangChain's tool layer (its
    callbacks, input parsing and output formatting cost more than a one-step agent's run)."""

    async def answer_call(self, call: dict[str, Any], config: RunnableConfig) -> ToolMessage: ...


ApprovalPredicate = Callable[[str], bool]
# Whether a call's arguments fit its tool's input schema (ToolCatalog.argument_problems): a call
# that does not is not put to the user; the tool node answers the model with the problems.
ArgumentsCheck = Callable[[str, dict[str, Any]], bool]
# What the manifest's policy says of a call (ToolCaller.decide): "ask" puts it to the user, others
# run without asking (a denied call is refused by the tool layer, with its reason).
PolicyCheck = Callable[[str, dict[str, Any]], PolicyDecision | None]

MAX_STEPS_REASON = "max_steps"
NOT_RUN_TEXT = "This call did not run: the turn ended before it was executed."
STOPPED_TEXT = (
    "This call was stopped while it was running (the turn was interrupted): it may or may not "
    "have taken effect. Check before calling it again."
)

# Node names, shared by the nodes that route to them and the graph that adds them.
MODEL = "model"
APPROVE = "approve"
TOOL = "tool"
SEARCH = "search"


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
    # What the thread spent, per agent: tokens, cost, tool calls, seconds (runner.agent.spending).
    usage: NotRequired[Annotated[dict[str, dict[str, float]], add_usage]]
    # The current turn's totals (but its time) at its last model step, and when it stops at a
    # question: the turn resumed by the answer goes on counting from them
    # (runner.agent.spending.turn_started).
    turn_usage: NotRequired[Annotated[dict[str, float], latest_totals]]
    # What the requests carry instead of the thread's oldest messages (runner.agent.context).
    context_summary: NotRequired[ContextSummary]
    # The agent answering the thread, when one was handed it, and who handed it (runner.agent.handoffs).
    agent: NotRequired[str]
    handed_from: NotRequired[str | None]


# --------------------------------------------------------------------------- approvals


class Approve(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["approve"]


class Deny(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["deny"]
    reason: str | None = None
    asked: bool = True  # False: no one could be asked (a one-shot run); ``reason`` says why


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["edit"]
    args: dict[str, Any]


Decision = Annotated[Approve | Deny | Edit, Field(discriminator="action")]


def approval_request(call: dict[str, Any], decision: PolicyDecision | None = None) -> ToolApprovalRequest:
    """The interrupt payload for one tool call waiting for approval (``decision``: the policy's,
    named in it when a rule of ``policy`` asks, not a ``tools.approve`` entry)."""
    request = ToolApprovalRequest(type="tool_approval", tool=call["name"], args=call["args"], id=call["id"])
    if decision is not None and decision.rule is not None:
        request["policy"] = decision.reference()
    return naming_agent(request)


def _ask_approval(call: dict[str, Any], decision: PolicyDecision | None = None) -> Approve | Deny | Edit:
    """Interrupt for one call; the resume value is validated by LangGraph, and an invalid one is
    not saved, so the same question can be answered again."""
    try:
        # LangGraph validates any type form; its overloads take only a class, not this annotated union.
        return interrupt(approval_request(call, decision), response_schema=Decision)  # type: ignore[call-overload]
    except ValidationError as exc:
        raise ToolError(
            "an approval is resumed with {'action': 'approve'}, {'action': 'deny', 'reason': ...} "
            f"or {{'action': 'edit', 'args': {{...}}}}: {exc.errors()[0]['msg']}"
        ) from exc


@dataclass(frozen=True)
class Approvals:
    """Which calls are put to the user before they run."""

    needs_approval: ApprovalPredicate
    arguments_fit: ArgumentsCheck
    policy: PolicyCheck | None = None  # set: it decides, by name and arguments, instead of needs_approval

    def decided(self, call: Mapping[str, Any]) -> PolicyDecision | None:
        """The policy's decision on ``call`` (None without a policy, or when no rule matches)."""
        return self.policy(call["name"], call["args"]) if self.policy is not None else None

    def asks(self, call: Mapping[str, Any]) -> bool:
        if self.policy is not None:
            decision = self.policy(call["name"], call["args"])
            asked = decision is not None and decision.action == "ask"
        else:
            asked = self.needs_approval(call["name"])
        # Invalid arguments would be refused once approved: the model fixes them first.
        return asked and self.arguments_fit(call["name"], call["args"])


# --------------------------------------------------------------------------- nodes


@dataclass(frozen=True)
class ModelNode:
    """One model call: the system prompt and the tools as they are now, and the turn's step count."""

    chain: ModelChain
    tools_provider: ToolsProvider
    system_prompt_provider: SystemPromptProvider
    max_steps: int
    tool_search: ToolSearch | None = None
    output: StructuredOutput | None = None  # the final answer is an object (``output:``)
    spending: Spending | None = None
    context: ContextWindow | None = None

    async def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        messages = state["messages"]
        continued = bool(messages) and isinstance(messages[-1], ToolMessage)
        calls = state.get("model_calls", 0) + sampling_calls(messages) if continued else 0
        if calls >= self.max_steps:
            logger.info("turn stopped after %d model call(s) (agent.max_steps)", self.max_steps)
            ending = {} if self.spending is None else self.spending.ending(config)
            return {"messages": [max_steps_message(self.max_steps)], **ending}
        if self.spending is not None and (stop := self.spending.stop_before_step(state, config)):
            return stop
        system_prompt = self.system_prompt_provider()
        if inspect.isawaitable(system_prompt):
            system_prompt = await system_prompt
        prompt: list[BaseMessage] = [SystemMessage(system_prompt)] if system_prompt else []
        history = close_dangling_tool_calls(messages, state.get("stopped_calls", ()))
        if self.tool_search is None:
            tools = list(self.tools_provider())
        else:  # search_tools, pinned and found tools past the threshold; every tool below it
            tools = self.tool_search.offered(state.get("found_tools", []))
        kept: dict[str, Any] = {}
        if self.context is not None:  # within context.max_tokens; a new summary is kept in the thread
            history, summary = await self.context.fit(system_prompt, tools, history,
                                                      state.get("context_summary"), config)
            kept = {"context_summary": summary} if summary is not None else {}
        prompt = prompt + history
        rejected: list[dict[str, Any]] = []  # the state updates of structured answers not accepted
        stopped: list[dict[str, Any]] = []  # the update ending the turn at a limit before a retry
        if self.output is None:
            reply = await self.chain.ainvoke(prompt, tools=tools, config=config)
        else:  # offered final_answer or asked with response_format; the answer checked, retried
            output, tools = self.output, self.output.offer(tools)
            reply = await self.chain.ainvoke(prompt, tools=tools, config=config, options=output.options())
            if output.answers(reply) and reply.response_metadata.get("finish_reason") != MAX_STEPS_REASON:
                try:
                    reply = await output.settle(reply, prompt, lambda conversation: self.chain.ainvoke(
                        conversation, tools=tools, config=config, options=output.options()),
                        rejected=lambda attempt: rejected.append(self._rejected(attempt, config)),
                        stop=lambda: self._stop_retry(state, config, stopped))
                except OutputError:  # the turn fails: its steps are still the thread's
                    if self.spending is not None:
                        self.spending.failed_steps(_summed(rejected), config)
                    raise
        if stopped:  # a retry is a model step: a limit reached first ends the turn instead
            spent = {key: value for key, value in stopped[0].items() if key != "messages"}
        else:
            spent = {} if self.spending is None else self.spending.after_step(reply, config)
        if rejected:
            spent["usage"] = add_usage(_summed(rejected), spent.get("usage"))
        if self.spending is not None:
            spent.update(self.spending.turn_so_far(config))
        steps = len(rejected) + (0 if stopped else 1)
        return {"messages": [with_unique_call_ids(reply)], "model_calls": calls + steps, **spent, **kept}

    def _stop_retry(self, state: AgentState, config: RunnableConfig, stopped: list[dict[str, Any]]
                    ) -> AIMessage | None:
        """The message ending the turn instead of a structured answer's retry (a limit reached, as
        before any model step); its state update is kept in ``stopped``."""
        stop = None if self.spending is None else self.spending.stop_before_step(state, config)
        if stop is None:
            return None
        stopped.append(stop)
        message: AIMessage = stop["messages"][0]
        return message

    def _rejected(self, attempt: AIMessage, config: RunnableConfig) -> dict[str, Any]:
        """A structured answer that did not validate: a model step of its own, counted in the
        turn's ledger (so in its totals and budgets) and reported by its own ``usage`` event."""
        if self.spending is None:
            return {"usage": {}}  # nothing counted: no pricer, no budgets
        update = self.spending.after_step(attempt, config)
        spent = update["usage"][self.spending.agent]
        if (event := step_event(attempt, spent, config, self.spending.agent)) is not None and (
                sink := stream_writer()) is not None:
            sink(event)
        return update


@dataclass(frozen=True)
class ApprovalNode:
    """Asks the user about each call that needs it, one interrupt at a time, before any call runs.

    Resuming re-runs this node from the top, which has no side effects."""

    tools_provider: ToolsProvider
    approvals: Approvals

    async def __call__(self, state: AgentState) -> dict[str, Any]:
        request = last_request(state["messages"])
        calls = [dict(call) for call in request.tool_calls]
        available = {tool.name for tool in self.tools_provider()}
        messages: list[BaseMessage] = []
        edited = False
        for call in calls:
            if call["name"] not in available or not self.approvals.asks(call):
                continue
            decision = _ask_approval(call, self.approvals.decided(call))
            if isinstance(decision, Deny):
                messages.append(_denied(call, decision))
            elif isinstance(decision, Edit):
                call["args"] = decision.args
                edited = True
        if edited:  # replaces the request (same id): the history shows the arguments that ran
            messages.insert(0, request.model_copy(update={"tool_calls": calls}))
        return {"messages": messages}


@dataclass(frozen=True)
class SearchNode:
    """Answers a ``search_tools`` call and remembers the tools it found in the thread."""

    tool_search: ToolSearch

    async def __call__(self, task: ToolTask) -> dict[str, Any]:
        message, found = self.tool_search.answer(task["call"])
        return {"messages": [message], "found_tools": found}


@dataclass(frozen=True)
class ToolNode:
    """Runs one tool call (one task per call); failures the model should hear about become error
    results. A call cancelled while running is recorded in ``started`` (the server may have acted)."""

    tools_provider: ToolsProvider
    started: StartedCalls
    tool_search: ToolSearch | None = None
    direct_call: DirectToolCall | None = None

    async def __call__(self, task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        if (refused := refused_call(task["call"], config)) is not None:  # a limit is reached
            return {"messages": [refused]}
        if sdk.resuming(config) and (writer := stream_writer()) is not None:
            writer(rerun_event(task["call"]))  # its request was told by the turn that made it
        step = self.started.begin(task["call"]["id"], config)
        try:
            return {**await self._run(task, config), **tool_call_usage(config)}
        except asyncio.CancelledError:
            await self.started.stopped(step)
            raise
        finally:
            self.started.end(step)

    async def _run(self, task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        call = task["call"]
        with metered(task.get("steps_left")) as budget:
            if self.direct_call is not None:
                direct_call = self.direct_call
                answered = await _answered(call, lambda: direct_call(call))
                if answered is not None:
                    return {"messages": [counted(answered, budget)]}
            available = {tool.name: tool for tool in self.tools_provider()}
            searching = self.tool_search is not None and self.tool_search.active()
            return {"messages": [counted(await _execute(call, available, config, searching), budget)]}


# --------------------------------------------------------------------------- routes


class Route(Runnable[Any, Any]):
    """A conditional edge's route (``decide``: the state -> where the graph goes), awaited as it is.

    LangGraph traces a route given as a function: a callback run of its own, a task in a copied
    context to run it and another to end the run, at every step of every agent. A route only
    reads the state: what it decides is in the step's own events."""

    def __init__(self, decide: Callable[[Any], Awaitable[Any]]) -> None:
        self.decide = decide
        self.name = getattr(decide, "__name__", type(decide).__name__)  # the branch's, as LangGraph names it

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        raise TypeError("the agent's graph runs on the event loop only (ainvoke, astream)")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self.decide(input)


@dataclass(frozen=True)
class CallDispatch:
    """The route to the calls of the model's last request not answered yet: one task per call, so
    they run concurrently, and an interrupt inside one tool re-runs only that call on resume."""

    max_steps: int
    tool_search: ToolSearch | None = None

    async def __call__(self, state: AgentState) -> list[Send] | str:
        messages = state["messages"]
        request = last_request(messages)
        answered = answered_calls(messages)
        pending = [call for call in request.tool_calls if call["id"] not in answered]
        left = self.max_steps - state.get("model_calls", 0)
        sends = [Send(self.node_for(call), ToolTask(call=dict(call), steps_left=left))
                 for call in pending]
        return sends or MODEL

    def node_for(self, call: Mapping[str, Any]) -> str:
        searched = self.tool_search is not None and self.tool_search.answers(call["name"])
        return SEARCH if searched else TOOL


@dataclass(frozen=True)
class ModelRoute:
    """After the model: the end of the turn, the approvals, or straight to the calls."""

    approvals: Approvals
    dispatch: CallDispatch

    async def __call__(self, state: AgentState) -> list[Send] | str:
        last = state["messages"][-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return END
        if any(self.approvals.asks(call) for call in last.tool_calls):
            return APPROVE
        return await self.dispatch(state)  # nothing to ask: the calls run at the next superstep


# --------------------------------------------------------------------------- helpers


def _summed(updates: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """The ``usage`` of state updates added up."""
    total: dict[str, dict[str, float]] = {}
    for update in updates:
        total = add_usage(total, update.get("usage"))
    return total


def last_request(messages: Sequence[BaseMessage]) -> AIMessage:
    """The model message whose tool calls are being handled (routed here only after one)."""
    return next(m for m in reversed(messages) if isinstance(m, AIMessage))


def answered_calls(messages: Sequence[BaseMessage]) -> set[str]:
    """Ids of the calls of the last model message that have a result: only the results after it
    answer its calls (a provider, or a script started again, may use an earlier request's id)."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            break
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
    return answered


def answers_by_request(messages: Sequence[BaseMessage]) -> dict[int, set[str]]:
    """For the index of each model message, the ids of the results that answer its calls: those
    between it and the next model message."""
    answered: dict[int, set[str]] = {}
    current: set[str] | None = None
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            current = answered[index] = set()
        elif isinstance(message, ToolMessage) and current is not None:
            current.add(message.tool_call_id)
    return answered


def with_unique_call_ids(reply: AIMessage) -> AIMessage:
    """``reply`` with a fresh id for each tool call whose id is empty or repeats an earlier call's
    of the same message: each call gets its own task and its own result, matched by id."""
    seen: set[str] = set()
    calls: list[ToolCall] = []
    for call in reply.tool_calls:
        call_id = call.get("id")
        if not call_id or call_id in seen:
            call = {**call, "id": _fresh_call_id(call_id, seen, reply.tool_calls)}
        seen.add(cast(str, call["id"]))
        calls.append(call)
    if calls == reply.tool_calls:
        return reply
    return reply.model_copy(update={"tool_calls": calls})


def _fresh_call_id(given: str | None, seen: set[str], calls: Sequence[ToolCall]) -> str:
    """``given`` with the first number that makes it unique in the message ("same-2"), or
    "call-N" for a call with no id."""
    taken = seen | {str(call.get("id")) for call in calls}
    base = given or "call"
    return next(f"{base}-{count}" for count in range(2, len(taken) + 3) if f"{base}-{count}" not in taken)


def max_steps_message(max_steps: int) -> AIMessage:
    return AIMessage(
        content=(
            f"I stopped after {max_steps} model call{'s' if max_steps != 1 else ''} in this turn "
            "(agent.max_steps). "
            "Say 'continue' to go on, or raise agent.max_steps in the agent's manifest."
        ),
        response_metadata={"finish_reason": MAX_STEPS_REASON},
    )


def close_dangling_tool_calls(
    messages: Sequence[BaseMessage], stopped: Sequence[str] = ()
) -> list[BaseMessage]:
    """The history with an error result for every tool call that never got one.

    A turn that ended early (an error, Ctrl-C, a new message instead of an approval) leaves tool
    calls without results, which providers reject. A call in ``stopped`` had started: the server
    may have acted on it, and the model is told so rather than that it did not run.
    """
    answered_by = answers_by_request(messages)
    closed: list[BaseMessage] = []
    for index, message in enumerate(messages):
        closed.append(message)
        if isinstance(message, AIMessage):
            answered = answered_by[index]
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


def rerun_event(call: Mapping[str, Any]) -> Event:
    """The ``tool_call`` event of a call run again by a resumed run, marked :data:`RERUN`: the turn
    continuing a cut-off one tells it as the call starts (an answer's turn has told it already)."""
    called = ToolCallEvent(type="tool_call", name=call["name"], args=call["args"], id=str(call["id"]))
    return cast(Event, {**called, RERUN: True})


def _denied(call: dict[str, Any], decision: Deny) -> ToolMessage:
    because = f": {decision.reason}" if decision.reason else "."
    if not decision.asked:
        return _error_message(call, f"The call to {call['name']} was not approved{because}")
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
    if isinstance(tool, AnswersCalls):
        answering = tool
        return cast(ToolMessage, await _answered(call, lambda: answering.answer_call(call, config)))
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
