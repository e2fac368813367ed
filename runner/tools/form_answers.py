"""A server's form (an elicitation's requested schema) and the answers given to it: whether an
accepted answer fits the form, said in words a person reads and naming the field; the choices of
a field. The terminal chat, the JSON chat (:mod:`runner.cli.answering`) and the web page
(:mod:`runner.web.answers`) check answers with these, so each accepts exactly what the others do.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import jsonschema

from runner.events import ElicitationAsked, SamplingAsked


def content_problem(event: ElicitationAsked | SamplingAsked, answer: dict[str, Any]) -> str | None:
    """Why the accepted content of a form does not fit its schema, naming the field; None if it fits."""
    if event["type"] != "elicitation" or event["mode"] == "url" or answer["action"] != "accept":
        return None
    schema = event.get("schema") or {}
    content = answer.get("content")
    if content is None:
        content = {}
    if not isinstance(content, dict):
        return "content: expected an object of the form's fields"
    properties = schema.get("properties") or {}
    given = {**{name: field["default"] for name, field in properties.items()
                if isinstance(field, dict) and "default" in field}, **content}
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMATS)
    problems = sorted(validator.iter_errors(given), key=lambda e: (list(e.absolute_path), e.message))
    if not problems:
        return None
    problem = problems[0]
    if problem.validator == "required":
        name = problem.message.split("'")[1] if "'" in problem.message else "content"
        return f"{_title(properties, name)}: a value is required"
    name = str(problem.absolute_path[0]) if problem.absolute_path else "content"
    return f"{_title(properties, name)}: {plain_reason(problem, properties.get(name) or {})}"


def _title(properties: dict[str, Any], name: str) -> str:
    field = properties.get(name)
    title = field.get("title") if isinstance(field, dict) else None
    return f"{title} ({name})" if title and title != name else name


_LIMIT_REASONS = {
    "minimum": "must be at least {}", "maximum": "must be at most {}",
    "exclusiveMinimum": "must be more than {}", "exclusiveMaximum": "must be less than {}",
    "minLength": "must be at least {} characters long", "maxLength": "must be at most {} characters long",
    "minItems": "choose at least {}", "maxItems": "choose at most {}",
}


def plain_reason(problem: jsonschema.ValidationError, field: dict[str, Any]) -> str:
    """A validation failure in words a person reads, not the validator's."""
    kind = problem.validator
    value = problem.validator_value
    if kind == "type":
        return {"integer": "expected a whole number", "number": "expected a number",
                "boolean": "expected yes or no", "array": "expected a list",
                "string": "expected text"}.get(str(value), f"expected {value}")
    if kind in _LIMIT_REASONS:
        return _LIMIT_REASONS[kind].format(value)
    if kind == "format":
        return f"expected {FORMAT_WORDS.get(str(value), str(value))}"
    if kind in ("enum", "oneOf", "anyOf", "const"):
        labels = [label for _, label in choice_labels(field)]
        return f"choose one of {', '.join(labels)}" if labels else "not one of the choices"
    if kind == "pattern":
        return "does not have the expected form"
    return problem.message


FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme) and bool(parts.netloc or parts.path) and " " not in value


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if "T" not in value.upper():
        raise ValueError("no time")
    datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    return True


FORMAT_WORDS = {"email": "an email address", "uri": "a full URL (such as https://example.com)",
                 "date": "a date as YYYY-MM-DD", "date-time": "a date and time as YYYY-MM-DDTHH:MM:SSZ"}


def choice_labels(field: dict[str, Any]) -> list[tuple[Any, str]]:
    """(value, label) of a single- or multi-select field: oneOf/anyOf const+title, enum with the
    legacy enumNames, or the items of an array."""
    if field.get("type") == "array" and isinstance(field.get("items"), dict):
        field = field["items"]
    options = field.get("oneOf") or field.get("anyOf")
    if options:
        return [(option.get("const"), str(option.get("title") or option.get("const")))
                for option in options if isinstance(option, dict) and "const" in option]
    values = field.get("enum") or []
    names = field.get("enumNames") or []
    return [(value, str(names[index]) if index < len(names) else str(value))
            for index, value in enumerate(values)]
