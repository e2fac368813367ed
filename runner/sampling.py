"""Sampling: a server asks the agent's model for a completion (``sampling/createMessage``).

The request's messages, system prompt, ``maxTokens`` and stop sequences go to the manifest's model
through the same ``ModelChain`` as the agent's own calls (its fallbacks included). No tools are
offered to the model here: a completion never runs tools, so it cannot get around approvals. In the
graph, ``sampling: ask`` first interrupts with a ``sampling`` request showing what the server asks
(:func:`approve_by_interrupt`), resumed with ``{"action": "approve"}`` or ``{"action": "deny"}``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import mcp_types as types
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.config import get_config
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict

from runner.models import ModelChain


class SamplingDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["approve", "deny"]


def sampling_request(server: str, request: types.CreateMessageRequestParams) -> dict[str, Any]:
    """The interrupt payload (and event) showing what a server asks the model."""
    return {
        "type": "sampling",
        "server": server,
        "system_prompt": request.system_prompt,
        "messages": [{"role": m.role, "text": _text(m.content)} for m in request.messages],
        "max_tokens": request.max_tokens,
    }


def approve_by_interrupt(server: str, request: types.CreateMessageRequestParams) -> bool:
    """Ask the user whether the request may go to the model; outside a graph run, no."""
    try:
        get_config()
    except RuntimeError:  # a direct call (the chat's /call, `mcp-run call`): no one to ask
        return False
    decision = interrupt(sampling_request(server, request), response_schema=SamplingDecision)
    return decision.action == "approve"


async def complete(model: ModelChain, request: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """The model's answer to a sampling request."""
    messages: list[BaseMessage] = [SystemMessage(request.system_prompt)] if request.system_prompt else []
    for message in request.messages:
        text = _text(message.content)
        messages.append(HumanMessage(text) if message.role == "user" else AIMessage(text))
    options: dict[str, Any] = {"max_tokens": request.max_tokens}
    if request.stop_sequences:
        options["stop"] = list(request.stop_sequences)
    reply = await model.ainvoke(messages, tools=[], options=options)
    finish = reply.response_metadata.get("finish_reason")
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=reply.text),
        model=str(reply.response_metadata.get("model_name") or model.primary.__class__.__name__),
        stop_reason="maxTokens" if finish == "length" else "endTurn",
    )


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    parts = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        else:  # images, audio, tool results: described, not sent
            parts.append(f"[{getattr(block, 'type', 'content')}: " + json.dumps(
                block.model_dump(exclude={"data"}, by_alias=True), default=str)[:200] + "]")
    return "\n".join(parts)
