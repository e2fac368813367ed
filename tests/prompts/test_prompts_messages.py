"""MCP prompt templates fetched from a real in-process server and turned into LangChain messages."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from mcp import types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage
from mcp.server.mcpserver.utilities.types import Audio, Image

from runner.errors import PromptError
from runner.prompts import check_prompt_arguments, content_blocks, fetch_prompt_messages

PNG = b"\x89PNG\r\n\x1a\n-image-bytes"
WAV = b"RIFF-audio-bytes"
PDF = b"%PDF-1.7 document"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def prompt_server() -> MCPServer:
    server = MCPServer("prompts")

    @server.prompt()
    def review(language: str, topic: str = "general") -> str:
        """Review code in a language."""
        return f"Review this {language} code; focus on {topic}."

    @server.prompt()
    def show_material() -> list[Message]:
        """Text, an image, audio, resources and a link, in two user turns around an answer."""
        return [
            UserMessage("Look at this chart:"),
            UserMessage(Image(data=PNG, format="png")),
            AssistantMessage("I see a rising line."),
            AssistantMessage(Audio(data=WAV, format="wav")),
            UserMessage(types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="file:///src/app.py", mime_type="text/x-python", text="print('hi')"
                ),
            )),
            UserMessage(types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///docs/spec.pdf", mime_type="application/pdf", blob=b64(PDF)
                ),
            )),
            UserMessage(types.ResourceLink(
                type="resource_link",
                uri="file:///docs/notes.md",
                name="notes.md",
                description="Meeting notes",
                mime_type="text/markdown",
                size=42,
            )),
        ]

    return server


class RecordingConnection:
    """The duck-typed connection: forwards ``get_prompt`` to the SDK client, keeping each call."""

    def __init__(self, client: mcp.Client) -> None:
        self.client = client
        self.calls: list[tuple[str, dict[str, str] | None]] = []

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> types.GetPromptResult:
        self.calls.append((name, arguments))
        return await self.client.get_prompt(name, arguments)


@pytest.fixture(params=["auto", "legacy"])
async def connection(request: pytest.FixtureRequest) -> AsyncIterator[RecordingConnection]:
    with anyio.fail_after(10):
        async with mcp.Client(prompt_server(), mode=request.param) as client:
            yield RecordingConnection(client)


async def definition(connection: RecordingConnection, name: str) -> types.Prompt:
    listed = await connection.client.list_prompts()
    return next(prompt for prompt in listed.prompts if prompt.name == name)


async def test_a_text_prompt_becomes_one_human_message(connection: RecordingConnection) -> None:
    prompt = await definition(connection, "review")
    with anyio.fail_after(10):
        messages = await fetch_prompt_messages(
            connection, "review", {"language": "python", "topic": "naming"}, prompt
        )
    assert messages == [HumanMessage("Review this python code; focus on naming.")]
    assert connection.calls == [("review", {"language": "python", "topic": "naming"})]


async def test_images_audio_resources_and_links_become_content_blocks_merged_by_role(
    connection: RecordingConnection,
) -> None:
    prompt = await definition(connection, "show_material")
    with anyio.fail_after(10):
        messages = await fetch_prompt_messages(connection, "show_material", {}, prompt)
    assert [type(message) for message in messages] == [HumanMessage, AIMessage, HumanMessage]
    first, answer, last = messages
    assert first.content == [
        {"type": "text", "text": "Look at this chart:"},
        {"type": "image", "base64": b64(PNG), "mime_type": "image/png"},
    ]
    assert answer.content == [
        {"type": "text", "text": "I see a rising line."},
        {"type": "audio", "base64": b64(WAV), "mime_type": "audio/wav"},
    ]
    assert last.content == [
        {"type": "text", "text": "Resource file:///src/app.py (text/x-python):\nprint('hi')"},
        {"type": "text", "text": "Resource file:///docs/spec.pdf (application/pdf):"},
        {"type": "file", "base64": b64(PDF), "mime_type": "application/pdf",
         "extras": {"filename": "spec.pdf"}},
        {"type": "text", "text": (
            "Resource link: notes.md <file:///docs/notes.md>, type text/markdown, 42 bytes\n"
            "Meeting notes"
        )},
    ]
    # LangChain reads the blocks as its standard types, so providers can translate them.
    assert [block["type"] for block in first.content_blocks] == ["text", "image"]
    assert [block["type"] for block in last.content_blocks] == ["text", "text", "file", "text"]


async def test_a_missing_required_argument_is_refused_before_any_request(
    connection: RecordingConnection,
) -> None:
    prompt = await definition(connection, "review")
    with pytest.raises(PromptError) as caught:
        await fetch_prompt_messages(connection, "review", {"topic": "naming"}, prompt)
    assert connection.calls == []
    # The message is the product here: it names what is missing and what the prompt takes.
    assert "missing required argument(s): language" in str(caught.value)
    assert "language (required)" in str(caught.value) and "topic" in str(caught.value)


async def test_an_unknown_argument_is_refused_listing_the_declared_ones(
    connection: RecordingConnection,
) -> None:
    prompt = await definition(connection, "review")
    with pytest.raises(PromptError) as caught:
        await fetch_prompt_messages(
            connection, "review", {"language": "go", "tone": "kind"}, prompt
        )
    assert connection.calls == []
    assert "unknown argument(s): tone" in str(caught.value)
    assert "language (required)" in str(caught.value)


def test_a_prompt_without_arguments_says_so_when_given_some() -> None:
    prompt = types.Prompt(name="hello")
    with pytest.raises(PromptError) as caught:
        check_prompt_arguments(prompt, {"x": "1"})
    assert "it takes no arguments" in str(caught.value)


@pytest.mark.parametrize(
    ("mime_type", "expected"),
    [
        ("image/jpeg", {"type": "image", "base64": "AAAA", "mime_type": "image/jpeg"}),
        ("audio/mpeg", {"type": "audio", "base64": "AAAA", "mime_type": "audio/mpeg"}),
        (None, {"type": "file", "base64": "AAAA", "mime_type": "application/octet-stream",
                "extras": {"filename": "blob.bin"}}),
    ],
)
def test_blob_resources_become_the_block_their_mime_type_calls_for(
    mime_type: str | None, expected: dict[str, Any]
) -> None:
    resource = types.BlobResourceContents(
        uri="mem://store/blob.bin", mime_type=mime_type, blob="AAAA"
    )
    label, block = content_blocks(types.EmbeddedResource(type="resource", resource=resource))
    assert label["type"] == "text" and "mem://store/blob.bin" in label["text"]
    assert block == expected
