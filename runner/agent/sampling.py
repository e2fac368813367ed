"""Sampling: a server asks the agent's model for a completion (``sampling/createMessage``).

The request's messages, system prompt, ``maxTokens`` and stop sequences go to the model of the
agent whose tool call the server is serving, through the same ``ModelChain`` as that agent's own
calls (its fallbacks included): an agent of ``agents:`` with a ``model`` of its own completes with
it, the main agent and agents without one with the manifest's (:func:`metered` names the agent).
The tools a 2025-11-25 request carries are bound to the model (under provider-safe names, with
the form of their schemas its provider takes; ``toolChoice`` ``none`` binds none, ``required``
makes the model pick one):
when the model calls them the result is ``tool_use`` content with stop reason ``toolUse``, and
the server runs the tools and asks again with their results. The agent's own tools are never
offered here, so a completion cannot get around approvals. Completions count against the turn's
``agent.max_steps`` like the agent's own model calls: a tool call may take as many as the turn has
left (:func:`metered`; more are refused to the server), and the next model step counts those taken
(:func:`sampling_calls`). In the graph, ``sampling: ask`` first
interrupts with a ``sampling`` request showing what the server asks (:func:`approve_by_interrupt`),
resumed with ``{"action": "approve"}`` or ``{"action": "deny"}``.

The manifest's ``policy`` judges the calls the model makes of the request's tools, by the name the
agent would give them (``server__tool``) and their arguments (:class:`ToolPolicy`): a denied call
is sent back to the model as a failed tool result with the reason, and it is asked again (at most
:data:`POLICY_ROUNDS` times; calls still refused then are left out of the answer); an ``ask`` call
is put to the user as a tool approval where the completion runs in the calling tool's task
(``sampling: ask``; a ``policy`` event goes to the turn's stream there too), and is refused where
no one can be asked (``sampling: allow`` completes in the server's request, outside the graph run);
an edit of its arguments is judged again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import mcp_types as types
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict

from runner import telemetry
from runner.agent.turn_stream import current_agent, naming_agent, stream_writer
from runner.events import SampledMessage, SamplingAsked, ToolApprovalRequest
from runner.models import ModelChain
from runner.servers.inbound_requests import SamplingBudget, sampling_budget
from runner.tools.naming import NAME_PATTERN, generate_name
from runner.tools.policy import PolicyDecision
from runner.tools.provider_schemas import schema_for_provider

SAMPLING_CALLS = "sampling_calls"  # a tool message's response_metadata key: completions it took
POLICY_ROUNDS = 2  # times the model is asked again after the policy refused a call it made

# What the manifest's policy says of calling a request's tool (its name on the server) with these
# arguments: the generated name it is judged by, and the decision (None: no rule matches).
ToolPolicy = Callable[[str, dict[str, Any]], tuple[str, PolicyDecision | None]]


@contextmanager
def metered(steps_left: int | None) -> Iterator[SamplingBudget]:
    """The completions servers get during the block (a tool node's call) count against
    ``steps_left`` model calls (None: no limit) of the agent running the node, whose model makes
    them (:func:`runner.agent.turn_stream.current_agent`, read here in the node's task)."""
    budget = SamplingBudget(steps_left, agent=current_agent())
    token = sampling_budget.set(budget)
    try:
        yield budget
    finally:
        sampling_budget.reset(token)


def counted(message: ToolMessage, budget: SamplingBudget) -> ToolMessage:
    """``message`` noting the completions its call took (read back by :func:`sampling_calls`)."""
    if not budget.used:
        return message
    return message.model_copy(update={"response_metadata": {**message.response_metadata,
                                                            SAMPLING_CALLS: budget.used}})


def sampling_calls(messages: Sequence[BaseMessage]) -> int:
    """The completions the tool calls since the model's last message took."""
    total = 0
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        total += message.response_metadata.get(SAMPLING_CALLS, 0)
    return total


class SamplingDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["approve", "deny"]


def sampling_request(server: str, request: types.CreateMessageRequestParams) -> SamplingAsked:
    """The interrupt payload (and event) showing what a server asks the model."""
    return naming_agent(SamplingAsked(
        type="sampling",
        server=server,
        system_prompt=request.system_prompt,
        messages=[SampledMessage(role=m.role, text=_text(m.content)) for m in request.messages],
        max_tokens=request.max_tokens,
        tools=[tool.name for tool in request.tools or ()],
    ))


def approve_by_interrupt(server: str, request: types.CreateMessageRequestParams) -> bool:
    """Ask the user whether the request may go to the model; outside a graph run, no."""
    try:
        get_config()
    except RuntimeError:  # a direct call (the chat's /call, `mcp-run call`): no one to ask
        return False
    decision = interrupt(sampling_request(server, request), response_schema=SamplingDecision)
    return decision.action == "approve"


async def complete(
    model: ModelChain, request: types.CreateMessageRequestParams, *, provider: str = "openai",
    policy: ToolPolicy | None = None,
) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
    """The model's answer to a sampling request (``provider`` decides the form of tool schemas;
    ``policy`` judges the model's calls of the request's tools)."""
    names = _ToolNames(request.tools or [])
    messages: list[BaseMessage] = [SystemMessage(request.system_prompt)] if request.system_prompt else []
    for message in request.messages:
        messages += _converted(message, names)
    options: dict[str, Any] = {"max_tokens": request.max_tokens}
    if request.stop_sequences:
        options["stop"] = list(request.stop_sequences)
    choice = request.tool_choice.mode if request.tool_choice is not None else None
    tools = [] if choice == "none" else names.definitions(provider)
    tool_choice = "any" if tools and choice == "required" else None
    reply = await model.ainvoke(messages, tools=tools, options=options, tool_choice=tool_choice)
    for rounds in range(POLICY_ROUNDS + 1):
        if policy is None or not reply.tool_calls:
            break
        judged = [_judged(call, names, policy) for call in reply.tool_calls]
        if rounds == POLICY_ROUNDS or not any(refusal for _, refusal in judged):
            # What may go to the server: the calls not refused (as the user edited them).
            kept = [call for call, refusal in judged if refusal is None]
            reply = reply.model_copy(update={"tool_calls": kept})
            break
        messages += [reply, *(ToolMessage(refusal or "Not run: another call of this reply was refused.",
                                          tool_call_id=call["id"], status="error")
                              for call, refusal in judged)]
        reply = await model.ainvoke(messages, tools=tools, options=options, tool_choice=tool_choice)
    finish = reply.response_metadata.get("finish_reason")
    model_name = str(reply.response_metadata.get("model_name") or model.primary.__class__.__name__)
    if request.tools is None:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=reply.text), model=model_name,
            stop_reason="maxTokens" if finish == "length" else "endTurn",
        )
    content: list[types.SamplingMessageContentBlock] = (
        [types.TextContent(type="text", text=reply.text)] if reply.text or not reply.tool_calls else []
    )
    content += [
        types.ToolUseContent(name=names.original(call["name"]), id=call["id"] or f"call_{n}",
                             input=call["args"])
        for n, call in enumerate(reply.tool_calls)
    ]
    stop = "toolUse" if reply.tool_calls else ("maxTokens" if finish == "length" else "endTurn")
    return types.CreateMessageResultWithTools(role="assistant", content=content, model=model_name,
                                              stop_reason=stop)


class _ToolDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["approve", "deny", "edit"]
    reason: str | None = None
    args: dict[str, Any] | None = None


def _judged(call: dict[str, Any], names: _ToolNames, policy: ToolPolicy) -> tuple[dict[str, Any], str | None]:
    """The model's ``call`` of a request's tool as it may go to the server (its arguments edited
    by the user), and why it may not (None: it may)."""
    tool = names.original(call["name"])
    while True:
        name, decision = policy(tool, call["args"])
        if decision is None:
            return call, None
        telemetry.policy_decided(decision.action, decision.rule, decision.source, decision.reason)
        if (sink := stream_writer()) is not None:  # in the call's task (sampling: ask), not the SDK's
            sink(decision.event(name, call["id"]))
        if decision.action == "allow":
            return call, None
        if decision.action == "deny":
            return call, decision.denial(name)
        try:
            get_config()
        except RuntimeError:  # a direct call (the chat's /call, `mcp-run call`): no one to ask
            return call, f"The call to {name} {decision.unanswered()}"
        answer = interrupt(ToolApprovalRequest(type="tool_approval", tool=name, args=call["args"],
                                               id=call["id"] or name), response_schema=_ToolDecision)
        if answer.action == "approve":
            return call, None
        if answer.action == "deny":
            because = f": {answer.reason}" if answer.reason else "."
            return call, f"The user denied this call to {name}{because}"
        call = {**call, "args": answer.args or {}}  # edited: judged again


class _ToolNames:
    """The request's tools under names every provider accepts, and back."""

    def __init__(self, tools: list[types.Tool]) -> None:
        self.tools = tools
        self.safe = {tool.name: tool.name if NAME_PATTERN.match(tool.name) else generate_name(None, tool.name)
                     for tool in tools}
        self.back = {safe: name for name, safe in self.safe.items()}

    def definitions(self, provider: str) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {
            "name": self.safe[tool.name], "description": tool.description or tool.title or tool.name,
            "parameters": schema_for_provider(tool.input_schema, provider),
        }} for tool in self.tools]

    def original(self, name: str) -> str:
        return self.back.get(name, name)

    def model_name(self, name: str) -> str:
        return self.safe.get(name, name)


def _converted(message: types.SamplingMessage, names: _ToolNames) -> list[BaseMessage]:
    """One sampling message as LangChain messages: tool uses become the assistant's tool calls,
    tool results the tool messages answering them."""
    blocks = message.content_as_list
    uses = [block for block in blocks if isinstance(block, types.ToolUseContent)]
    results = [block for block in blocks if isinstance(block, types.ToolResultContent)]
    rest = [block for block in blocks
            if not isinstance(block, types.ToolUseContent | types.ToolResultContent)]
    text = _text(rest) if rest else ""
    if message.role == "assistant":
        calls = [{"name": names.model_name(use.name), "args": use.input, "id": use.id, "type": "tool_call"}
                 for use in uses]
        return [AIMessage(text, tool_calls=calls)] if text or calls else []
    converted: list[BaseMessage] = [
        ToolMessage(_text(result.content) if result.content else json.dumps(result.structured_content),
                    tool_call_id=result.tool_use_id, status="error" if result.is_error else "success")
        for result in results
    ]
    return converted + ([HumanMessage(text)] if text or not converted else [])


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    parts = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ToolUseContent):
            parts.append(f"[tool call {block.name} {json.dumps(block.input, default=str)[:200]}]")
        elif isinstance(block, types.ToolResultContent):
            failed = " (failed)" if block.is_error else ""
            parts.append(f"[tool result{failed}: {_text(block.content)[:200]}]")
        else:  # images, audio: described, not sent
            described = block.model_dump(exclude={"data", "type"}, exclude_none=True, by_alias=True)
            parts.append(f"[{getattr(block, 'type', 'content')}: "
                         + json.dumps(described, default=str)[:200] + "]")
    return "\n".join(parts)
