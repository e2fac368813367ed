"""The OpenAI-compatible HTTP API (an ASGI app): ``GET /v1/models``, ``GET /v1/models/{id}`` and
``POST /v1/chat/completions``, streamed (server-sent ``chat.completion.chunk`` events ending with
``data: [DONE]``) or not.

Turns go through the served agent's :class:`~runner.hosting.mcp.conversations.TurnScheduler`
beside the MCP callers' (``--max-turns`` bounds them all); a conversation runs one turn at a time,
and a request for a conversation whose turn is running, or past the bound, gets 429. A caller
that disconnects cancels its turn (and the turn's tool calls). A request on a thread whose last
turn was cut off closes that turn first (:mod:`runner.agent.resume`) and says so in the
``X-MCP-Run-Note`` header. Errors come in the shape OpenAI's clients read:
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.agent.resume import close_cut_off_thread
from runner.agent.runtime import Runtime
from runner.agent.team import agent_thread
from runner.errors import BusyError, RunnerError
from runner.hosting.callers import caller_of, thread_in_space
from runner.hosting.chat_completions.requests import (
    NOTE_HEADER,
    THREAD_HEADER,
    ApiRequestError,
    ChatRequest,
    error_body,
    parse_chat_request,
    refusal_body,
)
from runner.hosting.chat_completions.turns import Answer, answer
from runner.hosting.mcp.conversations import TurnScheduler, conversation_store
from runner.manifest import MAIN_AGENT
from runner.task_groups import background_tasks

API_PREFIX = "/v1/"
MAX_BODY = 4 * 1024 * 1024  # bytes of a request body
STOPPING = "the agent is stopping: this turn was cancelled; ask again when it is back"
OWNER = "mcp-run"

@dataclass(frozen=True)
class ServedAgent:
    """One agent of a runtime served as a model: ``main`` or one of its ``agents:``."""

    runtime: Runtime
    agent: str = MAIN_AGENT


Agents = Callable[[], Mapping[str, ServedAgent]]
"""The served agents by model name, as they are now (a reload may rename one)."""


def served_agents(runtime: Runtime) -> dict[str, ServedAgent]:
    """The models ``runtime`` serves: the main agent under the manifest's name, then each agent of
    ``agents:`` under its own (one named as the manifest is reached only through its callers)."""
    name = runtime.manifest.name
    return {name: ServedAgent(runtime), **{agent: ServedAgent(runtime, agent)
                                           for agent in sorted(runtime.manifest.agents) if agent != name}}


def unauthorized() -> ASGIApp:
    """The 401 of a request without a valid bearer token, as OpenAI's clients read it."""
    return JSONResponse(error_body("a valid bearer token is required (Authorization: Bearer TOKEN)",
                                   type="invalid_request_error", code="invalid_api_key"),
                        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="mcp-run"'})


class ChatCompletions:
    """The API over the served agents: ``app = ChatCompletions(agents, scheduler)``."""

    def __init__(self, agents: Agents, scheduler: TurnScheduler) -> None:
        self.agents = agents
        self.scheduler = scheduler
        self.created = int(time.time())
        self._calls: set[anyio.CancelScope] = set()
        self._stopping = False
        self._no_calls = anyio.Event()

    async def stop(self) -> None:
        """Cancel every running turn (each caller hears why) and wait for them; from now on
        requests for a turn get 503."""
        self._stopping = True
        for call in self._calls:
            call.cancel()
        if self._calls:
            await self._no_calls.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope["path"].rstrip("/"), scope["method"]
        try:
            if path == "/v1/models":
                _allow(method, "GET")
                models = [self._model(name) for name in self.agents()]
                await _json(send, 200, {"object": "list", "data": models})
            elif path.startswith("/v1/models/"):
                _allow(method, "GET")
                name = path.removeprefix("/v1/models/")
                self._served(name, param=None)
                await _json(send, 200, self._model(name))
            elif path == "/v1/chat/completions":
                _allow(method, "POST")
                await self._complete(scope, receive, send)
            else:
                raise ApiRequestError(f"no such endpoint {path}: this API has GET /v1/models and POST "
                                      "/v1/chat/completions", status=404, code="unknown_url")
        except ApiRequestError as exc:
            await _json(send, exc.status, refusal_body(exc))

    def _model(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": OWNER}

    def _served(self, name: str, *, param: str | None = "model") -> ServedAgent:
        served = self.agents().get(name)
        if served is None:
            known = ", ".join(self.agents()) or "none"
            raise ApiRequestError(f"the model {json.dumps(name)[:80]} does not exist: the models here are "
                                  f"the agents served ({known})", status=404, code="model_not_found",
                                  param=param)
        return served

    async def _complete(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = await _body(receive)
        if raw is None:  # the caller went away before its request was read
            return
        header = dict(scope["headers"]).get(THREAD_HEADER.encode())
        request = parse_chat_request(raw, None if header is None else header.decode("latin-1"))
        served = self._served(request.model)
        if self._stopping:
            raise ApiRequestError(STOPPING, status=503, type="server_error", code="stopping")
        # Without a thread named, the request's messages start a new one; the answer names it
        # (X-MCP-Run-Thread), and sending that header back continues the conversation.
        named = request.thread or f"chat-{uuid.uuid4().hex}"
        thread = thread_in_space(caller_of(scope), named)
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        with anyio.CancelScope() as call:
            self._calls.add(call)
            try:
                async with background_tasks() as watching:
                    watching.start_soon(_cancel_when_gone, receive, call)
                    await self._turn(served, thread, named, request, sending)
            finally:
                self._calls.discard(call)
                if not self._calls:
                    self._no_calls.set()
                    self._no_calls = anyio.Event()
        if call.cancelled_caught and self._stopping and not started:
            raise ApiRequestError(STOPPING, status=503, type="server_error", code="stopping")

    async def _turn(self, served: ServedAgent, thread: str, named: str, request: ChatRequest,
                    send: Send) -> None:
        """The turn on ``thread`` (the checkpointer's id), answered with ``named``, the caller's."""
        try:
            async with self.scheduler.turn(agent_thread(served.agent, thread), queue_on_thread=False):
                with conversation_store():
                    # A thread whose last turn was cut off (its process killed): the new message closes it.
                    cut_off = await close_cut_off_thread(served.runtime, thread, agent=served.agent)
                note = cut_off.closed_note() if cut_off is not None else None
                if request.stream:
                    await _Stream(send, request, request.model).run(served, thread, named, note)
                    return
                with conversation_store():
                    result = await answer(served.runtime, thread, request.messages, _ignore,
                                          agent=served.agent)
        except BusyError as exc:
            raise ApiRequestError(str(exc), status=429, type="rate_limit_error",
                                  code="rate_limit_exceeded") from exc
        except RunnerError as exc:  # the model or the checkpointer failed
            raise ApiRequestError(str(exc), status=500, type="server_error") from exc
        await _json(send, 200, _completion(request, request.model, result), thread=named, note=note)


class _Stream:
    """One streamed answer: the headers go when the turn starts, a chunk per piece of text."""

    def __init__(self, send: Send, request: ChatRequest, model: str) -> None:
        self.send = send
        self.request = request
        self.model = model
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self._ended = False

    async def run(self, served: ServedAgent, thread: str, named: str, note: str | None = None) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                   (THREAD_HEADER.encode(), named.encode()), *_note_header(note)]
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        await self._chunk({"role": "assistant", "content": ""})
        try:
            try:
                with conversation_store():
                    result = await answer(served.runtime, thread, self.request.messages, self._text,
                                          agent=served.agent)
            except RunnerError as exc:  # after the headers: the error is an event the client raises
                await self._event(error_body(str(exc), type="server_error"))
                return
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):  # heard only when the agent is stopping
                    await self._event(error_body(STOPPING, type="server_error", code="stopping"))
                    await self._end()
                raise
            await self._chunk({}, finish_reason=result.finish_reason)
            if self.request.include_usage:
                await self._event({**self._head(), "choices": [], "usage": result.usage.json()})
        finally:
            with anyio.CancelScope(shield=True):
                await self._end()

    def _head(self) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model}

    async def _text(self, text: str) -> None:
        await self._chunk({"content": text})

    async def _chunk(self, delta: dict[str, Any], *, finish_reason: str | None = None) -> None:
        chunk = {**self._head(), "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        if self.request.include_usage:
            chunk["usage"] = None
        await self._event(chunk)

    async def _event(self, data: dict[str, Any]) -> None:
        await self.send({"type": "http.response.body", "body": f"data: {json.dumps(data)}\n\n".encode(),
                         "more_body": True})

    async def _end(self) -> None:
        if not self._ended:
            self._ended = True
            await self.send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def _completion(request: ChatRequest, model: str, result: Answer) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.text},
                     "finish_reason": result.finish_reason}],
        "usage": result.usage.json(),
    }


async def _ignore(text: str) -> None:
    return None


def _allow(method: str, allowed: str) -> None:
    if method != allowed:
        raise ApiRequestError(f"method {method} is not allowed here: use {allowed}", status=405,
                              code="method_not_allowed")


async def _body(receive: Receive) -> bytes | None:
    """The request's body (at most MAX_BODY bytes: past that, 413); None if the caller went away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise ApiRequestError(f"the request body is larger than {MAX_BODY} bytes", status=413,
                                  code="request_too_large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _json(send: Send, status: int, body: dict[str, Any], *, thread: str | None = None,
                note: str | None = None) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if thread is not None:
        headers.append((THREAD_HEADER.encode(), thread.encode()))
    headers += _note_header(note)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _note_header(note: str | None) -> list[tuple[bytes, bytes]]:
    """The X-MCP-Run-Note header of ``note`` (none without one): printable ASCII, as a header must be."""
    if note is None:
        return []
    text = "".join(char if " " <= char <= "~" else "?" for char in note)
    return [(NOTE_HEADER.encode(), text.encode("ascii"))]


async def _cancel_when_gone(receive: Receive, call: anyio.CancelScope) -> None:
    """Cancel ``call`` once its caller disconnects (the body is read: what comes next is that)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    call.cancel()
