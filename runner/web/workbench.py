"""The page's servers panel and its "try it": each server's state (status, restarts, protocol era,
transport, why it failed, its last stderr lines with secrets redacted), its tools and prompts; and
a tool called from the page outside the conversation, through the same argument checks, policy
and approvals as the chat's ``/call``.

A call the manifest says to ask about is answered first: ``POST /api/call`` without an
``answer`` returns the ``approval`` to ask; the page asks, and calls again with the answer.
"""

from __future__ import annotations

from typing import Any

from runner.agent.runtime import Runtime
from runner.errors import ToolError
from runner.events import ApprovalAsked
from runner.servers.transports.environment import redacted
from runner.tools.catalog import CatalogEntry
from runner.web.answers import AnswerError, checked_approval
from runner.web.threads import content_detail

STDERR_LINES = 40  # of a server's last stderr lines shown


def server_rows(runtime: Runtime) -> list[dict[str, Any]]:
    """Each server of the agent as the panel shows it."""
    rows = []
    for key, connection in runtime.fleet.connections.items():
        lifecycle = connection.lifecycle
        log = connection.stderr_log
        tail = [] if log is None else list(log.tail)[-STDERR_LINES:]
        lines = [redacted(line, log.secrets) for line in tail] if log is not None else []
        rows.append({
            "key": key, "transport": connection.spec.transport, "status": lifecycle.status,
            "era": lifecycle.era, "restarts": lifecycle.restarts, "sessions": lifecycle.sessions,
            "error": str(lifecycle.error) if lifecycle.error is not None else None,
            "last_incident": str(lifecycle.last_incident) if lifecycle.last_incident is not None else None,
            "stderr": lines,
            "tools": [_tool_row(runtime, entry) for entry in runtime.catalog.entries.values()
                      if entry.origin.server == key],
            "prompts": [{"name": prompt.name, "description": prompt.description or ""}
                        for prompt in connection.prompts],
        })
    return rows


def _tool_row(runtime: Runtime, entry: CatalogEntry) -> dict[str, Any]:
    schema = entry.definition.input_schema if entry.definition is not None else None
    return {"name": entry.name, "original": entry.origin.name, "description": entry.description,
            "input_schema": schema, "approval": runtime.catalog.needs_approval(entry.name)}


class CallRefused(ValueError):
    """A "try it" call that cannot be made as asked: unknown tool, arguments that do not fit."""


async def try_call(runtime: Runtime, name: Any, args: Any, answer: Any) -> dict[str, Any]:
    """Call tool ``name`` with ``args`` as ``/call`` does: ``{"approval": ...}`` when it must be
    approved and ``answer`` is None, else ``{"result": ..., "detail": ...}`` (a denial, the
    policy's or the person's, is an error result)."""
    caller = runtime.caller
    if not isinstance(name, str) or name not in runtime.catalog.entries:
        raise CallRefused(f"tool: no tool {str(name)[:80]!r} (the servers panel lists them)")
    if not isinstance(args, dict):
        raise CallRefused("arguments: expected an object")
    if problems := caller.argument_problems(name, args):
        raise CallRefused(f"arguments of {name}: " + "; ".join(problems))
    decision = caller.decide(name, args)
    if decision is not None and decision.action == "ask":
        asked = ApprovalAsked(type="approval", tool=name, args=args, id="try")
        if decision.rule is not None:
            asked["policy"] = decision.reference()
        if answer is None:
            return {"approval": asked}
        try:
            approved = checked_approval(runtime, asked, answer)
        except AnswerError as exc:
            raise CallRefused(str(exc)) from exc
        if approved["action"] == "deny":
            return _result(name, "error", f"denied: {approved.get('reason') or 'denied by the user'}")
        args = approved.get("args", args)
    try:
        output = await caller.call(name, args)
    except ToolError as exc:  # the policy's denial too
        return _result(name, "error", str(exc))
    detail = content_detail(runtime, name, output.content, output.artifact)
    text = "\n".join(block["text"] for block in detail["blocks"] if block["type"] == "text")
    return {**_result(name, "error" if output.is_error else "success", text), "detail": detail}


def _result(name: str, status: str, text: str) -> dict[str, Any]:
    return {"result": {"type": "tool_result", "name": name, "id": "try", "status": status, "text": text}}
