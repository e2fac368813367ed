"""A local OpenAI-compatible Chat Completions server for tests: loopback only, scripted per request.

    def test_x(provider_server: ProviderServer, tmp_path: Path) -> None:
        provider_server.script(Failure(429, retry_after="2"), Reply("Hello."))
        write_manifest(tmp_path, {}, model=provider_server.model(retries={"max_attempts": 2}))
        ...
        assert len(provider_server.requests) == 2

The ``provider_server`` fixture (registered in conftest.py) starts it on a free port, sets the API
key variable its :meth:`ProviderServer.model` entry names (child processes inherit it), and stops
it when the test ends, failed or not. Each request to ``POST /v1/chat/completions`` takes the next
scripted answer, in order; a request with nothing left to take gets a 500 saying so, so a test that
scripted too little fails visibly. Answers:

    Reply(text, tool_calls=[("name", {...})], json={...}, usage=Usage(...), delay=0, chunk_delay=0)
        a completion; ``json`` is the content of a structured answer (``response_format``);
        streamed (``"stream": true``) as chunks, with ``usage`` in a last chunk when the request
        asks for it (``stream_options.include_usage``); ``delay``: seconds before answering,
        ``chunk_delay``: seconds between two chunks of a streamed answer
    Failure(status, retry_after=None)   an error status (429, 500, 503...), with Retry-After
    Malformed(body)                     a 200 whose body is not the JSON it claims to be
    Cut(reply, after=2)                 a streamed reply whose connection drops after ``after``
                                        chunks (a plain request: half of the body, then the drop)

Every request is recorded (:class:`Recorded`: headers, parsed body, size in bytes), so a test can
assert how many calls were made (retries), what they carried (tools, response_format, messages)
and how large they were (context management). The server is plain asyncio in a thread of its own:
the dropped connection is a real abort, not an exception inside a framework.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

API_KEY_ENV = "PROVIDER_STUB_API_KEY"
API_KEY = "sk-provider-stub-0123456789"
START_LIMIT = 10.0  # seconds the server may take to listen
STOP_LIMIT = 10.0  # seconds its thread may take to end
WAIT_LIMIT = 60.0  # seconds wait_for_requests waits at most


@dataclass(frozen=True)
class Usage:
    """Token counts of an answer, as OpenAI reports them (cached and reasoning in the details)."""

    prompt_tokens: int = 12
    completion_tokens: int = 5
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens, "audio_tokens": 0},
        }


@dataclass(frozen=True)
class Reply:
    """One completion: text, tool calls, or a structured (``json``) answer."""

    text: str = ""
    tool_calls: Sequence[tuple[str, dict[str, Any]]] = ()
    json: Any = None
    usage: Usage | None = field(default_factory=Usage)
    delay: float = 0.0
    chunk_delay: float = 0.0  # seconds between two chunks of a streamed answer
    finish_reason: str | None = None

    @property
    def content(self) -> str:
        return json.dumps(self.json) if self.json is not None else self.text

    @property
    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


@dataclass(frozen=True)
class Failure:
    """An error status with OpenAI's error body; ``retry_after`` (seconds or an HTTP date) is sent
    as the Retry-After header."""

    status: int = 500
    retry_after: str | None = None
    message: str = "scripted failure"


@dataclass(frozen=True)
class Malformed:
    """A 200 answer whose JSON body is broken."""

    body: str = '{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"ind'


@dataclass(frozen=True)
class Cut:
    """``reply`` begins, then the connection is dropped after ``after`` chunks. ``closed``: the
    stream's body is not chunked but ends where the connection does, and it is closed cleanly
    (nothing tells the client the answer was cut, but the missing finish_reason and [DONE])."""

    reply: Reply = field(default_factory=lambda: Reply("This answer will never be finished."))
    after: int = 2
    closed: bool = False


Answer = Reply | Failure | Malformed | Cut


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: Any  # the parsed JSON (None when it was not JSON)
    size: int  # bytes of the body
    at: float  # time.monotonic() when it arrived

    @property
    def streamed(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


class ProviderServer:
    """The running server: script answers, read the requests it got."""

    def __init__(self) -> None:
        self._answers: list[Answer] = []
        self.requests: list[Recorded] = []
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="provider-stub", daemon=True)
        self._failure: BaseException | None = None
        self.port = 0

    # -- for tests ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *answers: Answer) -> None:
        """Queue ``answers``; each request takes the next one."""
        with self._changed:
            self._answers.extend(answers)

    def model(self, name: str = "gpt-stub", **settings: Any) -> dict[str, Any]:
        """The manifest's ``model`` entry for this server (``settings``: more keys of it)."""
        return {"id": f"openai:{name}", "base_url": self.base_url, "api_key_env": API_KEY_ENV, **settings}

    def completions(self) -> list[Recorded]:
        """The requests to ``/chat/completions``, in order."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def wait_for_requests(self, count: int, limit: float = WAIT_LIMIT) -> list[Recorded]:
        """The requests once there are ``count`` (AssertionError after ``limit`` seconds)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, limit):
                raise AssertionError(f"{len(self.requests)} request(s) came, not {count}")
            return list(self.requests)

    # -- lifetime -------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(START_LIMIT):
            raise RuntimeError("the provider stub did not start listening")
        if self._failure is not None:
            raise RuntimeError("the provider stub could not start") from self._failure

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(STOP_LIMIT)
        if self._thread.is_alive():
            raise RuntimeError("the provider stub did not stop")

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start() or seen in the test's failure
            self._failure = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        handlers: set[asyncio.Task[None]] = set()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            handlers.add(task)
            try:
                await self._connection(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass  # the client went away (a timeout on its side): nothing to answer
            finally:
                handlers.discard(task)
                writer.close()

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for task in list(handlers):  # slow answers still waiting
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

    # -- HTTP -----------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        recorded = Recorded(method, path, headers, body, len(raw), time.monotonic())
        with self._changed:
            self.requests.append(recorded)
            answer = self._answers.pop(0) if self._answers else None
            self._changed.notify_all()
        if method != "POST" or not path.endswith("/chat/completions"):
            await _send_json(writer, 404, _error(f"no route {method} {path}", "not_found"))
        elif answer is None:
            await _send_json(writer, 500, _error("the provider stub has no scripted answer left", "stub"))
        elif isinstance(answer, Failure):
            extra = {"Retry-After": answer.retry_after} if answer.retry_after is not None else {}
            kind = "rate_limit_exceeded" if answer.status == 429 else "server_error"
            await _send_json(writer, answer.status, _error(answer.message, kind), extra)
        elif isinstance(answer, Malformed):
            await _send(writer, 200, answer.body.encode(), {"Content-Type": "application/json"})
        else:
            reply = answer.reply if isinstance(answer, Cut) else answer
            cut = answer.after if isinstance(answer, Cut) else None
            if reply.delay:
                await asyncio.sleep(reply.delay)
            model = body.get("model", "stub") if isinstance(body, dict) else "stub"
            if recorded.streamed:
                usage_asked = bool((body.get("stream_options") or {}).get("include_usage"))
                chunks = _chunks(model, reply, usage_asked)
                if isinstance(answer, Cut) and answer.closed:
                    await _send_closed_stream(writer, chunks[:answer.after])
                else:
                    await _send_stream(writer, chunks, cut, reply.chunk_delay)
            else:
                payload = json.dumps(_completion(model, reply)).encode()
                if cut is not None:  # half of the body, then the connection drops
                    await _send(writer, 200, payload, {"Content-Type": "application/json"},
                                cut_at=len(payload) // 2)
                else:
                    await _send(writer, 200, payload, {"Content-Type": "application/json"})


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


_REASONS = {200: "OK", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", "Connection: close",
             *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send(writer: asyncio.StreamWriter, status: int, body: bytes, headers: dict[str, str],
                cut_at: int | None = None) -> None:
    writer.write(_head(status, {**headers, "Content-Length": str(len(body))}))
    if cut_at is None:
        writer.write(body)
        await writer.drain()
        return
    writer.write(body[:cut_at])
    await writer.drain()
    writer.transport.abort()


async def _send_json(writer: asyncio.StreamWriter, status: int, payload: dict[str, Any],
                     headers: dict[str, str] | None = None) -> None:
    await _send(writer, status, json.dumps(payload).encode(),
                {"Content-Type": "application/json", **(headers or {})})


async def _send_stream(writer: asyncio.StreamWriter, chunks: list[bytes], cut: int | None,
                       pause: float = 0.0) -> None:
    """Server-sent events in chunked encoding; with ``cut``, the connection drops after that many
    events, without the terminating chunk (as when a proxy or the provider gives up mid-answer)."""
    writer.write(_head(200, {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}))
    for sent, chunk in enumerate(chunks):
        if cut is not None and sent >= cut:
            await writer.drain()
            writer.transport.abort()
            return
        if pause and sent:
            await asyncio.sleep(pause)
        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def _send_closed_stream(writer: asyncio.StreamWriter, chunks: list[bytes]) -> None:
    """Server-sent events in a body that ends with the connection (HTTP/1.0 style), closed cleanly."""
    writer.write(_head(200, {"Content-Type": "text/event-stream"}))
    for chunk in chunks:
        writer.write(chunk)
    await writer.drain()
    writer.close()


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [{"id": f"call_{index}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for index, (name, args) in enumerate(reply.tool_calls)]


def _completion(model: str, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    completion: dict[str, Any] = {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish, "logprobs": None}],
    }
    if reply.usage is not None:
        completion["usage"] = reply.usage.as_json()
    return completion


def _chunks(model: str, reply: Reply, usage_asked: bool) -> list[bytes]:
    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        data = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": choices, **extra}
        return f"data: {json.dumps(data)}\n\n".encode()

    def delta(part: dict[str, Any], finish: str | None = None) -> bytes:
        return event([{"index": 0, "delta": part, "finish_reason": finish}])

    chunks = [delta({"role": "assistant", "content": ""})]
    words = reply.content.split(" ")
    chunks += [delta({"content": word + (" " if n < len(words) - 1 else "")})
               for n, word in enumerate(words) if word]
    for index, call in enumerate(_tool_calls(reply)):
        arguments = call["function"]["arguments"]
        head = {**call, "index": index, "function": {"name": call["function"]["name"], "arguments": ""}}
        chunks.append(delta({"tool_calls": [head]}))
        half = len(arguments) // 2  # arguments arrive in pieces, as from real providers
        for piece in (arguments[:half], arguments[half:]):
            chunks.append(delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(delta({}, reply.finish))
    if usage_asked and reply.usage is not None:  # the last chunk: no choices, the usage
        chunks.append(event([], usage=reply.usage.as_json()))
    chunks.append(b"data: [DONE]\n\n")
    return chunks


@pytest.fixture
def provider_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    """A running :class:`ProviderServer`, stopped when the test ends (failed or not); its API key
    is in the environment under :data:`API_KEY_ENV`."""
    monkeypatch.setenv(API_KEY_ENV, API_KEY)
    server = ProviderServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
