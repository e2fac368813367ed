"""The media of a turn's tool results saved from the thread (:func:`runner.cli.media.save_turn_media`)."""

from __future__ import annotations

import base64
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from runner.agent.runtime import Runtime
from runner.cli.media import MediaFolder, save_turn_media
from runner.events import ToolResult

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def image_result(call_id: str, data: bytes) -> ToolMessage:
    block = {"type": "image", "base64": base64.b64encode(data).decode(), "mime_type": "image/png"}
    return ToolMessage(content=[block], tool_call_id=call_id, name="shot")


class Thread:
    """A stand-in for the runtime: its thread's messages, as the checkpointer keeps them."""

    def __init__(self, messages: list[Any]) -> None:
        self.graph, self.thread_id, self._messages = self, "t1", messages

    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread_id}}

    async def aget_state(self, config: dict[str, Any]) -> Any:
        return SimpleNamespace(values={"messages": self._messages})


async def test_a_results_media_is_this_turns_though_an_earlier_call_had_the_same_id(tmp_path: Path) -> None:
    call = AIMessage("", tool_calls=[{"name": "shot", "args": {}, "id": "same"}])
    thread = Thread([call, image_result("same", b"old"), AIMessage("one"),
                     call, image_result("same", b"new")])
    shown = ToolResult(type="tool_result", name="shot", id="same", status="success", text="[image]")
    [_] = await save_turn_media(cast(Runtime, thread), MediaFolder(tmp_path), [shown])
    [path] = MediaFolder(tmp_path).files("t1")
    assert path.read_bytes() == b"new"
