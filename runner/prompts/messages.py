"""MCP prompt templates (``prompts/get``) as LangChain messages.

A prompt's messages become ``HumanMessage`` (role user) and ``AIMessage`` (role assistant) with
LangChain's standard content blocks. Consecutive messages of one role are merged into one message,
so a prompt that sends a text and then an image is one user turn. Resources are labelled with
their URI so the model can tell where the content came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from mcp import types

from runner.errors import PromptError
from runner.tools.content import decode_text, is_textual

if TYPE_CHECKING:  # LangChain is imported when a prompt is rendered: listing prompts needs none
    from langchain_core.messages import BaseMessage

ContentBlock = dict[str, Any]


class PromptSource(Protocol):
    """What :func:`fetch_prompt_messages` needs of a server connection."""

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> types.GetPromptResult: ...


def describe_arguments(prompt: types.Prompt) -> str:
    """``language (required): the language, topic`` — the prompt's declared arguments."""
    declared = prompt.arguments or []
    if not declared:
        return "it takes no arguments"
    parts = []
    for argument in declared:
        text = f"{argument.name} (required)" if argument.required else argument.name
        parts.append(f"{text}: {argument.description}" if argument.description else text)
    return "it takes " + "; ".join(parts)


def check_prompt_arguments(prompt: types.Prompt, arguments: Mapping[str, str]) -> None:
    """Refuse missing required arguments and undeclared ones before asking the server."""
    declared = {argument.name: argument for argument in prompt.arguments or []}
    missing = [name for name, arg in declared.items() if arg.required and name not in arguments]
    unknown = sorted(name for name in arguments if name not in declared)
    complaints = []
    if missing:
        complaints.append(f"missing required argument(s): {', '.join(missing)}")
    if unknown:
        complaints.append(f"unknown argument(s): {', '.join(unknown)}")
    if complaints:
        raise PromptError(
            f"prompt '{prompt.name}': {'; '.join(complaints)} ({describe_arguments(prompt)})"
        )


async def fetch_prompt_messages(
    connection: PromptSource,
    name: str,
    arguments: Mapping[str, str],
    prompt_def: types.Prompt,
) -> list[BaseMessage]:
    """Check ``arguments`` against ``prompt_def``, get the prompt, convert its messages."""
    check_prompt_arguments(prompt_def, arguments)
    result = await connection.get_prompt(name, dict(arguments))
    return prompt_messages(result.messages)


def prompt_messages(messages: Sequence[types.PromptMessage]) -> list[BaseMessage]:
    """LangChain messages for a prompt's messages, merging runs of one role."""
    from langchain_core.messages import AIMessage, HumanMessage

    runs: list[tuple[str, list[ContentBlock]]] = []
    for message in messages:
        blocks = content_blocks(message.content)
        if runs and runs[-1][0] == message.role:
            runs[-1][1].extend(blocks)
        else:
            runs.append((message.role, blocks))
    converted: list[BaseMessage] = []
    for role, blocks in runs:
        # A lone text block is sent as a plain string: every provider accepts that.
        content: str | list[Any] = (
            blocks[0]["text"] if len(blocks) == 1 and blocks[0]["type"] == "text" else list(blocks)
        )
        converted.append(HumanMessage(content) if role == "user" else AIMessage(content))
    return converted


def content_blocks(content: types.ContentBlock) -> list[ContentBlock]:
    """Standard LangChain content blocks for one MCP content block."""
    match content:
        case types.TextContent(text=text):
            return [_text(text)]
        case types.ImageContent(data=data, mime_type=mime_type):
            return [{"type": "image", "base64": data, "mime_type": mime_type}]
        case types.AudioContent(data=data, mime_type=mime_type):
            return [{"type": "audio", "base64": data, "mime_type": mime_type}]
        case types.EmbeddedResource(resource=types.TextResourceContents() as resource):
            return [_text(f"{_resource_label(resource.uri, resource.mime_type)}:\n{resource.text}")]
        case types.EmbeddedResource(resource=types.BlobResourceContents() as resource):
            label = _resource_label(resource.uri, resource.mime_type)
            if is_textual(resource.mime_type or "") and (decoded := decode_text(resource.blob)) is not None:
                return [_text(f"{label}:\n{decoded}")]
            return [_text(f"{label}:"), _blob(resource)]
        case types.ResourceLink():
            return [_text(_link_text(content))]
    raise PromptError(f"unsupported prompt content of type '{getattr(content, 'type', '?')}'")


def _text(text: str) -> ContentBlock:
    return {"type": "text", "text": text}


def _resource_label(uri: str, mime_type: str | None) -> str:
    return f"Resource {uri} ({mime_type})" if mime_type else f"Resource {uri}"


def _blob(resource: types.BlobResourceContents) -> ContentBlock:
    mime_type = resource.mime_type or "application/octet-stream"
    kind = mime_type.split("/", 1)[0]
    if kind in ("image", "audio"):
        return {"type": kind, "base64": resource.blob, "mime_type": mime_type}
    block: ContentBlock = {"type": "file", "base64": resource.blob, "mime_type": mime_type}
    filename = PurePosixPath(urlparse(resource.uri).path).name
    if filename:
        block["extras"] = {"filename": filename}  # OpenAI wants a file name for file input
    return block


def _link_text(link: types.ResourceLink) -> str:
    title = link.title or link.name
    details = [f"Resource link: {title} <{link.uri}>"]
    if link.mime_type:
        details.append(f"type {link.mime_type}")
    if link.size is not None:
        details.append(f"{link.size} bytes")
    text = ", ".join(details)
    return f"{text}\n{link.description}" if link.description else text
