"""Images, audio and files that tools return, saved where the person can open them.

A tool result's media blocks (LangChain's ``image`` / ``audio`` / ``file`` content blocks, as
``runner.tools.content`` makes them) are written under the state folder, one folder a thread:
``<state>/media/<thread>/<order>-<tool>.<ext>``, numbered in the order they arrive, across runs.
The model sees media only when its provider takes it inside a tool result; media the model could
not receive was never kept, so there is nothing to save.

On terminals known to show inline images (kitty, iTerm2, detected from their environment
variables) an image is also previewed; everywhere else only the path is printed.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage

from runner.agent.runtime import Runtime
from runner.events import MediaSaved, ToolResult
from runner.store.private import private_folder, private_opener

MEDIA_TYPES = ("image", "audio", "file")
MARKERS = tuple(f"[{kind}]" for kind in MEDIA_TYPES)  # how turn events show a media block
PREVIEW_LIMIT = 4 * 1024 * 1024  # bytes: larger images are not previewed inline
# Types the mimetypes module does not know on every system.
_EXTENSIONS = {"audio/wav": ".wav", "audio/wave": ".wav", "audio/webm": ".webm", "audio/ogg": ".ogg",
               "image/webp": ".webp"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class SavedMedia:
    tool: str
    call_id: str
    mime_type: str
    path: Path

    def line(self) -> str:
        """What ``-p`` and ``mcp-run call`` print of it on stderr."""
        return f"saved {self.mime_type} from {self.tool}: {self.path}"

    def event(self) -> MediaSaved:
        return MediaSaved(type="media", tool=self.tool, id=self.call_id, mime_type=self.mime_type,
                          path=str(self.path))


class MediaFolder:
    """The media saved for the threads of one agent (``<state>/media``)."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "media"

    def folder(self, thread: str) -> Path:
        return self.root / _safe(thread)

    def files(self, thread: str) -> list[Path]:
        folder = self.folder(thread)
        return sorted(path for path in folder.iterdir() if path.is_file()) if folder.is_dir() else []

    def save(self, thread: str, tool: str, call_id: str,
             blocks: Iterable[Mapping[str, Any]]) -> list[SavedMedia]:
        saved = []
        for block in blocks:
            data = _decoded(block)
            if data is None:
                continue
            mime = str(block.get("mime_type") or "application/octet-stream")
            folder = self.folder(thread)
            private_folder(self.root)
            private_folder(folder)
            order = len(self.files(thread)) + 1
            path = folder / f"{order:03d}-{_safe(tool)}{_extension(block, mime)}"
            with open(path, "wb", opener=private_opener) as file:
                file.write(data)
            saved.append(SavedMedia(tool, call_id, mime, path.resolve()))
        return saved


def has_media(event: ToolResult) -> bool:
    """Whether a ``tool_result`` event's text shows a media block (its bytes are in the thread)."""
    return any(marker in event["text"] for marker in MARKERS)


def media_blocks(content: Any) -> list[Mapping[str, Any]]:
    """The media blocks of a ToolMessage's (or a ToolOutput's) content."""
    if isinstance(content, str):
        return []
    return [block for block in content if isinstance(block, Mapping) and block.get("type") in MEDIA_TYPES]


async def save_turn_media(runtime: Runtime, folder: MediaFolder,
                          results: list[ToolResult]) -> list[SavedMedia]:
    """Save the media of the ``tool_result`` events ``results`` (of the turn that just paused or
    ended), read from the thread's messages, where the checkpointer keeps them: the latest result
    of each id (an earlier turn's call may have had the same id)."""
    wanted = {event["id"]: event["name"] for event in results if has_media(event)}
    if not wanted:
        return []
    state = await runtime.graph.aget_state(runtime.config())
    saved: list[SavedMedia] = []
    messages = state.values.get("messages", [])
    latest = {message.tool_call_id: index for index, message in enumerate(messages)
              if isinstance(message, ToolMessage) and message.tool_call_id in wanted}
    for index in sorted(latest.values()):
        result = messages[index]
        saved += folder.save(runtime.thread_id, wanted[result.tool_call_id], result.tool_call_id,
                             media_blocks(result.content))
    return saved


def inline_preview(event: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> str | None:
    """Escape codes that show the image of a ``media`` event inline on kitty or iTerm2; None
    elsewhere, or for what is not an image or is too big."""
    path, mime = Path(event["path"]), event["mime_type"]
    kitty = bool(environ.get("KITTY_WINDOW_ID")) or environ.get("TERM") == "xterm-kitty"
    iterm = environ.get("TERM_PROGRAM") == "iTerm.app"
    if not (kitty and mime == "image/png" or iterm and mime.startswith("image/")):
        return None
    size = path.stat().st_size
    if size > PREVIEW_LIMIT:
        return None
    data = base64.b64encode(path.read_bytes()).decode()
    if iterm:
        return f"\x1b]1337;File=inline=1;size={size}:{data}\x07\n"
    if kitty:
        chunks = [data[start:start + 4096] for start in range(0, len(data), 4096)]
        codes = []
        for index, chunk in enumerate(chunks):
            more = 1 if index < len(chunks) - 1 else 0
            control = f"f=100,a=T,m={more}" if index == 0 else f"m={more}"
            codes.append(f"\x1b_G{control};{chunk}\x1b\\")
        return "".join(codes) + "\n"
    return None


def _decoded(block: Mapping[str, Any]) -> bytes | None:
    data = block.get("base64") or block.get("data")
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error:
        return None


def _extension(block: Mapping[str, Any], mime: str) -> str:
    extras = block.get("extras")
    filename = extras.get("filename") if isinstance(extras, Mapping) else None
    if isinstance(filename, str) and (suffix := Path(filename).suffix):
        return "." + _safe(suffix)
    kind = mime.split(";")[0].strip().lower()
    return _EXTENSIONS.get(kind) or mimetypes.guess_extension(kind) or ".bin"


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("._") or "media"
