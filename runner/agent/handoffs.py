"""Handoffs: an agent hands the conversation to another, which answers from then on.

The thread's *current agent* is part of its checkpointed state (``agent``, with ``handed_from``,
the agent that handed it over): a restarted process resuming the thread starts its next turn with
that agent. The main graph routes each turn to it::

    START -> (current agent: main?) -> model ... as always
          -> (another agent)        -> agent -> (it handed off again?) -> model | agent | END

The ``agent`` node runs the current agent's own graph (its prompt, model, tools, approvals and
``max_steps``) as a subgraph of the turn, on the thread's messages so far; what it adds joins the
thread. A model is offered a ``handoff_to_NAME`` tool per agent of its ``handoffs`` and, when it
answers a conversation handed to it, ``handoff_back``. Calling one ends the model's step: the
``handoff`` node records the new current agent (a ``handoff`` event says so), the other calls of
that step do not run, and the same turn goes on with the new agent answering. The user switches
with ``/agent NAME`` or ``--agent NAME``: the next turn's input names the agent
(:func:`switching_input`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import END, START
from pydantic import BaseModel, Field

from runner.agent.nodes import (
    APPROVE,
    MODEL,
    AgentState,
    Approvals,
    CallDispatch,
    ModelRoute,
    Route,
    answered_calls,
    last_request,
)
from runner.agent.spending import add_usage, turn_ledger
from runner.agent.turn_stream import AGENT_KEY, NAMESPACE, stream_writer
from runner.errors import ToolError
from runner.events import FinalAnswer, HandedOff
from runner.manifest import MAIN_AGENT, Manifest, ModelAgentSpec
from runner.manifest.agents import HANDOFF_BACK, HANDOFF_PREFIX

if TYPE_CHECKING:
    from langgraph.graph import StateGraph

HANDOFF = "handoff"  # the node that takes a handoff call
ANSWER = "agent"  # the main graph's node running the current agent, when it is not main
HANDED_TO = "handed_to"  # the artifact key of a handoff's tool result: the agent it went to
ANSWERING = "answering"  # the custom event naming the agent whose run's events come from a namespace
MAX_HANDOFFS = 5  # in one turn: agents handing the conversation round and round end the turn
NOT_TAKEN_TEXT = "This call did not run: the conversation was handed to {target} in the same step."
HANDOFF_DESCRIPTION = (
    "Hand the conversation to {target}, who answers the user from now on (this message too), "
    "seeing the conversation so far. {target}: {about}"
)
BACK_DESCRIPTION = (
    "Hand the conversation back to the agent that handed it to you (main, if the user chose you): "
    "it answers the user from now on, this message too."
)


class HandoffReason(BaseModel):
    reason: str | None = Field(None, description="Why, in one sentence; the user sees it.")


def current_agent(state: Mapping[str, Any]) -> str:
    """The agent answering the thread ``state`` is of (``main`` unless one was handed it)."""
    agent = state.get("agent")
    return agent if isinstance(agent, str) and agent else MAIN_AGENT


def switching_input(given: Any, agent: str) -> Any:
    """The graph input ``given`` (a turn's new messages) that also makes ``agent`` the current
    agent: the user switched (``/agent``, ``--agent``); a handoff back from it goes to main."""
    origin = None if agent == MAIN_AGENT else MAIN_AGENT
    return {**given, "agent": agent, "handed_from": origin}


def handoff_tool(name: str, description: str) -> BaseTool:
    """A tool the model calls to hand the conversation over. The graph takes the call itself
    (:class:`HandoffNode`), so the tool only runs if something calls it outside a graph."""

    async def refuse(reason: str | None = None) -> str:
        raise ToolError(f"{name} hands the conversation over only as the model's own call in a turn")

    return StructuredTool(name=name, description=description, args_schema=HandoffReason, coroutine=refuse)


def agent_description(manifest: Manifest, name: str) -> str:
    if name == MAIN_AGENT:
        return manifest.description or f"the main agent of {manifest.name}."
    spec = manifest.agents[name]
    return spec.description or f"the {name} agent."


def handoff_tools(manifest: Manifest, name: str, *, back: bool) -> tuple[BaseTool, ...]:
    """Agent ``name``'s handoff tools: one per agent of its ``handoffs``, and ``handoff_back``."""
    spec = manifest.agents.get(name)
    if name == MAIN_AGENT:
        targets = manifest.agent.handoffs
    else:
        assert isinstance(spec, ModelAgentSpec), f"{name} is no agent with a model"
        targets = spec.handoffs
    tools = [handoff_tool(f"{HANDOFF_PREFIX}{target}", HANDOFF_DESCRIPTION.format(
        target=target, about=agent_description(manifest, target))) for target in targets]
    if back:
        tools.append(handoff_tool(HANDOFF_BACK, BACK_DESCRIPTION))
    return tuple(tools)


@dataclass(frozen=True)
class Handoffs:
    """How agent ``agent``'s graph hands the conversation over: the tools its model is offered,
    and (the main graph only) the graphs of the agents that answer a conversation handed to them."""

    agent: str
    tools: tuple[BaseTool, ...]
    answering: Mapping[str, Runnable[Any, Any]] | None = None
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(tool.name for tool in self.tools))

    def takes(self, call: Mapping[str, Any]) -> bool:
        return call["name"] in self.names

    def target(self, tool: str, state: Mapping[str, Any]) -> tuple[str, str | None]:
        """The agent a call of ``tool`` hands to, and why it cannot (None: it can)."""
        if tool == HANDOFF_BACK:
            origin = state.get("handed_from") or MAIN_AGENT
            if origin == self.agent:
                return origin, "nobody handed this conversation to you: there is no one to hand it back to"
            return origin, None
        target = tool.removeprefix(HANDOFF_PREFIX)
        if self.answering is not None and target != MAIN_AGENT and target not in self.answering:
            return target, f"'{target}' cannot take over the conversation now (it is no longer an agent)"
        return target, None

    def wire(self, graph: StateGraph, route: ModelRoute, approvals: Approvals, dispatch: CallDispatch,
             call_nodes: Sequence[str]) -> tuple[Route, list[str]]:
        """Add the handoff node (and in the main graph the node running the current agent, and the
        route to it at the start of a turn) to ``graph``, and the routes after the approvals; the
        route after the model, with its targets."""
        answering = self.answering
        after = END if answering is None else ANSWER
        after_handoff = list(dict.fromkeys([*call_nodes, APPROVE, MODEL, after]))
        graph.add_node(HANDOFF, HandoffNode(self, approvals))
        graph.add_conditional_edges(APPROVE, Route(AfterApprovals(self, dispatch)), [*call_nodes, HANDOFF])
        graph.add_conditional_edges(HANDOFF, Route(AfterHandoff(self, approvals, dispatch)), after_handoff)
        if answering is None:
            graph.add_edge(START, MODEL)
        else:
            graph.add_node(ANSWER, AnsweringNode(answering))
            graph.add_conditional_edges(START, Route(StartRoute(answering)), [MODEL, ANSWER])
            graph.add_conditional_edges(ANSWER, Route(AfterAnswer(answering)), [MODEL, ANSWER, END])
        return Route(HandoffRoute(self, route, approvals)), [*call_nodes, APPROVE, END, HANDOFF]


def main_handoffs(manifest: Manifest, answering: Mapping[str, Runnable[Any, Any]]) -> Handoffs:
    """The main agent's: its ``handoffs``, ``handoff_back`` when an agent may hand to it, and the
    agents that answer a conversation handed (or switched) to them."""
    return Handoffs(MAIN_AGENT, main_handoff_tools(manifest), answering)


def main_handoff_tools(manifest: Manifest) -> tuple[BaseTool, ...]:
    """The handoff tools the main agent's model is offered: one per agent of its ``handoffs``,
    and ``handoff_back`` when an agent may hand the conversation to it."""
    back = any(isinstance(spec, ModelAgentSpec) and MAIN_AGENT in spec.handoffs
               for spec in manifest.agents.values())
    return handoff_tools(manifest, MAIN_AGENT, back=back)


def agent_handoffs(manifest: Manifest, name: str) -> Handoffs:
    """Those of agent ``name`` answering a conversation: its ``handoffs`` and ``handoff_back``."""
    return Handoffs(name, handoff_tools(manifest, name, back=True))


def handed_to(message: BaseMessage) -> str | None:
    """The agent a handoff's tool result handed the conversation to (None: no handoff)."""
    if isinstance(message, ToolMessage) and isinstance(message.artifact, Mapping):
        target = message.artifact.get(HANDED_TO)
        return target if isinstance(target, str) else None
    return None


def handoffs_this_turn(messages: Sequence[BaseMessage]) -> int:
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        count += handed_to(message) is not None
    return count


def unanswered_handoffs(handoffs: Handoffs, messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The handoff calls of the model's last step without a result (a denied one has one)."""
    answered = answered_calls(messages)
    return [dict(call) for call in last_request(messages).tool_calls
            if handoffs.takes(call) and call["id"] not in answered]


@dataclass(frozen=True)
class HandoffNode:
    """Takes the first handoff call of the model's step: the thread's current agent changes, the
    other calls of that step do not run. A handoff that cannot be taken (the policy denies it, no
    one to hand back to, too many in the turn) is an error result, and the step's other calls run
    as usual."""

    handoffs: Handoffs
    approvals: Approvals  # the manifest's policy judges a handoff call as any tool call

    async def __call__(self, state: AgentState) -> dict[str, Any]:
        messages = state["messages"]
        request = last_request(messages)
        taken = unanswered_handoffs(self.handoffs, messages)
        first = taken[0]
        target, problem = self.handoffs.target(first["name"], state)
        decision = self.approvals.decided(first)
        if decision is not None and (writer := stream_writer()) is not None:
            writer(decision.event(first["name"], first["id"]))  # as for any tool call a rule decides
        if decision is not None and decision.action == "deny":
            problem = decision.denial(first["name"])
        elif problem is None and handoffs_this_turn(messages) >= MAX_HANDOFFS:
            problem = (f"the conversation was handed over {MAX_HANDOFFS} times in this turn already; "
                       "answer the user yourself")
        if problem is not None:
            return {"messages": [_error(call, f"Error: {problem}" if call is first else
                                        "Error: one handoff at a time") for call in taken]}
        reason = first["args"].get("reason")
        event: HandedOff = {"type": "handoff", "from": self.handoffs.agent, "to": target}
        if isinstance(reason, str) and reason.strip():
            event["reason"] = reason
        if (writer := stream_writer()) is not None:
            writer(event)
        answered = answered_calls(messages)
        not_taken = [_error(call, NOT_TAKEN_TEXT.format(target=target)) for call in request.tool_calls
                     if call["id"] not in answered and call["id"] != first["id"]]
        handed = ToolMessage(f"{self.handoffs.agent} handed the conversation to {target}.",
                             tool_call_id=first["id"], name=first["name"], artifact={HANDED_TO: target})
        return {"messages": [*not_taken, handed], "agent": target, "handed_from": self.handoffs.agent}


def _error(call: Mapping[str, Any], text: str) -> ToolMessage:
    return ToolMessage(text, tool_call_id=call["id"], name=call["name"], status="error")


@dataclass(frozen=True)
class HandoffRoute:
    """After the model: a step calling a handoff tool goes to the handoff node (through the
    approvals first when the policy asks about a handoff), others as always."""

    handoffs: Handoffs
    inner: ModelRoute
    approvals: Approvals

    async def __call__(self, state: AgentState) -> Any:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and any(self.handoffs.takes(call) for call in last.tool_calls):
            asked = any(self.approvals.asks(call) for call in last.tool_calls if self.handoffs.takes(call))
            return APPROVE if asked else HANDOFF
        return await self.inner(state)


@dataclass(frozen=True)
class AfterApprovals:
    """After the approvals: a handoff call not denied is taken, else the calls run as always."""

    handoffs: Handoffs
    dispatch: CallDispatch

    async def __call__(self, state: AgentState) -> Any:
        if unanswered_handoffs(self.handoffs, state["messages"]):
            return HANDOFF
        return await self.dispatch(state)


@dataclass(frozen=True)
class AfterHandoff:
    """After the handoff node: the new agent answers (an agent's own graph ends, and the main graph
    runs it), or, when the handoff was refused, the step's other calls run (the model hears why)."""

    handoffs: Handoffs
    approvals: Approvals
    dispatch: CallDispatch

    async def __call__(self, state: AgentState) -> Any:
        target = handed_to(state["messages"][-1])
        if target is not None:
            if self.handoffs.answering is None:
                return END
            return MODEL if target == MAIN_AGENT else ANSWER
        messages = state["messages"]
        answered = answered_calls(messages)
        pending = [call for call in last_request(messages).tool_calls if call["id"] not in answered]
        if any(self.approvals.asks(call) for call in pending):
            return APPROVE
        return await self.dispatch(state)


@dataclass(frozen=True)
class StartRoute:
    """A turn starts with the thread's current agent (main, or one that no longer exists)."""

    answering: Mapping[str, Runnable[Any, Any]]

    async def __call__(self, state: AgentState) -> str:  # async: LangGraph runs a sync route in a thread
        return ANSWER if current_agent(state) in self.answering else MODEL


@dataclass(frozen=True)
class AfterAnswer:
    """After the current agent's run: it answered (the turn ends), or handed the conversation on."""

    answering: Mapping[str, Runnable[Any, Any]]

    async def __call__(self, state: AgentState) -> str:  # async, as StartRoute
        if handed_to(state["messages"][-1]) is None:
            return END
        agent = current_agent(state)
        if agent == MAIN_AGENT:
            return MODEL
        return ANSWER if agent in self.answering else END


@dataclass(frozen=True)
class AnsweringNode:
    """Runs the thread's current agent on the conversation so far, as a subgraph of the turn (its
    steps are checkpointed under the thread, a question it raises interrupts the turn); what it
    adds joins the thread."""

    answering: Mapping[str, Runnable[Any, Any]]

    async def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        name = current_agent(state)
        namespace = config.get("configurable", {}).get("checkpoint_ns", "")
        if (writer := stream_writer()) is not None:  # where its run's events will come from
            writer({"type": ANSWERING, "agent": name, NAMESPACE: namespace})  # type: ignore[arg-type]
        inner: RunnableConfig = {**config, "metadata": {**config.get("metadata", {}), AGENT_KEY: name}}
        given: dict[str, Any] = {"messages": state["messages"], "agent": name}
        if (origin := state.get("handed_from")) is not None:
            given["handed_from"] = origin
        ledger = turn_ledger(config)
        if ledger is not None:  # its run's state has none of the thread's totals: they are read here
            ledger.seed(state.get("usage"))
        result = await self.answering[name].ainvoke(given, inner)
        known = {message.id for message in state["messages"]}
        added = [message for message in result["messages"] if message.id not in known]
        update: dict[str, Any] = {"messages": added, "agent": current_agent(result), "model_calls": 0}
        if "handed_from" in result:
            update["handed_from"] = result["handed_from"]
        if ledger is not None:  # its steps and tool calls (its callees' too) not written yet
            usage = ledger.take_unsaved()
        else:  # no turn's ledger (LangGraph Server): its own graph counted its tool calls as main's
            usage = dict(result.get("usage") or {})
            if calls := usage.pop(MAIN_AGENT, None):
                usage = add_usage(usage, {name: calls})
        if usage:
            update["usage"] = usage
        return update


# --------------------------------------------------------------------------- the turn's events


def answering_notice(data: Mapping[str, Any], agents: dict[tuple[str, ...], str]) -> HandedOff | None:
    """A custom stream item of a handoff: the agent now answering, whose events come from
    ``data``'s namespace (remembered in ``agents``; nothing to show), or a ``handoff`` event."""
    if data.get("type") == ANSWERING:
        inner = data[NAMESPACE]
        agents[tuple(inner.split("|")) if inner else ()] = data["agent"]
    return HandedOff(**data) if data.get("type") == "handoff" else None  # type: ignore[typeddict-item]


def is_handoff_notice(data: Mapping[str, Any]) -> bool:
    return data.get("type") in (ANSWERING, "handoff")


def answered_final(update: Any) -> FinalAnswer | None:
    """The ``final`` event of the current agent's answer (from the main graph's ``agent`` node's
    update), naming that agent; None when it handed the conversation on instead."""
    if not isinstance(update, Mapping):
        return None
    messages = update.get("messages") or []
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.tool_calls:
        return None
    from runner.agent.turns import reply_text

    reason = last.response_metadata.get("finish_reason")
    final = FinalAnswer(type="final", text=reply_text(last), reason=reason)
    final["agent"] = current_agent(update)
    return final
