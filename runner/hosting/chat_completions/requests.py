"""A Chat Completions request, checked, and the errors in the shape OpenAI's clients read.

What is read of a request: ``model`` (the agent's name), ``messages``, ``stream``,
``stream_options.include_usage`` and ``user``. Other settings (temperature, max_tokens, tools,
...) are the manifest's to decide and are ignored. Messages are text: a ``content`` string or
a list of ``text`` parts. Roles are ``system`` / ``developer`` (only before the first other
message), ``user`` and ``assistant`` (without tool calls: the agent's tools are its own); the
last message is the user's.

The conversation: the ``X-MCP-Run-Thread`` header, else the ``user`` field, names a thread
that keeps it; only the last message is then read (the thread holds the earlier ones). Without
either, the request's messages are the whole conversation, played into a new thread of its own,
which the answer names in its ``X-MCP-Run-Thread`` header: sent back, it continues there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from runner.errors import ApiRequestError, ServeError
from runner.hosting.mcp.conversations import checked_thread_id

THREAD_HEADER = "x-mcp-run-thread"
# What a request found and did before its turn (the thread's cut-off last turn closed); absent else.
NOTE_HEADER = "x-mcp-run-note"
SYSTEM_ROLES = ("system", "developer")


def refusal_body(error: ApiRequestError) -> dict[str, Any]:
    """The body of a refusal, as OpenAI's clients read it."""
    return error_body(str(error), type=error.type, code=error.code, param=error.param)


def error_body(message: str, *, type: str, code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[BaseMessage]  # with a thread: the last message alone
    thread: str | None  # the conversation named by the caller (None: this request's alone)
    stream: bool
    include_usage: bool


def parse_chat_request(raw: bytes, thread_header: str | None) -> ChatRequest:
    """The request of body ``raw``; ApiRequestError (400) says what is wrong, and where."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiRequestError(f"the request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiRequestError(f"the request body must be a JSON object, got {_type(body)}")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiRequestError("model is missing: name the agent (GET /v1/models lists them)", param="model")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise ApiRequestError(f"stream must be true or false, got {_type(stream)}", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiRequestError(f"stream_options must be an object, got {_type(options)}",
                              param="stream_options")
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise ApiRequestError("stream_options.include_usage must be true or false",
                              param="stream_options.include_usage")
    thread = _thread(body, thread_header)
    messages = _messages(body.get("messages"))
    return ChatRequest(model=model, messages=messages[-1:] if thread else messages, thread=thread,
                       stream=bool(stream), include_usage=include_usage)


def _thread(body: dict[str, Any], header: str | None) -> str | None:
    if header is not None:
        try:
            return checked_thread_id(header)
        except ServeError as exc:
            raise ApiRequestError(f"the {THREAD_HEADER} header: {exc}", param=THREAD_HEADER) from exc
    user = body.get("user")
    if user is None:
        return None
    try:
        return checked_thread_id(user)
    except ServeError as exc:
        raise ApiRequestError(f"user (the conversation's thread): {exc}", param="user") from exc


def _messages(value: Any) -> list[BaseMessage]:
    if value is None:
        raise ApiRequestError("messages is missing: a list of {role, content}, the last one the user's",
                              param="messages")
    if not isinstance(value, list) or not value:
        got = "an empty one" if value == [] else _type(value)
        raise ApiRequestError(f"messages must be a non-empty list, got {got}", param="messages")
    messages: list[BaseMessage] = []
    for index, entry in enumerate(value):
        where = f"messages[{index}]"
        if not isinstance(entry, dict):
            raise ApiRequestError(f"{where} must be an object {{role, content}}, got {_type(entry)}",
                                  param=where)
        role = entry.get("role")
        text = _text(entry.get("content"), f"{where}.content")
        if role in SYSTEM_ROLES:
            if any(not isinstance(earlier, SystemMessage) for earlier in messages):
                raise ApiRequestError(f"{where}: a {role} message comes only before the conversation's first "
                                      "user or assistant message", param=f"{where}.role")
            messages.append(SystemMessage(text))
        elif role == "user":
            messages.append(HumanMessage(text))
        elif role == "assistant":
            if entry.get("tool_calls") or entry.get("function_call"):
                raise ApiRequestError(f"{where}: tool calls are the agent's own: an assistant message here "
                                      "holds text only", param=f"{where}.tool_calls")
            messages.append(AIMessage(text))
        elif role in ("tool", "function"):
            raise ApiRequestError(f"{where}: the role {role} is not taken: the agent calls its own tools",
                                  param=f"{where}.role")
        else:
            raise ApiRequestError(f"{where}.role must be system, developer, user or assistant, got "
                                  f"{json.dumps(role)[:40]}", param=f"{where}.role")
    if not isinstance(messages[-1], HumanMessage):
        raise ApiRequestError(f"messages[{len(messages) - 1}]: the last message must be the user's",
                              param=f"messages[{len(messages) - 1}].role")
    return messages


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for index, part in enumerate(content):
            text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
            if not isinstance(text, str):
                raise ApiRequestError(f"{where}[{index}]: only text parts ({{type: text, text}}) are taken",
                                      param=f"{where}[{index}]")
            parts.append(text)
        return "\n".join(parts)
    raise ApiRequestError(f"{where} must be a string or a list of text parts, got {_type(content)}",
                          param=where)


def _type(value: Any) -> str:
    return "null" if value is None else {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "number" if isinstance(value, int | float) else type(value).__name__)
