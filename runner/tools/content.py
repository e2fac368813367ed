"""MCP tool results -> what a LangChain ``ToolMessage`` carries.

Content becomes LangChain's standard (v1) content blocks: ``text``, ``image`` / ``audio`` /
``file`` with ``base64`` and ``mime_type``. What a provider cannot take inside a tool result
(OpenAI Chat Completions only takes text there; Anthropic takes images and PDFs) becomes a short
text saying what was left out, so the request is never rejected. Text resources are inlined
with their URI. ``structuredContent`` is the artifact, and the text when nothing else is text.
Content whose ``audience`` excludes the assistant is not shown to the model.

Error results (``isError``) become one text for ``ToolMessage(status="error")`` that prefers a
structured message. The output guard cuts text beyond ``max_output_chars`` to head and tail with
a marker; media is never cut.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from typing import Any

import mcp.types as mcp_types

from runner.events import CallRetried
from runner.tools.schemas import compact_json

ContentBlock = dict[str, Any]

MAX_RAW_ERROR_CHARS = 2_000
_COMMON_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_PDF = frozenset({"application/pdf"})
_ANY = None  # every mime type of that kind

# provider -> media kind -> accepted mime types inside a tool result (missing kind: none)
MEDIA_IN_TOOL_RESULTS: dict[str, dict[str, frozenset[str] | None]] = {
    "openai": {},  # Chat Completions: tool messages carry text parts only
    "openai-responses": {"image": _COMMON_IMAGES, "file": _PDF},
    "anthropic": {"image": _COMMON_IMAGES, "file": _PDF},  # tool_result: image, document
    "google": {},  # not verified for Gemini function responses: describe instead
    "generic": {"image": _ANY, "audio": _ANY, "file": _ANY},
}
_TEXT_MIME_SUFFIXES = ("json", "xml", "yaml", "javascript", "csv", "markdown", "toml")


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """``content`` for the ToolMessage (a string when it is only text), the ``artifact`` (the
    structured content, or None), whether the tool reported an error, and the times the call was
    made again before this answer (``retries``: on a fallback server, or after a URL visit)."""

    content: str | list[ContentBlock]
    artifact: Any
    is_error: bool
    retries: tuple[CallRetried, ...] = ()

    def with_note(self, note: str) -> ToolOutput:
        """This output with ``note`` (text from mcp-run itself) after the tool's content."""
        if isinstance(self.content, str):
            return replace(self, content=self.content + note)
        return replace(self, content=[*self.content, {"type": "text", "text": note.strip()}])


def convert_result(
    result: mcp_types.CallToolResult, *, max_output_chars: int, provider: str = "generic"
) -> ToolOutput:
    """Convert a ``tools/call`` result for the model of ``provider`` (a key of
    :data:`MEDIA_IN_TOOL_RESULTS`; unknown providers get ``generic``)."""
    artifact = result.structured_content
    if result.is_error:
        return ToolOutput(error_text(result, max_output_chars=max_output_chars), artifact, True)
    if len(result.content) == 1:  # the common answer, one text for everyone: nothing to convert
        item = result.content[0]
        if (type(item) is mcp_types.TextContent and item.annotations is None
                and len(item.text) <= max_output_chars):
            return ToolOutput(item.text, artifact, False)
    accepted = MEDIA_IN_TOOL_RESULTS.get(provider, MEDIA_IN_TOOL_RESULTS["generic"])
    blocks: list[ContentBlock] = []
    for item in result.content:
        if _for_assistant(item):
            blocks.append(_convert_item(item, accepted))
    # Structured content stands in for text only when nothing else carries the answer: beside
    # media it usually repeats the media itself (base64 and all).
    if artifact is not None and not blocks:
        blocks.append(_text(compact_json(artifact)))
    if not blocks:
        blocks.append(_text("(the tool returned no content)"))
    blocks = guard_blocks(blocks, max_output_chars)
    if all(block["type"] == "text" for block in blocks):
        return ToolOutput("\n".join(block["text"] for block in blocks), artifact, False)
    return ToolOutput(blocks, artifact, False)


def _for_assistant(item: mcp_types.ContentBlock) -> bool:
    annotations = getattr(item, "annotations", None)
    audience = getattr(annotations, "audience", None)
    return audience is None or "assistant" in audience


def _text(text: str) -> ContentBlock:
    return {"type": "text", "text": text}


def _convert_item(item: mcp_types.ContentBlock, accepted: dict[str, frozenset[str] | None]) -> ContentBlock:
    if isinstance(item, mcp_types.TextContent):
        return _text(item.text)
    if isinstance(item, mcp_types.ImageContent):
        return _media("image", item.data, item.mime_type, accepted, label="image")
    if isinstance(item, mcp_types.AudioContent):
        return _media("audio", item.data, item.mime_type, accepted, label="audio")
    if isinstance(item, mcp_types.ResourceLink):
        return _text(_describe_link(item))
    if isinstance(item, mcp_types.EmbeddedResource):
        return _convert_resource(item.resource, accepted)
    return _text(f"(unsupported content: {compact_json(item.model_dump(mode='json'))[:200]})")


def _convert_resource(
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
    accepted: dict[str, frozenset[str] | None],
) -> ContentBlock:
    mime = resource.mime_type
    heading = f"Resource {resource.uri}" + (f" ({mime})" if mime else "")
    if isinstance(resource, mcp_types.TextResourceContents):
        return _text(f"{heading}:\n{resource.text}")
    if mime and is_textual(mime) and (decoded := decode_text(resource.blob)) is not None:
        return _text(f"{heading}:\n{decoded}")
    mime = mime or "application/octet-stream"
    kind = mime.split("/", 1)[0] if mime.startswith(("image/", "audio/")) else "file"
    filename = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or "resource"
    return _media(kind, resource.blob, mime, accepted, label=f"resource {resource.uri}", filename=filename)


def _media(
    kind: str,
    data: str,
    mime: str,
    accepted: dict[str, frozenset[str] | None],
    *,
    label: str,
    filename: str | None = None,
) -> ContentBlock:
    if kind in accepted and ((mimes := accepted[kind]) is _ANY or mime in mimes):
        block: ContentBlock = {"type": kind, "base64": data, "mime_type": mime}
        if filename is not None:
            block["extras"] = {"filename": filename}  # OpenAI needs a file name for files
        return block
    size = _human_size(len(data) * 3 // 4)
    return _text(f"[{label}: {mime}, {size}; not shown, this model cannot receive it from a tool]")


def _describe_link(link: mcp_types.ResourceLink) -> str:
    details = [
        part
        for part in (
            link.title if link.title and link.title != link.name else None,
            link.mime_type,
            _human_size(link.size) if link.size is not None else None,
        )
        if part
    ]
    text = f"Resource link {link.uri} '{link.name}'" + (f" ({', '.join(details)})" if details else "")
    return f"{text}: {link.description}" if link.description else text


def is_textual(mime: str) -> bool:
    return mime.startswith("text/") or mime.split(";")[0].endswith(_TEXT_MIME_SUFFIXES)


def decode_text(data: str) -> str | None:
    """The UTF-8 text in base64 ``data``; None when it is not text after all (it is then shown
    as binary)."""
    try:
        return base64.b64decode(data, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


# --- the output guard ---------------------------------------------------------------------------


def removal_marker(removed: int) -> str:
    return f"[… {removed:,} characters removed …]"


def guard_text(text: str, max_chars: int) -> str:
    """``text`` if it fits, else its head and tail (``max_chars`` together) around a marker."""
    return guard_blocks([_text(text)], max_chars)[0]["text"]


def guard_blocks(blocks: list[ContentBlock], max_chars: int) -> list[ContentBlock]:
    """Cut the text of ``blocks`` to ``max_chars`` characters in total, keeping the first half
    of the budget from the start and the rest from the end, with one marker where text was
    removed. Text blocks left empty disappear; media blocks are kept as they are."""
    total = sum(len(block["text"]) for block in blocks if block["type"] == "text")
    if total <= max_chars:
        return blocks
    head_end = max_chars // 2
    tail_start = total - (max_chars - head_end)
    marker = removal_marker(tail_start - head_end)
    guarded: list[ContentBlock] = []
    offset = 0
    marker_placed = False
    for block in blocks:
        if block["type"] != "text":
            guarded.append(block)
            continue
        text, start = block["text"], offset
        offset += len(text)
        head = text[: max(0, head_end - start)]
        tail = text[max(0, tail_start - start) :] if offset > tail_start else ""
        here = ""
        if not marker_placed and offset > head_end:  # the cut starts in this block
            here, marker_placed = marker, True
        kept = "\n".join(piece for piece in (head, here, tail) if piece)
        if kept:
            guarded.append({**block, "text": kept})
    return guarded


# --- errors -------------------------------------------------------------------------------------


def error_text(result: mcp_types.CallToolResult, *, max_output_chars: int) -> str:
    """The text of an ``isError`` result: a structured message (``message`` > ``error`` >
    ``error.message`` > ``detail``, from ``structuredContent`` or JSON text) with its ``code`` and
    ``retriable``; else the plain text; else the raw JSON, at most 2,000 characters."""
    texts = [item.text for item in result.content if isinstance(item, mcp_types.TextContent)]
    documents: list[Any] = [result.structured_content] if result.structured_content is not None else []
    plain: list[str] = []
    for text in texts:
        try:
            documents.append(json.loads(text))
        except json.JSONDecodeError:
            plain.append(text)
    for document in documents:
        if isinstance(document, dict) and (message := _structured_message(document)):
            return guard_text(message, max_output_chars)
    if plain:
        return guard_text("\n".join(plain), max_output_chars)
    if documents:
        raw = compact_json(documents[0])
        return raw if len(raw) <= MAX_RAW_ERROR_CHARS else raw[: MAX_RAW_ERROR_CHARS - 1] + "…"
    return "The tool reported an error without details."


def _structured_message(document: dict[str, Any]) -> str | None:
    error = document.get("error")
    nested = error if isinstance(error, dict) else {}
    candidates = (document.get("message"), error, nested.get("message"), document.get("detail"))
    message = next((value for value in candidates if isinstance(value, str) and value.strip()), None)
    if message is None:
        return None
    notes = []
    code = document.get("code", nested.get("code"))
    if code is not None:
        notes.append(f"code: {code}")
    retriable = next(
        (
            source[key]
            for source in (document, nested)
            for key in ("retriable", "retryable")
            if isinstance(source.get(key), bool)
        ),
        None,
    )
    if retriable is not None:
        notes.append(f"retriable: {'yes' if retriable else 'no'}")
    return f"{message} ({'; '.join(notes)})" if notes else message
