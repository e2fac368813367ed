"""Tool definitions and tool results from all five third-party servers, through the real
langchain-openai and langchain-anthropic conversions (offline: nothing is sent), checked against
each provider's rules; and the Gemini pass of the catalog checked against Gemini's schema subset.

One fleet serves the whole module's single test: the servers start once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_openai import ChatOpenAI
from provider_names import ANTHROPIC_NAME, GEMINI_NAME, OPENAI_NAME
from thirdparty import interop

from runner.agent.reconcile import launch_spec
from runner.manifest import Manifest, ModelSpec
from runner.manifest.loading import load_manifest
from runner.servers import open_fleet
from runner.tools.catalog import ToolCatalog

pytestmark = pytest.mark.anyio

START_BOUND = 90.0
OPENAI_MAX_TOOLS = 128
ANTHROPIC_IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
# Gemini's Schema object (an OpenAPI 3.0 subset): anything else is refused by the API.
GEMINI_KEYWORDS = {
    "type", "format", "title", "description", "nullable", "enum", "items", "minItems", "maxItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern",
    "minimum", "maximum", "anyOf", "propertyOrdering", "example", "default",
}
GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object"}
OPENAI_MODEL = "openai:gpt-4.1-mini"
ANTHROPIC_MODEL = "anthropic:claude-sonnet-4-5"
GEMINI_MODEL = "google_genai:gemini-2.5-flash"


def with_model(manifest: Manifest, model_id: str) -> Manifest:
    return manifest.model_copy(update={"model": ModelSpec(id=model_id)})


def schema_nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every subschema of ``schema`` (property maps are walked, not taken for schemas)."""
    if not isinstance(schema, dict):
        return
    yield schema
    for child in (schema.get("properties") or {}).values():
        yield from schema_nodes(child)
    items = schema.get("items")
    for child in items if isinstance(items, list) else [items]:
        yield from schema_nodes(child)
    for keyword in ("anyOf", "oneOf", "allOf"):
        for child in schema.get(keyword) or []:
            yield from schema_nodes(child)
    for keyword in ("additionalProperties", "not"):
        yield from schema_nodes(schema.get(keyword))


def check_object_schema(name: str, schema: dict[str, Any]) -> None:
    assert schema.get("type") == "object", name
    assert isinstance(schema.get("properties", {}), dict), name
    assert set(schema.get("required", [])) <= set(schema.get("properties", {})), name
    jsonschema.Draft202012Validator.check_schema(schema)


def check_openai_tools(catalog: ToolCatalog) -> None:
    payload = ChatOpenAI(model="gpt-4.1-mini", api_key="offline").bind_tools(catalog.tools).kwargs["tools"]
    assert len(payload) <= OPENAI_MAX_TOOLS
    assert [tool["function"]["name"] for tool in payload] == list(catalog.entries)
    for tool in payload:
        function = tool["function"]
        assert tool["type"] == "function" and OPENAI_NAME.match(function["name"]), function["name"]
        check_object_schema(function["name"], function["parameters"])
        for node in schema_nodes(function["parameters"]):
            if node.get("type") == "array":  # the API refuses arrays without items
                assert "items" in node, function["name"]


def check_anthropic_tools(catalog: ToolCatalog) -> None:
    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="offline")
    payload = model.bind_tools(catalog.tools).kwargs["tools"]
    assert [tool["name"] for tool in payload] == list(catalog.entries)
    for tool in payload:
        assert ANTHROPIC_NAME.match(tool["name"]), tool["name"]
        check_object_schema(tool["name"], tool["input_schema"])


def check_gemini_tools(catalog: ToolCatalog) -> None:
    for name, entry in catalog.entries.items():
        assert GEMINI_NAME.match(name), name
        schema = entry.tool.args_schema
        assert isinstance(schema, dict) and schema.get("type") == "object", name
        for node in schema_nodes(schema):
            assert set(node) <= GEMINI_KEYWORDS, (name, sorted(set(node) - GEMINI_KEYWORDS))
            assert node.get("type", "string") in GEMINI_TYPES, (name, node.get("type"))
            assert all(isinstance(value, str) for value in node.get("enum", [])), name
            if node.get("type") == "array":
                assert isinstance(node.get("items"), dict), name


async def tool_turn(catalog: ToolCatalog, calls: list[tuple[str, dict[str, Any]]]) -> list[BaseMessage]:
    """A user turn, the model's tool calls and the ToolMessages the catalog's tools answer with."""
    tool_calls = [{"name": name, "args": args, "id": f"call_{index}", "type": "tool_call"}
                  for index, (name, args) in enumerate(calls)]
    messages: list[BaseMessage] = [HumanMessage("use the tools"), AIMessage("", tool_calls=tool_calls)]
    for call in tool_calls:
        messages.append(await catalog.entries[call["name"]].tool.ainvoke(call))
    return messages


def check_openai_results(messages: list[BaseMessage]) -> None:
    payload = ChatOpenAI(model="gpt-4.1-mini", api_key="offline")._get_request_payload(messages)
    results = [message for message in payload["messages"] if message["role"] == "tool"]
    assert len(results) == len(messages) - 2
    for result in results:  # Chat Completions takes text only in tool messages
        content = result["content"]
        assert isinstance(content, str) or all(part["type"] == "text" for part in content), content


def check_anthropic_results(messages: list[BaseMessage]) -> list[str]:
    """Checks the tool_result blocks; returns the kinds of content they carry."""
    payload = ChatAnthropic(model="claude-sonnet-4-5", api_key="offline")._get_request_payload(messages)
    results = [block for message in payload["messages"] if isinstance(message["content"], list)
               for block in message["content"] if block.get("type") == "tool_result"]
    assert len(results) == len(messages) - 2
    kinds = []
    for result in results:
        content = result["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            kinds.append(block["type"])
            if block["type"] == "image":
                assert block["source"]["type"] == "base64"
                assert block["source"]["media_type"] in ANTHROPIC_IMAGE_TYPES
            elif block["type"] == "document":
                assert block["source"]["media_type"] == "application/pdf"
            else:
                assert block["type"] == "text", block
    return kinds


async def test_every_third_party_tool_meets_each_providers_rules_in_definitions_and_results(
    tmp_path: Path,
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "pixel.png").write_bytes(interop.PIXEL_PNG)
    servers = {
        "everything": interop.everything(resources=True), "filesystem": interop.filesystem(root),
        "memory": interop.memory(tmp_path / "memory.jsonl"), "time": interop.time_server(),
        "git": interop.git(interop.make_repository(tmp_path / "repo")),
    }
    loaded = load_manifest(interop.write_manifest(tmp_path / "agent", servers))
    specs = {key: launch_spec(spec) for key, spec in loaded.manifest.servers.items()}
    with anyio.fail_after(START_BOUND):
        async with open_fleet(specs, base_dir=loaded.base_dir, state_dir=loaded.state_dir) as fleet:
            catalogs = {model: ToolCatalog(with_model(loaded.manifest, model), fleet.connections,
                                           loaded.base_dir)
                        for model in (OPENAI_MODEL, ANTHROPIC_MODEL, GEMINI_MODEL)}
            tools = [tool for connection in fleet.connections.values() for tool in connection.tools]
            for catalog in catalogs.values():
                # + everything's resource tools; tools that only run as tasks are offered too
                assert len(catalog.entries) == len(tools) + 2
                assert list(catalog.entries) == list(catalogs[OPENAI_MODEL].entries)
                assert catalog.warnings == []
            assert [catalog.provider for catalog in catalogs.values()] == ["openai", "anthropic", "google"]
            check_openai_tools(catalogs[OPENAI_MODEL])
            check_anthropic_tools(catalogs[ANTHROPIC_MODEL])
            check_gemini_tools(catalogs[GEMINI_MODEL])

            calls = [
                ("everything__get-tiny-image", {}),
                ("everything__get-structured-content", {"location": "Chicago"}),
                ("everything__gzip-file-as-resource", {"name": "a.gz", "data": "data:text/plain;base64,aGk=",
                                                       "outputType": "resource"}),
                ("filesystem__read_media_file", {"path": str(root / "pixel.png")}),
                ("time__get_current_time", {"timezone": "UTC"}),
                ("git__git_log", {"repo_path": str(tmp_path / "repo")}),
                ("memory__read_graph", {}),
            ]
            check_openai_results(await tool_turn(catalogs[OPENAI_MODEL], calls))
            kinds = check_anthropic_results(await tool_turn(catalogs[ANTHROPIC_MODEL], calls))
    assert kinds.count("image") == 2  # the tiny image and the PNG file reach Claude as images
