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
from runner.events import ChatError, ElicitationAsked, SamplingAsked
from runner.tools.form_answers import FORMAT_WORDS, FORMATS, choice_labels, content_problem, plain_reason

QUESTION_EVENTS = ("elicitation", "sampling")


async def answer_question(view: Any, event: ElicitationAsked | SamplingAsked) -> dict[str, Any]:
    if isinstance(view, JsonLinesView):
        answer = await _answer_as_json(view, event)
    else:
        assert isinstance(view, TerminalView)
        if event["type"] == "sampling":
            return await _approve_sampling(view, event)
        if event["mode"] != "url":
            return await _fill_form(view, event)
        answer = await _visit(view, event)
    if event["type"] == "elicitation" and event["mode"] == "url":  # for this page only, not another
        answer["elicitation_id"] = event["elicitation_id"]
        answer["url"] = event["url"]
    return answer


# --------------------------------------------------------------------------- terminal


async def _choice(view: TerminalView, prompt: str, choices: dict[str, str]) -> str:
    while True:
        answer = ((await view.reader.read(prompt)) or "").strip().lower()
        for key, value in choices.items():
            if answer in (key, value):
                return value
        if not answer and "" in choices:
            return choices[""]


async def _fill_form(view: TerminalView, event: ElicitationAsked) -> dict[str, Any]:
    say = view.console.print
    say(f"[{event['server']}] asks: {event['message']}", style="yellow", markup=False)
    action = await _choice(view, "[a]nswer / [d]ecline / [c]ancel: ",
                           {"a": "accept", "d": "decline", "c": "cancel"})
    if action != "accept":
        return {"action": action}
    schema = event.get("schema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    refusal_only = _refusal_fields(schema)
    for name, field in (schema.get("properties") or {}).items():
        if name in refusal_only and content.get(refusal_only[name]) is True:
            continue  # a reason is asked only of a refusal
        value = await _ask_field(view, name, field, name in required)
        if value is not _UNSET:
            content[name] = value
    return {"action": "accept", "content": content}


def _refusal_fields(schema: dict[str, Any]) -> dict[str, str]:
    """Fields asked only when the answer refuses: of a decision a served mcp-run agent relays
    (an approval or a sampling request of its own: ``approve`` yes or no, and a ``reason``), the
    reason, keyed to the yes-or-no field it depends on."""
    # Here, not at the top: runner.hosting.mcp loads the agent, which `call` does not need.
    from runner.hosting.mcp.relayed_questions import APPROVE_FIELD, REASON_FIELD

    properties = schema.get("properties") or {}
    decision = properties.get(APPROVE_FIELD)
    if (set(properties) == {APPROVE_FIELD, REASON_FIELD} and isinstance(decision, dict)
            and decision.get("type") == "boolean"):
        return {REASON_FIELD: APPROVE_FIELD}
    return {}


_UNSET = object()


async def _ask_field(view: TerminalView, name: str, field: dict[str, Any], required: bool) -> Any:
    kind = field.get("type", "string")
    label = field.get("title") or name
    if field.get("description"):
        view.console.print(f"  {field['description']}", markup=False)
    choices = choice_labels(field)
    completed = [choice for _, choice in choices] or (["yes", "no"] if kind == "boolean" else [])
    while True:
        raw = (await view.reader.read(f"{label} ({'; '.join(field_hints(field, required))}): ",
                                      choices=completed)) or ""
        if not raw.strip():
            if "default" in field:
                return field["default"]
            if not required:
                return _UNSET
            view.console.print(f"{label}: a value is required", style="red", markup=False)
            continue
        try:
            value = _parse(raw.strip(), kind, choices)
        except ValueError as exc:
            view.console.print(f"{label}: {exc}", style="red", markup=False)
            continue
        problems = list(jsonschema.Draft202012Validator(field, format_checker=FORMATS).iter_errors(value))
        if problems:
            view.console.print(f"{label}: {plain_reason(problems[0], field)}", style="red", markup=False)
            continue
        return value


def field_hints(field: dict[str, Any], required: bool) -> list[str]:
    """What the prompt of one field says: its kind or choices, constraints, default, required."""
    kind = field.get("type", "string")
    choices = choice_labels(field)
    if choices:
        many = "choose any of" if kind == "array" else "one of"
        hints = [f"{many} {', '.join(label for _, label in choices)}"]
    else:
        words = {"integer": "a whole number", "number": "a number", "boolean": "yes or no",
                 "array": "a list, comma-separated", "string": "text"}
        hints = [FORMAT_WORDS.get(field.get("format", ""), words.get(kind, kind))]
    for key, wording in (("minimum", "at least"), ("maximum", "at most"),
                       ("exclusiveMinimum", "more than"), ("exclusiveMaximum", "less than"),
                       ("minLength", "at least {} characters"), ("maxLength", "at most {} characters"),
                       ("minItems", "at least {} items"), ("maxItems", "at most {} items")):
        if key in field:
            hints.append(wording.format(field[key]) if "{}" in wording else f"{wording} {field[key]}")
    if "default" in field:
        default = field["default"]
        labels = dict((json.dumps(value), label) for value, label in choices)
        hints.append(f"default {labels.get(json.dumps(default), json.dumps(default))}")
    if required:
        hints.append("required")
    return hints


def _parse(raw: str, kind: str, choices: list[tuple[Any, str]] = ()) -> Any:  # type: ignore[assignment]
    if kind == "array":
        return [_choice_value(item.strip(), choices) for item in raw.split(",") if item.strip()]
    if choices:
        return _choice_value(raw, choices)
    if kind == "integer":
        try:
            return int(raw)
        except ValueError:
            raise ValueError("expected a whole number") from None
    if kind == "number":
        try:
            return float(raw)
        except ValueError:
            raise ValueError("expected a number") from None
    if kind == "boolean":
        if raw.lower() in ("y", "yes", "true", "1"):
            return True
        if raw.lower() in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer yes or no")
    return raw


def _choice_value(raw: str, choices: list[tuple[Any, str]]) -> Any:
    """The value of the choice a person typed (its title or its value); else the text itself."""
    for value, label in choices:
        if raw.lower() in (label.lower(), str(value).lower()):
            return value
    if choices:
        raise ValueError(f"choose one of {', '.join(label for _, label in choices)}")
    return raw


async def _visit(view: TerminalView, event: ElicitationAsked) -> dict[str, Any]:
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


async def _approve_sampling(view: TerminalView, event: SamplingAsked) -> dict[str, Any]:
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


async def _answer_as_json(view: JsonLinesView, event: ElicitationAsked | SamplingAsked) -> dict[str, Any]:
    view.show(event)
    expected = ("approve", "deny") if event["type"] == "sampling" else ("accept", "decline", "cancel")
    while True:
        value = await view.next_object()
        if value is None:
            return {"action": expected[-1]}  # the input ended: refuse
        if value.get("action") not in expected:
            view.show(ChatError(type="error", message=f"expected {{\"action\": ...}}: {', '.join(expected)}"))
            view.show(event)
            continue
        answer: dict[str, Any] = {key: value[key] for key in ("action", "content") if key in value}
        problem = content_problem(event, answer)
        if problem is None:
            return answer
        view.show(ChatError(type="error", message=problem))
        view.show(event)  # asked again
