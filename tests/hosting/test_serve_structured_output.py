"""`mcp-run serve` of an agent with ``output:``: the ``ask`` tool declares the answer object's
schema in its outputSchema and returns the object as structured content, on both protocol eras,
to a real MCP client (which checks the content against the declared schema)."""

from __future__ import annotations

from pathlib import Path

import anyio
import jsonschema
import pytest
from builders import scripted_model, write_manifest
from serving import stdio_agent

LIMIT = 90
# $defs and a $ref: the object's schema sits under ask's 'output', its definitions at the root.
FORECAST = {
    "type": "object",
    "$defs": {"day": {"type": "object", "properties": {"high": {"type": "number"}}, "required": ["high"]}},
    "properties": {"city": {"type": "string"}, "days": {"type": "array", "items": {"$ref": "#/$defs/day"}}},
    "required": ["city", "days"],
}
ANSWER = {"city": "Lyon", "days": [{"high": 18}, {"high": 21}]}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_ask_declares_the_answer_objects_schema_and_returns_the_object(
        tmp_path: Path, mode: str) -> None:
    manifest = write_manifest(tmp_path, {}, name="forecaster", checkpointer="memory",
                              model=scripted_model(tmp_path, [{"output": ANSWER}]),
                              output={"schema": FORECAST})
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest, mode=mode) as client:
            [ask] = (await client.list_tools()).tools
            result = await client.call_tool("ask", {"message": "forecast for Lyon?"})
    schema = ask.output_schema
    declared = {key: FORECAST[key] for key in ("type", "properties", "required")}
    assert schema["properties"]["output"] == declared
    assert schema["$defs"] == FORECAST["$defs"] and "output" in schema["required"]
    assert not result.is_error
    assert result.structured_content["output"] == ANSWER
    jsonschema.validate(result.structured_content, schema)
    with pytest.raises(jsonschema.ValidationError):  # the declared schema holds the object's own rules
        jsonschema.validate({**result.structured_content, "output": {"city": "Lyon", "days": [{}]}}, schema)


async def test_without_output_ask_declares_no_output_field(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, {}, name="plain", checkpointer="memory", model="offline")
    with anyio.fail_after(LIMIT):
        async with stdio_agent(manifest) as client:
            [ask] = (await client.list_tools()).tools
    assert "output" not in ask.output_schema["properties"] and "$defs" not in ask.output_schema
