"""Arguments from the model, validated against the original input schema before the call."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from runner.manifest.loading import format_path
from runner.tools import (
    ArgumentValidator,
    drop_strict_nulls,
    fill_defaults,
    format_problems,
    normalise_schema,
    schema_for_provider,
    validate_arguments,
)

ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "customer": {"type": "string", "minLength": 1},
        "items": {
            "type": "array",
            "items": {"$ref": "#/$defs/Item"},
        },
        "note": {"type": "string"},
    },
    "required": ["customer", "items"],
    "additionalProperties": False,
    "$defs": {
        "Item": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
            "required": ["sku"],
        }
    },
}


def test_valid_arguments_have_no_problems() -> None:
    assert (
        validate_arguments(ORDER_SCHEMA, {"customer": "ada", "items": [{"sku": "A1", "quantity": 2}]}) == []
    )


def test_every_problem_is_listed_with_its_path() -> None:
    problems = validate_arguments(
        ORDER_SCHEMA,
        {"customer": "", "items": [{"quantity": 0}, {"sku": 5}], "colour": "red"},
    )
    assert problems == [
        "customer: '' should be non-empty",
        "items[0]: 'sku' is a required property",
        "items[0].quantity: 0 is less than the minimum of 1",
        "items[1].sku: 5 is not of type 'string'",
    ]


def test_missing_required_arguments_are_each_a_problem() -> None:
    assert validate_arguments(ORDER_SCHEMA, {}) == [
        "(arguments): 'customer' is a required property",
        "(arguments): 'items' is a required property",
    ]


def test_arguments_that_are_not_an_object_are_one_problem() -> None:
    assert validate_arguments(ORDER_SCHEMA, ["ada"]) == ["(arguments): must be an object, not list"]


def test_no_arguments_count_as_an_empty_object() -> None:
    assert validate_arguments({"type": "object", "properties": {}}, None) == []


def test_the_draft_follows_the_schema_dialect() -> None:
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "minimum": 5, "exclusiveMinimum": True}},
    }
    assert validate_arguments(draft4, {"n": 5}) == ["n: 5 is less than or equal to the minimum of 5"]
    draft2020 = {"type": "object", "properties": {"n": {"type": "number", "exclusiveMinimum": 5}}}
    assert validate_arguments(draft2020, {"n": 5}) == ["n: 5 is less than or equal to the minimum of 5"]
    assert validate_arguments(draft2020, {"n": 6}) == []


def test_a_failed_alternative_names_the_closest_match() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
    }
    [problem] = validate_arguments(schema, {"id": 1.5})
    assert problem.startswith("id: 1.5 is not valid under any of the given schemas (closest match:")


def test_long_values_are_shortened_in_messages() -> None:
    [problem] = validate_arguments(
        {"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": "x" * 5_000}
    )
    assert len(problem) < 320 and problem.endswith("…")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": 5},
        {"type": "object", "properties": {"p": {"pattern": "("}}},
        {"$schema": 7, "type": "object"},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}},
    ],
)
def test_an_invalid_schema_does_not_crash_validation(schema: dict[str, Any], caplog) -> None:
    validator = ArgumentValidator()
    with caplog.at_level(logging.WARNING, logger="runner.tools.arguments"):
        assert validator.problems(schema, {"a": 1, "p": "x"}) == []
        assert validator.problems(schema, {"a": 1, "p": "x"}) == []
    assert len(caplog.records) == 1  # warned once, not on every call


def test_an_invalid_schema_can_be_asked_about() -> None:
    validator = ArgumentValidator()
    assert validator.schema_problem({"type": 5}) is not None
    assert validator.schema_problem(ORDER_SCHEMA) is None


def test_compiled_validators_are_cached_and_bounded() -> None:
    validator = ArgumentValidator(cache_size=2)
    first = validator._compile(ORDER_SCHEMA)
    assert validator._compile(dict(ORDER_SCHEMA)) is first
    for n in range(3):
        validator.problems({"type": "object", "properties": {"n": {"maximum": n}}}, {})
    assert len(validator._compiled) == 2
    assert validator._compile(ORDER_SCHEMA) is not first


def test_paths_are_written_like_code() -> None:
    assert format_path([], root="(arguments)") == "(arguments)"
    assert format_path([]) == ""
    assert format_path(["items", 0, "sku"]) == "items[0].sku"


def test_problems_become_one_text_for_the_model() -> None:
    text = format_problems(["a: wrong", "b: missing"])
    assert "- a: wrong\n- b: missing" in text


async def test_what_openai_strict_sends_validates_once_its_nulls_are_dropped() -> None:
    server = MCPServer("shop")

    @server.tool()
    def search(query: str, limit: int = 10, tags: list[str] | None = None, exact: bool = False) -> str:
        """Search."""
        return query

    [tool] = await server.list_tools()
    original = tool.input_schema
    strict = schema_for_provider(original, "openai", strict=True)
    assert strict["required"] == ["query", "limit", "tags", "exact"]
    from_model = {"query": "lamp", "limit": None, "tags": None, "exact": True}
    assert validate_arguments(original, from_model) != []  # null is not an int
    cleaned = drop_strict_nulls(from_model, normalise_schema(original))
    assert cleaned == {"query": "lamp", "tags": None, "exact": True}  # tags accepts null itself
    assert validate_arguments(original, cleaned) == []


def test_strict_nulls_are_dropped_at_every_depth_but_required_ones_stay() -> None:
    generic = normalise_schema(ORDER_SCHEMA)
    arguments = {"customer": None, "items": [{"sku": "A", "quantity": None}], "note": None}
    assert drop_strict_nulls(arguments, generic) == {"customer": None, "items": [{"sku": "A"}]}


SCREENSHOT_SCHEMA: dict[str, Any] = {  # the shape of Playwright MCP's browser_take_screenshot
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["png", "jpeg"], "default": "png"},
        "scale": {"type": "string", "enum": ["css", "device"], "default": "css"},
        "clip": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "unit": {"type": "string", "default": "px"}},
            "required": ["x", "unit"],
        },
        "fullPage": {"type": "boolean"},
    },
    "required": ["type", "scale"],
    "additionalProperties": False,
}


def test_a_required_property_with_a_default_counts_as_given_and_its_default_is_sent() -> None:
    assert validate_arguments(SCREENSHOT_SCHEMA, {"type": "png"}) == []
    assert validate_arguments(SCREENSHOT_SCHEMA, {"clip": {"x": 1}}) == []
    assert fill_defaults(SCREENSHOT_SCHEMA, {"type": "jpeg", "clip": {"x": 1}}) == {
        "type": "jpeg", "clip": {"x": 1, "unit": "px"}, "scale": "css",
    }
    assert validate_arguments(SCREENSHOT_SCHEMA, {"clip": {}}) == ["clip: 'x' is a required property"]
    [problem] = validate_arguments(SCREENSHOT_SCHEMA, {"scale": "huge"})
    assert problem.startswith("scale: 'huge' is not one of")


def test_defaults_are_filled_inside_arrays_and_leave_the_arguments_unchanged() -> None:
    schema = {"type": "object", "properties": {"shots": {"type": "array", "items": SCREENSHOT_SCHEMA}}}
    arguments = {"shots": [{"type": "png"}]}
    assert fill_defaults(schema, arguments) == {"shots": [{"type": "png", "scale": "css"}]}
    assert arguments == {"shots": [{"type": "png"}]}
    assert fill_defaults(schema, "not an object") == "not an object"


def test_unknown_properties_are_left_to_the_server_as_zod_and_pydantic_servers_drop_them() -> None:
    extras = {"colour": "red", "clip": {"x": 1, "unit": "px", "y": 2}}
    assert validate_arguments(SCREENSHOT_SCHEMA, extras) == []
    typed_extras = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert validate_arguments(typed_extras, {"n": "one"}) == ["n: 'one' is not of type 'integer'"]


def test_openapi_nullable_admits_null() -> None:
    schema = {"type": "object", "properties": {
        "note": {"type": "string", "nullable": True}, "n": {"type": "string"},
        "size": {"type": "string", "enum": ["s", "m"], "nullable": True},
    }}
    assert validate_arguments(schema, {"note": None, "size": None}) == []
    assert validate_arguments(schema, {"size": "xl"})[0].startswith("size: 'xl' is not one of")
    assert validate_arguments(schema, {"n": None}) == ["n: None is not of type 'string'"]


def test_an_integral_float_is_an_integer_in_every_draft() -> None:
    drafts = ("http://json-schema.org/draft-04/schema#", "https://json-schema.org/draft/2020-12/schema")
    for dialect in drafts:
        schema = {"$schema": dialect, "type": "object", "properties": {"n": {"type": "integer"}}}
        assert validate_arguments(schema, {"n": 3.0}) == []
        assert validate_arguments(schema, {"n": 3.5}) == ["n: 3.5 is not of type 'integer'"]


def test_formats_are_not_asserted() -> None:
    schema = {"type": "object", "properties": {"url": {"type": "string", "format": "uri"},
                                                "when": {"type": "string", "format": "date-time"}}}
    assert validate_arguments(schema, {"url": "example.com/page", "when": "tomorrow"}) == []


PLAIN_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"text": {"type": "string", "title": "Text"}}, "required": ["text"]},
    {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"},
                                      "flag": {"type": "boolean"}}, "required": ["n"]},
    {"type": "object", "properties": {"n": {"type": "integer", "nullable": True}}, "required": ["n"]},
    {"type": "object",
     "properties": {"s": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
     "required": ["s"]},
    {"type": "object", "properties": {"tags": {"type": "array"}, "extra": {"type": "object"},
                                      "any": {}, "both": {"type": ["string", "integer"]}},
     "additionalProperties": False},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
     "properties": {"n": {"type": "integer", "format": "int32"}}, "required": ["n"]},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
     "properties": {"n": {"type": "integer"}}, "required": ["n"]},
]
PLAIN_ARGUMENTS: list[dict[str, Any]] = [
    {}, {"text": "ping"}, {"text": 1}, {"text": None}, {"n": 1}, {"n": 1.0}, {"n": 1.5}, {"n": True},
    {"n": None}, {"n": "1"}, {"n": 2, "x": 1}, {"n": 2, "x": 1.5}, {"n": 2, "x": False},
    {"n": 2, "flag": 0}, {"n": 2, "flag": True}, {"s": None}, {"s": "a"}, {"s": 3},
    {"tags": [], "extra": {}, "any": object(), "both": 3}, {"tags": (), "both": 3.0}, {"both": 2.5},
    {"unknown": 1}, {"text": "a", "unknown": [1]},
]


@pytest.mark.parametrize("schema", PLAIN_SCHEMAS)
def test_the_quick_check_of_plain_schemas_reports_exactly_what_the_full_check_does(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = ArgumentValidator()
    full = ArgumentValidator()
    monkeypatch.setattr("runner.tools.arguments.QuickCheck.of", classmethod(lambda cls, *_: None))
    expected = [full.problems(schema, arguments) for arguments in PLAIN_ARGUMENTS]
    monkeypatch.undo()
    assert [quick.problems(schema, arguments) for arguments in PLAIN_ARGUMENTS] == expected


def test_valid_arguments_for_a_plain_schema_are_accepted_without_running_the_schema_validator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    validator = ArgumentValidator()
    schema = PLAIN_SCHEMAS[1]
    assert validator.problems(schema, {"n": 3}) == []

    def fail(*_: Any, **__: Any) -> Any:
        raise AssertionError("the full check ran")

    monkeypatch.setattr("jsonschema.validators.Draft202012Validator.iter_errors", fail)
    compiled = validator._compile(schema)
    monkeypatch.setattr(type(compiled), "iter_errors", fail)
    assert validator.problems(schema, {"n": 3, "x": 0.5, "flag": False}) == []
    with pytest.raises(AssertionError, match="the full check ran"):
        validator.problems(schema, {"n": "three"})


def test_a_schema_with_constraints_beyond_types_is_checked_in_full() -> None:
    validator = ArgumentValidator()
    assert validator.problems(ORDER_SCHEMA, {"customer": "", "items": []}) == [
        "customer: '' should be non-empty"
    ]
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    assert validator.problems(schema, {"n": 0}) == ["n: 0 is less than the minimum of 1"]
    schema = {"type": "object", "properties": {"s": {"type": "string"}},
              "additionalProperties": {"type": "integer"}}
    assert validator.problems(schema, {"s": "a", "other": "b"}) == ["other: 'b' is not of type 'integer'"]


def test_a_new_schema_object_for_a_tool_gets_its_own_quick_check() -> None:
    validator = ArgumentValidator()
    first = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert validator.problems(first, {"n": 1}) == []
    second = {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}
    assert validator.problems(second, {"n": 1}) == ["n: 1 is not of type 'string'"]
    assert validator.problems(first, {"n": 1}) == []
