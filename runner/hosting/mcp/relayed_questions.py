"""What the agent asks during a served turn, put to the calling client as an elicitation.

A turn pauses on a LangGraph interrupt (:func:`runner.agent.turns.stream_turn` yields ``approval``,
``elicitation`` or ``sampling``). :func:`elicitation_for` turns that event into the request the
caller's user answers; :func:`resume_value` turns the answer into the value the turn resumes
with; :func:`refusal` is the non-interactive rule (deny / decline) for a caller that cannot
answer. :func:`question_key` names one pending question, so that an answer arriving in a retried
call (2026-07-28) is matched against the question the thread still waits on.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import mcp_types as types

from runner.events import Question

APPROVE_FIELD = "approve"
REASON_FIELD = "reason"
NOT_ASKED = "the caller cannot answer questions (its MCP client has no elicitation)"
STATELESS_NOT_ASKED = (
    "the agent is served without sessions (--stateless), so it cannot ask the caller questions in "
    "the middle of a call on protocol 2025-11-25 (serve with sessions, or call on 2026-07-28, "
    "where a question comes back as an input request)"
)

_DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        APPROVE_FIELD: {"type": "boolean", "title": "Allow it?"},
        REASON_FIELD: {"type": "string", "title": "Reason (when refusing)"},
    },
    "required": [APPROVE_FIELD],
}


def question_key(event: Question) -> str:
    """A short digest of one question (the interrupt's payload): equal questions, equal keys."""
    payload = {key: value for key, value in event.items() if key != "type"}
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def elicitation_for(event: Question) -> types.ElicitRequestParams:
    """The elicitation that asks the caller's user what the event asks."""
    if event["type"] == "approval":
        args = json.dumps(event.get("args", {}), sort_keys=True)
        rule = event.get("policy")
        why = f" ({rule['source']}: {rule['reason']})" if rule and rule["reason"] else ""
        who = event.get("agent") or "The agent"  # a sub-agent's call is said as its own, as the chat does
        return types.ElicitRequestFormParams(
            message=f"{who} wants to call the tool {event['tool']} with {args}.{why} Allow it?",
            requested_schema=_DECISION_SCHEMA,
        )
    if event["type"] == "sampling":
        model = f"the {event['agent']} agent's model" if event.get("agent") else "the agent's model"
        return types.ElicitRequestFormParams(
            message=(f"The server {event['server']} asks {model} for a completion "
                     f"(at most {event['max_tokens']} tokens). Allow it?"),
            requested_schema=_DECISION_SCHEMA,
        )
    # ``[asker]`` for the main agent's server; ``[helper · asker]`` when agent helper's call asks
    source = " · ".join(part for part in (event.get("agent"), event["server"]) if part)
    if event["mode"] == "url":
        return types.ElicitRequestURLParams(
            message=f"[{source}] {event['message']}", url=event["url"],
            elicitation_id=event["elicitation_id"],
        )
    return types.ElicitRequestFormParams(
        message=f"[{source}] {event['message']}",
        requested_schema=event.get("schema") or {"type": "object", "properties": {}},
    )


def resume_value(event: Question, answer: types.ElicitResult) -> dict[str, Any]:
    """The value the paused turn resumes with, from the caller's answer."""
    if event["type"] == "approval" or event["type"] == "sampling":
        content = answer.content or {}
        decision = content.get(APPROVE_FIELD)
        allowed = answer.action == "accept" and decision is True
        if event["type"] == "sampling":
            return {"action": "approve" if allowed else "deny"}
        if allowed:
            return {"action": "approve"}
        if answer.action == "accept" and not isinstance(decision, bool):
            given = "nothing" if decision is None else json.dumps(decision)[:80]
            return {"action": "deny", "reason": f"the caller's answer was invalid: '{APPROVE_FIELD}' must be "
                                                f"true or false, got {given}"}
        reason = content.get(REASON_FIELD) if answer.action == "accept" else None
        return {"action": "deny", "reason": str(reason or f"the caller's user chose {answer.action}")}
    if answer.action == "accept" and event["mode"] != "url":
        return {"action": "accept", "content": answer.content or {}}
    return {"action": answer.action}


def refusal(event: Question, why: str = NOT_ASKED) -> dict[str, Any]:
    """The non-interactive answer: approvals and completions denied, questions declined; ``why``
    says why nobody was asked."""
    if event["type"] == "approval":
        return {"action": "deny", "reason": f"not approved: {why}"}
    if event["type"] == "sampling":
        return {"action": "deny"}
    return {"action": "decline"}


def elicitation_request(event: Question) -> types.ElicitRequest:
    return types.ElicitRequest(params=elicitation_for(event))


def can_elicit(capabilities: types.ClientCapabilities | None, event: Question) -> bool:
    """Whether the client declared the elicitation mode this question needs."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    if event["type"] == "elicitation" and event["mode"] == "url":
        return elicitation.url is not None
    # A bare `elicitation: {}` means form mode (the spec's backwards-compatible default).
    return elicitation.form is not None or elicitation.url is None
