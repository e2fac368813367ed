"""MCP tool results -> ToolMessage content: every content type, providers, the guard, error text."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from mcp import types as mcp_types
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.utilities.types import Audio
from pydantic import BaseModel

from runner.tools import (
    MEDIA_IN_TOOL_RESULTS,
    ToolOutput,
    convert_result,
    error_text,
    guard_blocks,
    guard_text,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 100).decode()
WAV = base64.b64encode(b"RIFF" + b"\0" * 40).decode()
PDF = base64.b64encode(b"%PDF-1.7\n" + b"\0" * 2000).decode()
BIG = 10_000


class Weather(BaseModel):
    city: str
    celsius: float


def build_media_server() -> MCPServer:
    server = MCPServer("media")

    @server.tool()
    def picture() -> Image:
        """A PNG image."""
        return Image(data=base64.b64decode(PNG), format="png")

    @server.tool()
    def sound() -> Audio:
        """A WAV clip."""
        return Audio(data=base64.b64decode(WAV), format="wav")

    @server.tool()
    def weather(city: str) -> Weather:
        """Structured weather."""
        return Weather(city=city, celsius=21.5)

    return server


@pytest.fixture
def media_server() -> MCPServer:
    return build_media_server()


def result(*content: Any, structured: Any = None, is_error: bool = False) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=list(content), structured_content=structured, is_error=is_error)


def text(value: str, **extra: Any) -> mcp_types.TextContent:
    return mcp_types.TextContent(type="text", text=value, **extra)


def embedded(
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
) -> mcp_types.EmbeddedResource:
    return mcp_types.EmbeddedResource(type="resource", resource=resource)


def blob(uri: str, data: str, mime: str | None) -> mcp_types.BlobResourceContents:
    return mcp_types.BlobResourceContents(uri=uri, blob=data, mime_type=mime)


# --- content types ------------------------------------------------------------------------------


def test_text_only_results_become_one_string() -> None:
    output = convert_result(result(text("first"), text("second")), max_output_chars=BIG)
    assert output == ToolOutput("first\nsecond", None, False)


async def test_an_image_from_a_real_server_becomes_a_standard_image_block(media_server) -> None:
    output = convert_result(
        await media_server.call_tool("picture", {}), max_output_chars=BIG, provider="anthropic"
    )
    assert output.content == [{"type": "image", "base64": PNG, "mime_type": "image/png"}]


async def test_audio_from_a_real_server_becomes_a_standard_audio_block(media_server) -> None:
    output = convert_result(await media_server.call_tool("sound", {}), max_output_chars=BIG)
    assert output.content == [{"type": "audio", "base64": WAV, "mime_type": "audio/wav"}]


async def test_structured_content_is_the_artifact(media_server) -> None:
    output = convert_result(await media_server.call_tool("weather", {"city": "Oslo"}), max_output_chars=BIG)
    assert output.artifact == {"city": "Oslo", "celsius": 21.5}
    assert json.loads(output.content) == {"city": "Oslo", "celsius": 21.5}


def test_structured_content_without_other_content_becomes_compact_json_text() -> None:
    output = convert_result(result(structured={"ok": True, "n": 1}), max_output_chars=BIG)
    assert output.artifact == {"ok": True, "n": 1}
    assert output.content == '{"ok":true,"n":1}'


def test_structured_content_beside_media_is_not_repeated_as_text() -> None:
    image = mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png")
    output = convert_result(result(image, structured={"image": PNG}), max_output_chars=BIG)
    assert output.artifact == {"image": PNG}
    assert [block["type"] for block in output.content] == ["image"]


def test_an_embedded_text_resource_is_inlined_with_its_uri() -> None:
    resource = mcp_types.TextResourceContents(
        uri="file:///notes/todo.md", text="- buy milk", mime_type="text/markdown"
    )
    output = convert_result(result(embedded(resource)), max_output_chars=BIG)
    assert output.content == "Resource file:///notes/todo.md (text/markdown):\n- buy milk"


def test_an_embedded_blob_that_is_text_is_decoded_and_inlined() -> None:
    data = base64.b64encode('{"a": "é"}'.encode()).decode()
    output = convert_result(
        result(embedded(blob("mem://config", data, "application/json"))), max_output_chars=BIG
    )
    assert output.content == 'Resource mem://config (application/json):\n{"a": "é"}'


def test_an_embedded_pdf_becomes_a_file_block_with_a_file_name_where_accepted() -> None:
    resource = embedded(blob("file:///docs/report.pdf", PDF, "application/pdf"))
    for provider in ("anthropic", "openai-responses", "generic"):
        output = convert_result(result(resource), max_output_chars=BIG, provider=provider)
        assert output.content == [
            {
                "type": "file",
                "base64": PDF,
                "mime_type": "application/pdf",
                "extras": {"filename": "report.pdf"},
            }
        ]


def test_an_embedded_image_blob_becomes_an_image_block() -> None:
    output = convert_result(result(embedded(blob("file:///a.png", PNG, "image/png"))), max_output_chars=BIG)
    assert output.content[0]["type"] == "image" and output.content[0]["mime_type"] == "image/png"


def test_a_resource_link_is_described_as_text() -> None:
    link = mcp_types.ResourceLink(
        type="resource_link",
        uri="file:///data/big.csv",
        name="big.csv",
        title="Sales",
        mime_type="text/csv",
        size=2048,
        description="All sales.",
    )
    output = convert_result(result(link), max_output_chars=BIG)
    assert (
        output.content == "Resource link file:///data/big.csv 'big.csv' (Sales, text/csv, 2.0 KB): All sales."
    )


@pytest.mark.parametrize("provider", ["openai", "google"])
def test_media_a_provider_cannot_take_is_described_instead(provider: str) -> None:
    image = mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png")
    audio = mcp_types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")
    pdf = embedded(blob("file:///docs/report.pdf", PDF, "application/pdf"))
    output = convert_result(result(text("here"), image, audio, pdf), max_output_chars=BIG, provider=provider)
    assert isinstance(output.content, str)
    lines = output.content.splitlines()
    assert lines[0] == "here"
    assert lines[1].startswith("[image: image/png, 108 B; not shown")
    assert lines[2].startswith("[audio: audio/wav")
    assert lines[3].startswith("[resource file:///docs/report.pdf: application/pdf, 2.0 KB; not shown")
    assert PNG not in output.content and PDF not in output.content


def test_anthropic_is_not_sent_audio_or_unsupported_image_types() -> None:
    audio = mcp_types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")
    svg = mcp_types.ImageContent(type="image", data=PNG, mime_type="image/svg+xml")
    output = convert_result(result(audio, svg), max_output_chars=BIG, provider="anthropic")
    assert (
        isinstance(output.content, str)
        and "audio/wav" in output.content
        and "image/svg+xml" in output.content
    )


def test_an_unknown_provider_gets_the_generic_blocks() -> None:
    audio = mcp_types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")
    output = convert_result(result(audio), max_output_chars=BIG, provider="mistralai")
    assert output.content == [{"type": "audio", "base64": WAV, "mime_type": "audio/wav"}]
    assert set(MEDIA_IN_TOOL_RESULTS["generic"]) == {"image", "audio", "file"}


def test_content_meant_only_for_the_user_is_not_shown_to_the_model() -> None:
    for_user = text("user only", annotations=mcp_types.Annotations(audience=["user"]))
    for_both = text("for both", annotations=mcp_types.Annotations(audience=["user", "assistant"]))
    assert convert_result(result(for_user, for_both), max_output_chars=BIG).content == "for both"


def test_an_empty_result_says_so() -> None:
    assert convert_result(result(), max_output_chars=BIG).content == "(the tool returned no content)"


def message_history(content: Any) -> list[Any]:
    call = AIMessage("", tool_calls=[{"name": "media__picture", "args": {}, "id": "call_1"}])
    return [HumanMessage("show me"), call, ToolMessage(content=content, tool_call_id="call_1")]


def test_the_blocks_reach_the_openai_responses_and_anthropic_payloads() -> None:
    image = mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png")
    pdf = embedded(blob("file:///docs/report.pdf", PDF, "application/pdf"))
    responses = convert_result(
        result(text("see"), image, pdf), max_output_chars=BIG, provider="openai-responses"
    )
    payload = ChatOpenAI(api_key="x", model="gpt-4.1-mini", use_responses_api=True)._get_request_payload(
        message_history(responses.content)
    )
    output = payload["input"][-1]["output"]
    assert [part["type"] for part in output] == ["input_text", "input_image", "input_file"]
    assert output[2]["filename"] == "report.pdf"

    anthropic = convert_result(result(text("see"), image, pdf), max_output_chars=BIG, provider="anthropic")
    payload = ChatAnthropic(api_key="x", model="claude-sonnet-4-5")._get_request_payload(
        message_history(anthropic.content)
    )
    tool_result = payload["messages"][-1]["content"][0]
    assert [part["type"] for part in tool_result["content"]] == ["text", "image", "document"]


def test_chat_completions_get_plain_text_for_media() -> None:
    image = mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png")
    converted = convert_result(result(text("see"), image), max_output_chars=BIG, provider="openai")
    payload = ChatOpenAI(api_key="x", model="gpt-4.1-mini")._get_request_payload(
        message_history(converted.content)
    )
    assert isinstance(payload["messages"][-1]["content"], str)


# --- the output guard ---------------------------------------------------------------------------


def test_text_within_the_limit_is_untouched() -> None:
    assert guard_text("x" * 100, 100) == "x" * 100


def test_long_text_is_cut_to_head_and_tail_with_a_marker() -> None:
    guarded = guard_text("h" * 20_000 + "t" * 20_000, 1_000)
    head, marker, tail = guarded.split("\n")
    assert head == "h" * 500 and tail == "t" * 500
    assert marker == "[… 39,000 characters removed …]"


def test_the_guard_applies_to_tool_results() -> None:
    output = convert_result(result(text("a" * 5_000)), max_output_chars=100)
    assert output.content.startswith("a" * 50) and "[… 4,900 characters removed …]" in output.content
    assert len(output.content.replace("[… 4,900 characters removed …]", "").replace("\n", "")) == 100


def test_media_is_never_cut_and_text_around_it_shares_the_budget() -> None:
    image = {"type": "image", "base64": PNG * 100, "mime_type": "image/png"}
    blocks = [
        {"type": "text", "text": "a" * 300},
        image,
        {"type": "text", "text": "b" * 300},
        {"type": "text", "text": "c" * 300},
    ]
    guarded = guard_blocks(blocks, 100)
    assert guarded[1] is image
    assert guarded[0]["text"] == "a" * 50 + "\n[… 800 characters removed …]"
    assert guarded[2] == {"type": "text", "text": "c" * 50}
    assert len(guarded) == 3


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {"message": "quota exceeded", "error": "ignored", "code": 429, "retriable": True},
            "quota exceeded (code: 429; retriable: yes)",
        ),
        ({"error": "not found", "detail": "ignored"}, "not found"),
        (
            {"error": {"message": "bad token", "code": "AUTH", "retryable": False}},
            "bad token (code: AUTH; retriable: no)",
        ),
        ({"detail": "Item 7 does not exist"}, "Item 7 does not exist"),
    ],
)
def test_error_text_prefers_a_structured_message(document: dict[str, Any], expected: str) -> None:
    from_structured = result(text("raw"), structured=document, is_error=True)
    from_json_text = result(text(json.dumps(document)), is_error=True)
    assert error_text(from_structured, max_output_chars=BIG) == expected
    assert error_text(from_json_text, max_output_chars=BIG) == expected


def test_an_error_result_becomes_error_output_with_its_artifact() -> None:
    output = convert_result(
        result(text("Error executing tool add: boom"), structured={"x": 1}, is_error=True),
        max_output_chars=BIG,
    )
    assert output == ToolOutput("Error executing tool add: boom", {"x": 1}, True)


def test_an_error_without_a_known_field_falls_back_to_raw_json_of_at_most_2000_characters() -> None:
    document = {"status": "failed", "trace": ["frame"] * 1_000}
    text_error = error_text(result(text(json.dumps(document)), is_error=True), max_output_chars=BIG)
    assert len(text_error) == 2_000 and text_error.startswith('{"status":"failed"')
    small = error_text(result(structured={"status": "failed"}, is_error=True), max_output_chars=BIG)
    assert small == '{"status":"failed"}'


def test_an_error_without_any_content_still_says_something() -> None:
    assert (
        error_text(result(is_error=True), max_output_chars=BIG)
        == "The tool reported an error without details."
    )


def test_a_long_plain_error_is_guarded() -> None:
    guarded = error_text(result(text("e" * 5_000), is_error=True), max_output_chars=200)
    assert guarded.startswith("e" * 100) and "[… 4,800 characters removed …]" in guarded


def test_a_lone_text_is_the_content_as_it_is_unless_it_is_for_the_user_only_or_too_long() -> None:
    plain = convert_result(result(text("answer"), structured={"result": "answer"}), max_output_chars=6)
    assert (plain.content, plain.artifact, plain.is_error) == ("answer", {"result": "answer"}, False)
    for_user = text("user only", annotations=mcp_types.Annotations(audience=["user"]))
    assert convert_result(result(for_user), max_output_chars=BIG).content == "(the tool returned no content)"
    for_user_with_data = convert_result(result(for_user, structured={"n": 1}), max_output_chars=BIG)
    assert for_user_with_data.content == '{"n":1}'
    assert "characters removed" in convert_result(result(text("a" * 8)), max_output_chars=6).content
