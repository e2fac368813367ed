"""The chat's form builder: each field's prompt shows its description, choices (by title),
constraints and format; a bad value is refused in plain words naming the field's title, and
asked again."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console

from runner.cli.answering import answer_question
from runner.cli.completion import ChoiceCompleter
from runner.cli.terminal import TerminalView

pytestmark = pytest.mark.anyio

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email", "title": "Your email",
                  "description": "Where the receipt goes"},
        "site": {"type": "string", "format": "uri", "title": "Web site"},
        "day": {"type": "string", "format": "date", "title": "Day"},
        "at": {"type": "string", "format": "date-time", "title": "Start"},
        "age": {"type": "integer", "minimum": 18, "maximum": 99, "title": "Age"},
        "size": {"type": "string", "title": "Size",
                 "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        "colour": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
        "toppings": {"type": "array", "title": "Toppings", "minItems": 1,
                     "items": {"type": "string", "anyOf": [{"const": "ham", "title": "Ham"},
                                                           {"const": "egg", "title": "Egg"}]}},
        "nick": {"type": "string", "title": "Nickname", "minLength": 2, "maxLength": 5},
    },
    "required": ["email", "age"],
}


class ScriptedReader:
    waiting_prompt = None

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.prompts: list[str] = []

        self.choices: dict[str, list[str]] = {}  # what Tab completes, by prompt

    async def read(self, prompt: str, *, choices: Sequence[str] = (), **_: Any) -> str:
        self.prompts.append(prompt)
        if choices:
            self.choices[prompt] = list(choices)
        return self.answers.pop(0)


async def test_the_form_shows_choices_by_title_and_constraints_and_refuses_bad_values_plainly() -> None:
    out = io.StringIO()
    reader = ScriptedReader([
        "a",
        "not-an-email", "me@example.com",
        "no scheme", "https://example.com",
        "26/11/2026", "2026-11-26",
        "tomorrow", "2026-11-26T10:00:00Z",
        "abc", "5", "30",
        "medium", "Large",
        "Green",
        "bacon", "Ham, egg",
        "x", "bob",
    ])
    view = TerminalView(Console(file=out, width=200, color_system=None), reader)
    answer = await answer_question(view, {"type": "elicitation", "server": "s", "message": "Order",
                                          "mode": "form", "schema": SCHEMA})
    assert answer == {"action": "accept", "content": {
        "email": "me@example.com", "site": "https://example.com", "day": "2026-11-26",
        "at": "2026-11-26T10:00:00Z", "age": 30, "size": "l", "colour": "g",
        "toppings": ["ham", "egg"], "nick": "bob"}}
    text = out.getvalue()
    prompts = "\n".join(reader.prompts)
    assert "Where the receipt goes" in text
    assert "Size (one of Small, Large): " in prompts
    assert "colour (one of Red, Green): " in prompts
    assert "Toppings (choose any of Ham, Egg; at least 1 items): " in prompts
    assert "Age (a whole number; at least 18; at most 99; required): " in prompts
    assert "Nickname (text; at least 2 characters; at most 5 characters): " in prompts
    for line in ("Your email: expected an email address", "Web site: expected a full URL",
                 "Day: expected a date as YYYY-MM-DD", "Start: expected a date and time",
                 "Age: expected a whole number", "Age: must be at least 18",
                 "Size: choose one of Small, Large", "Toppings: choose one of Ham, Egg",
                 "Nickname: must be at least 2 characters long"):
        assert line in text, line
    assert "invalid literal" not in text and "is not valid under" not in text


async def test_tab_completes_a_fields_choices_by_title_and_yes_or_no_for_a_boolean() -> None:
    schema = {"type": "object", "properties": {
        "colour": SCHEMA["properties"]["colour"], "toppings": SCHEMA["properties"]["toppings"],
        "sure": {"type": "boolean", "title": "Sure?"}, "note": {"type": "string"}}}
    reader = ScriptedReader(["a", "Red", "Ham", "yes", "hi"])
    view = TerminalView(Console(file=io.StringIO(), width=200, color_system=None), reader)
    await answer_question(view, {"type": "elicitation", "server": "s", "message": "Order",
                                 "mode": "form", "schema": schema})
    assert list(reader.choices.values()) == [["Red", "Green"], ["Ham", "Egg"], ["yes", "no"]]


def completed(choices: list[str], typed: str) -> list[str]:
    completer = ChoiceCompleter(choices)
    found = completer.get_completions(Document(typed), CompleteEvent(completion_requested=True))
    return [typed[:len(typed) + completion.start_position] + completion.text for completion in found]


def test_a_choice_completes_from_any_case_and_after_a_comma_the_next_one() -> None:
    assert completed(["Red", "Green"], "gr") == ["Green"]
    assert completed(["Ham", "Egg"], "Ham, e") == ["Ham, Egg"]
    assert completed(["yes", "no"], "") == ["yes", "no"]
