"""Conversation threads as MCP resources: ``mcp-run://threads/{thread}`` holds a thread's messages.

Threads are listed from the agent's checkpointer (the most recent checkpoints), so a thread
started by another instance on a shared database is listed and readable too.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from runner.errors import AskError
from runner.runtime import Runtime

THREAD_SCHEME = "mcp-run://threads/"
THREAD_TEMPLATE = THREAD_SCHEME + "{thread}"
THREAD_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
LISTED_CHECKPOINTS = 1000  # how far back the listing looks: the newest checkpoints of every thread
MESSAGES_MIME = "application/json"

_THREAD_ID = re.compile(THREAD_PATTERN)


def checked_thread_id(value: Any) -> str:
    """``value`` as a thread id, or AskError saying what a thread id looks like."""
    if not isinstance(value, str) or not _THREAD_ID.match(value):
        raise AskError(
            f"invalid thread id {json.dumps(value)[:80]}: a thread id is 1 to 128 letters, digits, "
            "'_', '.', ':' or '-', starting with a letter or digit (the thread an earlier answer named)"
        )
    return value


def thread_uri(thread_id: str) -> str:
    return THREAD_SCHEME + thread_id


def thread_of(uri: str) -> str:
    """The thread id of a thread resource's URI."""
    if not uri.startswith(THREAD_SCHEME):
        raise AskError(f"unknown resource {uri!r}: threads are {THREAD_TEMPLATE}")
    return checked_thread_id(uri.removeprefix(THREAD_SCHEME))


async def listed_threads(runtime: Runtime) -> list[str]:
    """Thread ids with a checkpoint, newest first (those among the last LISTED_CHECKPOINTS)."""
    if runtime.checkpointer is None:
        return []
    seen: dict[str, None] = {}
    async for saved in runtime.checkpointer.alist(None, limit=LISTED_CHECKPOINTS):
        thread_id = saved.config.get("configurable", {}).get("thread_id")
        if isinstance(thread_id, str) and thread_id not in seen:
            seen[thread_id] = None
    return list(seen)


def thread_resource(thread_id: str) -> types.Resource:
    return types.Resource(uri=thread_uri(thread_id), name=f"thread {thread_id}",
                          description="The messages of this conversation (JSON)", mime_type=MESSAGES_MIME)


def thread_template() -> types.ResourceTemplate:
    return types.ResourceTemplate(uri_template=THREAD_TEMPLATE, name="thread",
                                  description="The messages of a conversation thread (JSON), by thread id",
                                  mime_type=MESSAGES_MIME)


async def thread_messages(runtime: Runtime, thread_id: str) -> list[dict[str, Any]] | None:
    """The thread's messages as JSON-ready dicts, or None when the thread has none."""
    state = await runtime.graph.aget_state(runtime.config(thread_id))
    messages: list[BaseMessage] = (state.values or {}).get("messages", [])
    if not messages:
        return None
    return [message_json(message) for message in messages]


def message_json(message: BaseMessage) -> dict[str, Any]:
    role = {HumanMessage: "user", AIMessage: "assistant", ToolMessage: "tool", SystemMessage: "system"}.get(
        type(message), message.type)
    entry: dict[str, Any] = {"role": role, "text": message.text}
    if isinstance(message, AIMessage) and message.tool_calls:
        entry["tool_calls"] = [{"name": call["name"], "args": call["args"], "id": call["id"]}
                               for call in message.tool_calls]
    if isinstance(message, ToolMessage):
        entry.update(name=message.name, tool_call_id=message.tool_call_id, status=message.status)
    return entry
