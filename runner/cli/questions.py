"""What a server asks during a chat turn: a form or a URL to visit (elicitation), the approval of a
completion (sampling), and the status line of a running call (progress).

``answer_question(view, event)`` returns the resume value for an ``elicitation`` or ``sampling``
event: on a terminal it asks the person (a form built from the requested schema: types, enums,
defaults, required fields, each value checked with the reason shown and asked again); in the
JSON-lines chat it shows the event and reads the answer as one JSON object. Progress events are
shown by the views themselves (``terminal.progress_line``).
"""

from __future__ import annotations

import json
import webbrowser
from typing import Any

import jsonschema

from runner.cli.terminal import JsonLinesView, TerminalView

QUESTION_EVENTS = ("elicitation", "sampling")


async def answer_question(view: Any, event: dict[str, Any]) -> dict[str, Any]:
    if isinstance(view, JsonLinesView):
        return await _answer_as_json(view, event)
    assert isinstance(view, TerminalView)
    if event["type"] == "sampling":
        return await _approve_sampling(view, event)
    if event.get("mode") == "url":
        return await _visit(view, event)
    return await _fill_form(view, event)


# --------------------------------------------------------------------------- terminal


async def _choice(view: TerminalView, prompt: str, choices: dict[str, str]) -> str:
    while True:
        answer = ((await view.reader.read(prompt)) or "").strip().lower()
        for key, value in choices.items():
            if answer in (key, value):
                return value
        if not answer and "" in choices:
            return choices[""]


async def _fill_form(view: TerminalView, event: dict[str, Any]) -> dict[str, Any]:
    say = view.console.print
    say(f"[{event['server']}] asks: {event['message']}", style="yellow", markup=False)
    action = await _choice(view, "[a]nswer / [d]ecline / [c]ancel: ",
                           {"a": "accept", "d": "decline", "c": "cancel"})
    if action != "accept":
        return {"action": action}
    schema = event.get("schema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, field in (schema.get("properties") or {}).items():
        value = await _ask_field(view, name, field, name in required)
        if value is not _UNSET:
            content[name] = value
    return {"action": "accept", "content": content}


_UNSET = object()


async def _ask_field(view: TerminalView, name: str, field: dict[str, Any], required: bool) -> Any:
    kind = field.get("type", "string")
    choices = field.get("enum") or [option.get("const") for option in field.get("oneOf", [])] or None
    hints = [f"one of {', '.join(map(str, choices))}" if choices else kind]
    if "default" in field:
        hints.append(f"default {json.dumps(field['default'])}")
    if required:
        hints.append("required")
    label = field.get("title") or field.get("description") or name
    while True:
        raw = (await view.reader.read(f"{label} ({'; '.join(hints)}): ")) or ""
        if not raw.strip():
            if "default" in field:
                return field["default"]
            if not required:
                return _UNSET
            view.console.print(f"{name} is required", style="red", markup=False)
            continue
        try:
            value = _parse(raw.strip(), kind)
            jsonschema.validate(value, field)
        except (ValueError, jsonschema.ValidationError) as exc:
            reason = exc.message if isinstance(exc, jsonschema.ValidationError) else str(exc)
            view.console.print(f"{name}: {reason}", style="red", markup=False)
            continue
        return value


def _parse(raw: str, kind: str) -> Any:
    if kind == "integer":
        return int(raw)
    if kind == "number":
        return float(raw)
    if kind == "boolean":
        if raw.lower() in ("y", "yes", "true", "1"):
            return True
        if raw.lower() in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer yes or no")
    if kind == "array":
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw


async def _visit(view: TerminalView, event: dict[str, Any]) -> dict[str, Any]:
    say = view.console.print
    say(f"[{event['server']}] asks you to visit {event['url']}", style="yellow", markup=False)
    say(f"  {event['message']}", markup=False)
    while True:
        action = await _choice(view, "[o]pen in the browser / [y]es, I will / [d]ecline / [c]ancel: ",
                               {"o": "open", "y": "accept", "d": "decline", "c": "cancel"})
        if action != "open":
            return {"action": action}
        webbrowser.open(event["url"])
        return {"action": "accept"}


async def _approve_sampling(view: TerminalView, event: dict[str, Any]) -> dict[str, Any]:
    say = view.console.print
    say(f"[{event['server']}] asks the model for a completion (at most {event['max_tokens']} tokens):",
        style="yellow", markup=False)
    if event.get("system_prompt"):
        say(f"  system: {event['system_prompt']}", markup=False)
    for message in event["messages"]:
        say(f"  {message['role']}: {message['text']}", markup=False)
    if event.get("tools"):
        say(f"  tools offered: {', '.join(event['tools'])}", markup=False)
    action = await _choice(view, "send it to the model? [y]es / [n]o: ", {"y": "approve", "n": "deny"})
    return {"action": action}


# --------------------------------------------------------------------------- JSON lines


async def _answer_as_json(view: JsonLinesView, event: dict[str, Any]) -> dict[str, Any]:
    view.show(event)
    expected = ("approve", "deny") if event["type"] == "sampling" else ("accept", "decline", "cancel")
    while True:
        value = await view.next_object()
        if value is None:
            return {"action": expected[-1]}  # the input ended: refuse
        if value.get("action") in expected:
            return {key: value[key] for key in ("action", "content") if key in value}
        view.show({"type": "error", "message": f"expected {{\"action\": ...}}: {', '.join(expected)}"})
