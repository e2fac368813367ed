"""Input schemas: the generic form, each provider pass, and LangChain's own tool conversion."""

from __future__ import annotations

import copy
import json
from enum import StrEnum
from typing import Annotated, Any, Literal

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.chat_models import convert_to_anthropic_tool
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from mcp.server.mcpserver import MCPServer
from provider_names import ANTHROPIC_NAME, OPENAI_NAME
from pydantic import BaseModel, Field

from runner.tools import (
    NameTable,
    StrictSchemaError,
    UnusableSchemaError,
    gemini_schema,
    normalise_schema,
    openai_strict_schema,
    provider_for_model,
    schema_for_provider,
)

# --- a real server whose tools have the schemas pydantic writes ---------------------------------


class Status(StrEnum):
    open = "open"
    closed = "closed"


class Address(BaseModel):
    street: str
    zip: Annotated[str, Field(pattern=r"^\d{5}$")]


class Item(BaseModel):
    sku: str
    quantity: Annotated[int, Field(ge=1, le=100)] = 1


class Order(BaseModel):
    address: Address
    items: Annotated[list[Item], Field(min_length=1)]
    status: Status = Status.open
    note: str | None = None
    priority: Literal[1, 2, 3] = 2


class TreeNode(BaseModel):
    label: str
    children: list[TreeNode] = []


def build_shapes_server() -> MCPServer:
    server = MCPServer("shapes")

    @server.tool()
    def search(
        query: Annotated[str, Field(min_length=1, description="Words to look for")],
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        tags: list[str] | None = None,
    ) -> str:
        """Search the catalogue."""
        return query

    @server.tool(name="orders.create")
    def create_order(order: Order) -> str:
        """Create an order."""
        return order.address.street

    @server.tool()
    def outline(root: TreeNode) -> str:
        """Print an outline."""
        return root.label

    @server.tool()
    def ping() -> str:
        """No arguments at all."""
        return "pong"

    return server


@pytest.fixture
async def server_schemas() -> dict[str, dict[str, Any]]:
    tools = await build_shapes_server().list_tools()
    return {tool.name: tool.input_schema for tool in tools}


def walk(node: Any, path: str = "$"):
    """Every schema object in a (ref-free) schema with its path."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key in ("properties",):
        for name, child in node.get(key, {}).items():
            yield from walk(child, f"{path}.{name}")
    for key in ("anyOf", "oneOf", "allOf"):
        for index, child in enumerate(node.get(key, [])):
            yield from walk(child, f"{path}/{key}[{index}]")
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            yield from walk(node[key], f"{path}.{key}")


def keys_anywhere(schema: Any) -> set[str]:
    return {key for _, node in walk(schema) for key in node}


# --- the generic form ---------------------------------------------------------------------------


async def test_local_references_are_inlined(server_schemas) -> None:
    schema = normalise_schema(server_schemas["orders.create"])
    assert "$ref" not in json.dumps(schema) and "$defs" not in schema
    order = schema["properties"]["order"]
    assert order["properties"]["address"]["properties"]["zip"]["pattern"] == r"^\d{5}$"
    assert order["properties"]["items"]["items"]["required"] == ["sku"]
    assert order["properties"]["status"] == {
        "enum": ["open", "closed"],
        "title": "Status",
        "type": "string",
        "default": "open",
    }


async def test_a_recursive_reference_is_cut_at_a_depth_with_a_description(server_schemas) -> None:
    schema = normalise_schema(server_schemas["outline"], recursion_depth=2)
    node = schema["properties"]["root"]
    for _ in range(3):
        node = node["properties"]["children"]["items"]
    assert node["type"] == "object" and "properties" not in node
    assert "Recursive structure 'TreeNode'" in node["description"]
    assert "$ref" not in json.dumps(schema)


def test_a_reference_to_the_root_and_mutual_recursion_do_not_crash() -> None:
    schema = {
        "type": "object",
        "properties": {"self": {"$ref": "#"}, "a": {"$ref": "#/definitions/A"}},
        "definitions": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/definitions/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}}},
        },
    }
    normalised = normalise_schema(schema)
    assert "$ref" not in json.dumps(normalised) and "definitions" not in normalised


def test_exponentially_growing_references_are_an_unusable_schema() -> None:
    defs = {
        f"L{i}": {
            "type": "object",
            "properties": {"x": {"$ref": f"#/$defs/L{i + 1}"}, "y": {"$ref": f"#/$defs/L{i + 1}"}},
        }
        for i in range(30)
    }
    defs["L30"] = {"type": "string"}
    with pytest.raises(UnusableSchemaError):
        normalise_schema({"type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}, "$defs": defs})


def test_keywords_beside_a_reference_win_and_constraints_combine() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/N", "description": "How many.", "maximum": 5}},
        "$defs": {"N": {"type": "integer", "minimum": 1, "maximum": 10, "description": "A number."}},
    }
    n = normalise_schema(schema)["properties"]["n"]
    assert n["description"].startswith("How many.")
    assert {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "description": "A number. Must be >= 1 and <= 10.",
    } in n["allOf"]


@pytest.mark.parametrize("ref", ["#/$defs/Missing", "other.json#/X", "#anchor"])
def test_references_that_cannot_be_resolved_are_an_unusable_schema(ref: str) -> None:
    with pytest.raises(UnusableSchemaError):
        normalise_schema({"type": "object", "properties": {"x": {"$ref": ref}}, "$defs": {}})


def test_the_dialect_and_bookkeeping_keywords_are_dropped() -> None:
    schema = normalise_schema(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:x",
            "$comment": "c",
            "type": "object",
            "properties": {"a": {"type": "string", "$comment": "inner"}},
        }
    )
    assert not keys_anywhere(schema) & {"$schema", "$id", "$comment"}


async def test_constraints_are_described_and_kept(server_schemas) -> None:
    properties = normalise_schema(server_schemas["search"])["properties"]
    assert properties["limit"]["description"] == "Must be >= 1 and <= 100."
    assert properties["limit"]["minimum"] == 1 and properties["limit"]["default"] == 10
    assert properties["query"]["description"] == "Words to look for Must be at least 1 character long."


@pytest.mark.parametrize(
    ("keywords", "sentence"),
    [
        ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, "Must be > 0 and < 1."),
        ({"type": "number", "minimum": 0, "exclusiveMinimum": True}, "Must be > 0."),
        ({"type": "integer", "multipleOf": 5}, "Must be a multiple of 5."),
        ({"type": "string", "minLength": 2, "maxLength": 8}, "Must be between 2 and 8 characters long."),
        ({"type": "string", "maxLength": 1}, "Must be at most 1 character long."),
        ({"type": "string", "pattern": "^[a-z]+$"}, "Must match the pattern ^[a-z]+$."),
        ({"type": "array", "items": {}, "minItems": 1}, "Must have at least 1 item."),
        ({"type": "array", "items": {}, "maxItems": 3}, "Must have at most 3 items."),
        ({"type": "string", "format": "email"}, "Format: email."),
    ],
)
def test_each_constraint_becomes_a_sentence(keywords: dict[str, Any], sentence: str) -> None:
    schema = normalise_schema({"type": "object", "properties": {"p": keywords}})
    assert schema["properties"]["p"]["description"] == sentence


def test_normalising_twice_does_not_repeat_sentences() -> None:
    once = normalise_schema({"type": "object", "properties": {"p": {"type": "integer", "minimum": 1}}})
    assert normalise_schema(once) == once


async def test_the_input_schema_is_not_changed(server_schemas) -> None:
    original = copy.deepcopy(server_schemas)
    for schema in server_schemas.values():
        for provider in ("openai", "anthropic", "google", "generic"):
            schema_for_provider(schema, provider)
    assert server_schemas == original


@pytest.mark.parametrize("root", [None, True, {}, {"properties": {}}, {"type": ["object", "null"]}])
def test_a_missing_or_empty_root_becomes_an_object_schema(root: Any) -> None:
    assert normalise_schema(root) == {"type": "object", "properties": {}}


@pytest.mark.parametrize("root", [False, [], "object", {"type": "string"}, {"type": "array", "items": {}}])
def test_a_root_that_cannot_hold_arguments_is_an_unusable_schema(root: Any) -> None:
    with pytest.raises(UnusableSchemaError):
        normalise_schema(root)


def test_a_root_all_of_is_merged_into_one_object() -> None:
    schema = normalise_schema(
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        }
    )
    assert schema == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }


def test_root_alternatives_are_merged_with_only_the_common_fields_required() -> None:
    schema = normalise_schema(
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "x": {"type": "integer"}},
                    "required": ["id", "x"],
                },
                {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "y": {"type": "integer"}},
                    "required": ["id"],
                },
            ]
        }
    )
    assert schema["type"] == "object" and set(schema["properties"]) == {"id", "x", "y"}
    assert schema["required"] == ["id"]
    assert "oneOf" not in schema


@pytest.mark.parametrize(
    ("model_id", "provider"),
    [
        ("openai:gpt-4.1-mini", "openai"),
        ("azure_openai:gpt-4o", "openai"),
        ("gpt-4o", "openai"),
        ("o3-mini", "openai"),
        ("anthropic:claude-sonnet-4-5", "anthropic"),
        ("claude-opus-4", "anthropic"),
        ("google_anthropic_vertex:claude-sonnet-4-5", "anthropic"),
        ("google_genai:gemini-2.5-flash", "google"),
        ("google_vertexai:gemini-2.5-pro", "google"),
        ("gemini-2.0-flash", "google"),
        ("ollama:llama3", "generic"),
        ("offline", "generic"),
        ("scripted", "generic"),
    ],
)
def test_the_provider_pass_is_chosen_by_model_id(model_id: str, provider: str) -> None:
    assert provider_for_model(model_id) == provider


# --- OpenAI -------------------------------------------------------------------------------------

# Keywords OpenAI documents as unsupported in strict mode (plus the ones we promise to remove).
OPENAI_STRICT_UNSUPPORTED = set(
    "minLength maxLength patternProperties unevaluatedProperties propertyNames minProperties "
    "maxProperties unevaluatedItems contains minContains maxContains uniqueItems default oneOf "
    "allOf not if then else $ref $defs $schema title examples".split()
)
OPENAI_STRICT_FORMATS = set("date-time time date duration email hostname ipv4 ipv6 uuid".split())


def assert_openai_strict(schema: dict[str, Any]) -> None:
    """OpenAI's published rules for strict function parameters."""
    assert schema["type"] == "object" and "anyOf" not in schema
    for path, node in walk(schema):
        assert not set(node) & OPENAI_STRICT_UNSUPPORTED, (path, set(node) & OPENAI_STRICT_UNSUPPORTED)
        assert any(key in node for key in ("type", "anyOf", "enum", "const")), path
        types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        if "object" in types:
            assert node["additionalProperties"] is False, path
            assert node["required"] == list(node["properties"]), path
        if "array" in types:
            assert isinstance(node.get("items"), dict) and node["items"], path
        if "format" in node:
            assert node["format"] in OPENAI_STRICT_FORMATS, path


async def test_openai_strict_makes_every_property_required_and_optional_ones_nullable(
    server_schemas,
) -> None:
    schema = schema_for_provider(server_schemas["search"], "openai", strict=True)
    assert_openai_strict(schema)
    properties = schema["properties"]
    assert properties["query"]["type"] == "string"
    assert properties["limit"]["type"] == ["integer", "null"]
    assert "Default: 10." in properties["limit"]["description"]
    assert {"type": "null"} in properties["tags"]["anyOf"]


async def test_openai_strict_handles_nested_models_enums_and_literals(server_schemas) -> None:
    schema = schema_for_provider(server_schemas["orders.create"], "openai", strict=True)
    assert_openai_strict(schema)
    order = schema["properties"]["order"]["properties"]
    assert order["status"]["enum"] == ["open", "closed", None]
    assert order["priority"]["enum"] == [1, 2, 3, None]
    assert order["items"]["items"]["properties"]["quantity"]["type"] == ["integer", "null"]


def test_openai_strict_removes_unsupported_formats_and_keywords() -> None:
    schema = openai_strict_schema(
        normalise_schema(
            {
                "type": "object",
                "properties": {
                    "when": {"type": "string", "format": "date-time"},
                    "site": {"type": "string", "format": "uri", "minLength": 3},
                    "code": {"type": "string", "pattern": "^(?!x)[a-z]+$"},
                    "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    "many": {"type": ["string", "integer"]},
                },
                "required": ["when", "site", "code", "either", "many"],
            }
        )
    )
    assert_openai_strict(schema)
    properties = schema["properties"]
    assert properties["when"]["format"] == "date-time"
    assert "format" not in properties["site"] and "Format: uri." in properties["site"]["description"]
    assert "pattern" not in properties["code"]
    assert properties["either"]["anyOf"] == [{"type": "string"}, {"type": "integer"}]
    assert properties["many"]["anyOf"] == [{"type": "string"}, {"type": "integer"}]


@pytest.mark.parametrize(
    "property_schema",
    [
        {"type": "object", "additionalProperties": {"type": "string"}},  # a free-form map
        {"type": "array"},  # untyped items
        {"description": "anything"},  # any value
    ],
)
def test_what_strict_mode_cannot_express_is_a_strict_schema_error(
    property_schema: dict[str, Any],
) -> None:
    with pytest.raises(StrictSchemaError):
        schema_for_provider({"type": "object", "properties": {"p": property_schema}}, "openai", strict=True)
    schema_for_provider({"type": "object", "properties": {"p": property_schema}}, "openai")  # fine without


async def test_a_cut_recursive_schema_is_not_strict_but_works_without_strict(server_schemas) -> None:
    with pytest.raises(StrictSchemaError):
        schema_for_provider(server_schemas["outline"], "openai", strict=True)
    assert schema_for_provider(server_schemas["outline"], "openai")["type"] == "object"


def test_openai_arrays_always_have_items() -> None:
    schema = schema_for_provider({"type": "object", "properties": {"t": {"type": "array"}}}, "openai")
    assert schema["properties"]["t"]["items"] == {}


def langchain_tools(
    schemas: dict[str, dict[str, Any]], provider: str, *, strict: bool = False
) -> list[StructuredTool]:
    """What the wiring step builds: one StructuredTool per MCP tool, with a raw-dict args_schema."""
    table = NameTable([("shapes", name) for name in schemas])

    async def call(**arguments: Any) -> str:
        return json.dumps(arguments)

    return [
        StructuredTool(
            name=table.name_for("shapes", name),
            description=f"{name} of server shapes",
            args_schema=schema_for_provider(schema, provider, strict=strict),
            coroutine=call,
        )
        for name, schema in schemas.items()
    ]


async def test_langchain_converts_the_tools_for_openai_unchanged(server_schemas) -> None:
    strict_capable = {k: v for k, v in server_schemas.items() if k != "outline"}
    for tool in langchain_tools(strict_capable, "openai", strict=True):
        converted = convert_to_openai_tool(tool, strict=True)["function"]
        assert OPENAI_NAME.fullmatch(converted["name"])
        assert converted["parameters"] == tool.args_schema
        assert_openai_strict(converted["parameters"])


async def test_chat_openai_binds_the_tools_in_strict_mode_offline(server_schemas) -> None:
    strict_capable = {k: v for k, v in server_schemas.items() if k != "outline"}
    tools = langchain_tools(strict_capable, "openai", strict=True)
    bound = ChatOpenAI(api_key="x", model="gpt-4.1-mini").bind_tools(tools, strict=True)
    definitions = bound.kwargs["tools"]
    assert [d["function"]["name"] for d in definitions] == [
        "shapes__search",
        "shapes__orders_create",
        "shapes__ping",
    ]
    for definition, tool in zip(definitions, tools, strict=True):
        assert definition["function"]["strict"] is True
        assert definition["function"]["parameters"] == tool.args_schema
        assert_openai_strict(definition["function"]["parameters"])


async def test_chat_openai_binds_every_tool_without_strict(server_schemas) -> None:
    tools = langchain_tools(server_schemas, "openai")
    bound = ChatOpenAI(api_key="x", model="gpt-4.1-mini").bind_tools(tools)
    for definition in bound.kwargs["tools"]:
        assert OPENAI_NAME.fullmatch(definition["function"]["name"])
        assert definition["function"]["parameters"]["type"] == "object"


# --- Anthropic ----------------------------------------------------------------------------------


async def test_langchain_converts_the_tools_for_anthropic(server_schemas) -> None:
    tools = langchain_tools(server_schemas, "anthropic")
    for tool in tools:
        converted = convert_to_anthropic_tool(tool)
        assert ANTHROPIC_NAME.fullmatch(converted["name"])
        assert converted["input_schema"]["type"] == "object"
        assert not {"oneOf", "anyOf", "allOf"} & set(converted["input_schema"])
        assert "$ref" not in json.dumps(converted["input_schema"])
    bound = ChatAnthropic(api_key="x", model="claude-sonnet-4-5").bind_tools(tools)
    assert [d["name"] for d in bound.kwargs["tools"]] == [t.name for t in tools]


# --- Gemini -------------------------------------------------------------------------------------

# What Gemini's OpenAPI subset rejects or we promise to remove.
GEMINI_UNSUPPORTED = set(
    "$ref $defs $schema const oneOf allOf not additionalProperties exclusiveMinimum "
    "exclusiveMaximum title default examples patternProperties prefixItems if then else".split()
)


def assert_gemini_subset(schema: dict[str, Any]) -> None:
    for path, node in walk(schema):
        assert not set(node) & GEMINI_UNSUPPORTED, (path, set(node) & GEMINI_UNSUPPORTED)
        assert not isinstance(node.get("type"), list), path
        assert node.get("type") != "null", path
        assert all(isinstance(value, str) for value in node.get("enum", [])), path
        assert set(node.get("required", [])) <= set(node.get("properties", {})), path


async def test_gemini_gets_the_openapi_subset(server_schemas) -> None:
    for schema in server_schemas.values():
        converted = schema_for_provider(schema, "google")
        assert_gemini_subset(converted)
    search = schema_for_provider(server_schemas["search"], "google")["properties"]
    assert search["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "nullable": True,
        "description": "Default: null.",
    }


def test_gemini_const_type_arrays_combinators_and_enums() -> None:
    converted = gemini_schema(
        normalise_schema(
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "kind": {"const": "user"},
                    "level": {"enum": [1, 2, 3]},
                    "mode": {"enum": ["a", "b", None]},
                    "count": {"type": ["integer", "null"], "format": "int32"},
                    "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    "both": {
                        "allOf": [
                            {"type": "object", "properties": {"a": {"type": "string"}}},
                            {"properties": {"b": {"type": "string"}}},
                        ]
                    },
                    "email": {"type": "string", "format": "email"},
                    "ratio": {"type": "number", "exclusiveMinimum": 0},
                },
            }
        )
    )
    assert_gemini_subset(converted)
    properties = converted["properties"]
    assert properties["kind"] == {"type": "string", "enum": ["user"]}
    assert properties["level"] == {"type": "integer", "description": "Must be one of 1, 2, 3."}
    assert properties["mode"] == {"type": "string", "enum": ["a", "b"], "nullable": True}
    assert properties["count"] == {
        "type": "integer",
        "format": "int32",
        "nullable": True,
        "description": "Format: int32.",
    }
    assert properties["either"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert set(properties["both"]["properties"]) == {"a", "b"}
    assert properties["email"] == {"type": "string", "description": "Format: email."}
    assert properties["ratio"] == {"type": "number", "description": "Must be > 0."}
