"""The page's HTTP side (an ASGI app on starlette): the page itself, its static files, and the API
its scripts call, every request through the :class:`~runner.web.security.Gate`.

    GET  /?token=T                   the page (T: the process's token, embedded for its scripts)
    GET  /static/NAME                its scripts and styles
    GET  /api/agent                  the agent: name, model, agents, tools
    GET  /api/threads?agent=A        the agent's threads: id and title
    GET  /api/history?agent=A&thread=T   a thread's items, the question it waits on, its turns' timelines,
                                         the agent answering it (after a handoff)
    POST /api/rename {agent, thread, title}; POST /api/delete {agent, thread}
    POST /api/turn {agent, thread, text | answer | resume, stop_question?}   a turn, streamed (SSE)
    GET  /api/notices                reloads and server changes, streamed
    GET  /api/servers                the servers panel (:mod:`runner.web.workbench`)
    POST /api/call {tool, args, answer?}   "try it": a tool called outside the conversation
    GET  /apps/frame/KEY             an MCP App's page, for its frame in a card (:mod:`runner.web.shown_apps`)
    POST /api/app-call {key, name, arguments, answer?}   that app's tools/call

A turn's stream sends ``event: event`` for each event of :mod:`runner.events` (``data``: the event
as ``--json`` prints it), ``event: step`` with what a model step is given
(:mod:`runner.web.steps`), ``event: detail`` with what a tool card shows of each result
(:func:`runner.web.threads.tool_detail`; with ``app`` for a tool with an MCP App), ``event:
failed`` when the turn failed, and ``event: end`` last. A turn that pauses on a question (an
approval, a server's form, a sampling request) ends its stream with the question; the answer,
checked here as the chat checks it (:mod:`runner.web.answers`), resumes it with another ``POST /api/turn``.

The page's Stop closes a turn's request: the turn stops as Ctrl-C stops the chat's
(:class:`TurnResponse`), its timeline kept with its running calls ended as ``stopped``. Stop at a
question leaves it unanswered, as Ctrl-C at the chat's question does: the next message, sent with
``stop_question``, starts a new turn instead of being refused (the call asked about never runs).
``resume`` continues a stopped turn from the step it reached, as the chat's ``/resume`` does.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any, cast

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from langgraph.types import Command
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.agent.resume import CONTINUE, cut_off_turn
from runner.agent.runtime import Runtime
from runner.agent.turns import CLOSE_LIMIT, stream_turn
from runner.errors import RunnerError, ToolError
from runner.hosting.mcp.conversations import THREAD_PATTERN
from runner.manifest import MAIN_AGENT
from runner.web.answers import AnswerError, checked_answer
from runner.web.security import APP_FRAME_PATH, TOKEN_PARAMETER, Gate, security_headers
from runner.web.shown_apps import ApprovalToAsk, ShownApps
from runner.web.steps import STEP_EVENT
from runner.web.threads import (
    Titles,
    answering_agent,
    foreign_thread,
    pending_question,
    thread_history,
    thread_rows,
    tool_details,
    user_messages,
)
from runner.web.timelines import Timelines, call_durations, stopped_entries, timeline_entry
from runner.web.workbench import CallRefused, server_rows, try_call

STATIC = Path(__file__).resolve().parent / "static"
MAX_BODY = 1024 * 1024  # bytes of an API request
TITLE_LIMIT = 200  # characters of a thread's name
NOTICE_BUFFER = 64  # notices a slow page may fall behind before it is dropped (it reconnects)
_THREAD = re.compile(THREAD_PATTERN)


class RefusedRequest(Exception):
    """An API request that cannot be used: its status and the reason, for the page to show."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Notices:
    """What happens outside turns (reloads, a server's changed lists), for each open page."""

    def __init__(self) -> None:
        self._pages: set[MemoryObjectSendStream[dict[str, Any]]] = set()

    def publish(self, notice: dict[str, Any]) -> None:
        for page in list(self._pages):
            try:
                page.send_nowait(notice)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._pages.discard(page)  # too far behind, or gone: its stream ends, the page reconnects
                page.close()

    def close(self) -> None:
        """End every page's stream (the server is stopping)."""
        for page in self._pages:
            page.close()
        self._pages.clear()

    async def follow(self) -> AsyncIterator[dict[str, Any]]:
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](NOTICE_BUFFER)
        self._pages.add(send)
        try:
            async with receive:
                async for notice in receive:
                    yield notice
        finally:
            self._pages.discard(send)
            send.close()


def sse(kind: str, data: Any) -> bytes:
    """One server-sent event."""
    return f"event: {kind}\ndata: {json.dumps(data, default=str)}\n\n".encode()


class TurnResponse(StreamingResponse):
    """A turn's stream. The page's Stop closes the request: Starlette then cancels the stream where
    it waits, which stops the turn as Ctrl-C stops the chat's (its tool calls cancelled on their
    servers, the calls that had started recorded as stopped). A stop that comes while an event is
    being sent leaves the stream suspended: it is closed here, so the turn stops all the same."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            events = cast(AsyncGenerator[bytes, None], self.body_iterator)
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_LIMIT):
                await events.aclose()


class WebApi:
    """The API over one running agent."""

    def __init__(self, runtime: Runtime, titles: Titles, notices: Notices, apps: ShownApps,
                 timelines: Timelines) -> None:
        self.runtime = runtime
        self.titles = titles
        self.timelines = timelines
        self.notices = notices
        self.apps = apps

    def routes(self) -> list[Route]:
        return [
            Route("/api/agent", self.agent, methods=["GET"]),
            Route("/api/threads", self.threads, methods=["GET"]),
            Route("/api/history", self.history, methods=["GET"]),
            Route("/api/rename", self.rename, methods=["POST"]),
            Route("/api/delete", self.delete, methods=["POST"]),
            Route("/api/turn", self.turn, methods=["POST"]),
            Route("/api/notices", self.notices_stream, methods=["GET"]),
            Route("/api/servers", self.servers, methods=["GET"]),
            Route("/api/call", self.call, methods=["POST"]),
            Route("/api/app-call", self.app_call, methods=["POST"]),
            Route(APP_FRAME_PATH + "{key}", self.app_frame, methods=["GET"]),
        ]

    async def app_frame(self, request: Request) -> Response:
        """An app's page for its frame: the key is the credential (a frame's load carries no token)."""
        page = self.apps.page(request.path_params["key"])
        if page is None:
            headers = {"cache-control": "no-store", "x-content-type-options": "nosniff"}
            return PlainTextResponse("no such app frame", status_code=404, headers=headers)
        return Response(page.html, headers=page.headers())

    async def app_call(self, request: Request) -> Response:
        body = await _json_body(request)
        key, name, arguments = body.get("key"), body.get("name"), body.get("arguments", {})
        if not isinstance(key, str) or self.apps.page(key) is None:
            raise RefusedRequest("key: no app is shown under this key (reopen its thread)", status=404)
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise RefusedRequest("expected a tool name and its arguments as an object")
        try:
            return JSONResponse({"result": await self.apps.call(key, name, arguments, body.get("answer"))})
        except ApprovalToAsk as asking:
            return JSONResponse({"approval": asking.asked})
        except (ToolError, AnswerError) as exc:
            raise RefusedRequest(str(exc), status=422) from exc

    async def servers(self, request: Request) -> Response:
        return JSONResponse({"servers": server_rows(self.runtime), "warnings": self.apps.warnings},
                            headers={"cache-control": "no-store"})

    async def call(self, request: Request) -> Response:
        body = await _json_body(request)
        try:
            return JSONResponse(await try_call(self.runtime, body.get("tool"), body.get("args", {}),
                                               body.get("answer")))
        except CallRefused as exc:
            raise RefusedRequest(str(exc), status=422) from exc

    async def agent(self, request: Request) -> Response:
        runtime = self.runtime
        manifest = runtime.manifest
        agents = [{"name": MAIN_AGENT, "description": manifest.description or ""}]
        agents += [{"name": name, "description": getattr(spec, "description", None) or ""}
                   for name, spec in manifest.agents.items() if name in runtime.agents]
        tools = [{"name": entry.name, "server": entry.origin.server, "original": entry.origin.name,
                  "description": entry.description} for entry in runtime.catalog.entries.values()]
        return JSONResponse({"name": manifest.name, "model": manifest.model.id, "agents": agents,
                             "tools": tools})

    async def threads(self, request: Request) -> Response:
        agent = self._agent(request.query_params.get("agent"))
        return JSONResponse({"threads": await thread_rows(self.runtime, agent, self.titles)})

    async def history(self, request: Request) -> Response:
        agent = self._agent(request.query_params.get("agent"))
        thread = await self._own_thread(agent, request.query_params.get("thread"))
        items = await thread_history(self.runtime, agent, thread)
        timelines = self.timelines.read(agent, thread)
        durations = call_durations(timelines)
        for item in items:
            if item["type"] == "tool_result" and item["id"] in durations:
                item["ms"] = durations[item["id"]]
            if item["type"] == "tool_result" and item.get("detail") is not None:
                await self._with_app(item["name"], item["detail"], item["status"])
        question = await pending_question(self.runtime, agent, thread)
        answering = await answering_agent(self.runtime, agent, thread)
        return JSONResponse({"items": items, "question": question, "timelines": timelines,
                             "answering": answering}, headers={"cache-control": "no-store"})

    async def rename(self, request: Request) -> Response:
        body = await _json_body(request)
        agent = self._agent(body.get("agent"))
        thread = await self._own_thread(agent, body.get("thread"))
        title = body.get("title")
        if not isinstance(title, str) or len(title) > TITLE_LIMIT:
            raise RefusedRequest(f"title: expected text of at most {TITLE_LIMIT} characters")
        self.titles.set(agent, thread, " ".join(title.split()) or None)
        return JSONResponse({"ok": True})

    async def delete(self, request: Request) -> Response:
        body = await _json_body(request)
        agent = self._agent(body.get("agent"))
        thread = await self._own_thread(agent, body.get("thread"))
        checkpointer = self.runtime.checkpointer
        if checkpointer is not None:
            stored = self.runtime.config(thread, agent=agent)["configurable"]["thread_id"]
            await checkpointer.adelete_thread(stored)
        self.titles.set(agent, thread, None)
        self.timelines.forget(agent, thread)
        return JSONResponse({"ok": True})

    async def turn(self, request: Request) -> Response:
        body = await _json_body(request)
        agent = self._agent(body.get("agent"))
        thread = await self._own_thread(agent, body.get("thread"))
        pending = await pending_question(self.runtime, agent, thread)
        message: str | Command
        if "answer" in body:
            if pending is None:
                raise RefusedRequest("this thread waits for no answer", status=409)
            try:
                message = Command(resume=checked_answer(self.runtime, pending, body["answer"]))
            except AnswerError as exc:
                raise RefusedRequest(str(exc), status=422) from exc
        elif "resume" in body:  # the page's Resume, as the chat's /resume
            if body["resume"] is not True:
                raise RefusedRequest("resume: expected true (to continue the thread's stopped turn)")
            if await cut_off_turn(self.runtime, thread, agent=agent) is None:
                raise RefusedRequest("nothing to resume: the thread's last turn ended, or waits for an "
                                     "answer", status=409)
            message = CONTINUE
        else:
            text = body.get("text")
            if not isinstance(text, str) or not text.strip():
                raise RefusedRequest("text: expected the message to send")
            stops = body.get("stop_question", False)
            if not isinstance(stops, bool):
                raise RefusedRequest("stop_question: expected true or false")
            if pending is not None and not stops:
                raise RefusedRequest("this thread waits for an answer to its question first", status=409)
            message = text  # a question stopped in the page: this message starts a new turn instead
        # The turn's position among the thread's messages from the user: its timeline is kept by it.
        sent = await user_messages(self.runtime, agent, thread)
        turn = sent if isinstance(message, str) else max(0, sent - 1)
        return TurnResponse(self._turn_events(agent, thread, message, turn),
                            media_type="text/event-stream", headers={"cache-control": "no-store"})

    async def _turn_events(self, agent: str, thread: str, message: str | Command,
                           turn: int) -> AsyncIterator[bytes]:
        results: dict[str, str] = {}
        statuses: dict[str, str] = {}
        called: dict[str, str] = {}
        timeline: list[dict[str, Any]] = []
        ended = False
        try:
            async with aclosing(stream_turn(self.runtime, message, thread_id=thread, agent=agent)) as events:
                async for event in events:
                    if (entry := timeline_entry(event)) is not None:
                        timeline.append(entry)
                    if event["type"] == "tool_call":
                        called[event["id"]] = event["name"]
                    yield sse("step" if event["type"] == STEP_EVENT else "event", event)
                    if event["type"] == "tool_result":
                        results[event["id"]] = event["name"]
                        statuses[event["id"]] = event["status"]
            ended = True
        except RunnerError as exc:
            ended = True
            yield sse("failed", {"message": f"the turn failed: {exc}"})
        finally:
            if not ended:  # stopped (the page's Stop closed the request): its running calls with it
                timeline += stopped_entries(timeline, called)
            self.timelines.add(agent, thread, turn, timeline)
        if results:
            for call_id, detail in (await tool_details(self.runtime, agent, thread, results)).items():
                await self._with_app(results[call_id], detail, statuses[call_id])
                yield sse("detail", {"id": call_id, **detail})
        yield sse("end", {})

    async def notices_stream(self, request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            yield b": following\n\n"  # the page knows it is connected
            async for notice in self.notices.follow():
                yield sse("event", notice)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store"})

    async def _with_app(self, name: str, detail: dict[str, Any], status: str) -> None:
        """``detail`` with the ``app`` its card mounts, for a tool with an MCP App."""
        app = await self.apps.card_app(name, detail, status)
        if app is not None:
            detail["app"] = app

    async def _own_thread(self, agent: str, value: Any) -> str:
        """The thread id ``value``, of a thread this manifest may open (not another's in the folder)."""
        thread = _thread(value)
        if await foreign_thread(self.runtime, agent, thread):
            raise RefusedRequest(f"thread: {thread} is a conversation of another manifest that keeps its "
                                 "threads in the same store; open it with that manifest", status=404)
        return thread

    def _agent(self, name: Any) -> str:
        name = name or MAIN_AGENT
        if not isinstance(name, str) or name not in self.runtime.agents:
            known = ", ".join(self.runtime.agents)
            raise RefusedRequest(f"agent: no agent {json.dumps(str(name))[:80]} (the agents: {known})",
                                 status=404)
        return name


def _thread(value: Any) -> str:
    if not isinstance(value, str) or not _THREAD.match(value):
        raise RefusedRequest("thread: expected a thread id (letters, digits, '_.:-', at most 128)")
    return value


async def _json_body(request: Request) -> dict[str, Any]:
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise RefusedRequest(f"the request body is larger than {MAX_BODY} bytes", status=413)
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise RefusedRequest(f"the request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise RefusedRequest("the request body must be a JSON object")
    return body


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RefusedRequest)
    return JSONResponse({"error": str(exc)}, status_code=exc.status)


def page(request: Request) -> Response:
    """The page, with the token its scripts send (only to a request that brought it)."""
    token = request.query_params.get(TOKEN_PARAMETER)
    text = (STATIC / "index.html").read_text(encoding="utf-8")
    return HTMLResponse(text.replace("{{token}}", html.escape(token or "", quote=True)),
                        headers={"cache-control": "no-store"})


def web_app(runtime: Runtime, gate: Gate, titles: Titles, notices: Notices, apps: ShownApps,
            timelines: Timelines) -> ASGIApp:
    """The page and its API over ``runtime``, behind ``gate``."""
    api = WebApi(runtime, titles, notices, apps, timelines)
    app = Starlette(routes=[Route("/", page, methods=["GET"]), *api.routes(),
                            Mount("/static", StaticFiles(directory=STATIC), name="static")],
                    exception_handlers={RefusedRequest: _refused})
    return guarded(app, gate)


def guarded(app: ASGIApp, gate: Gate) -> ASGIApp:
    """``app`` behind ``gate``: every answer with the security headers; the page only with the
    token in its address, the API only with the token in its header and from the page's origin."""

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        host = headers.get("host")
        path = scope["path"]
        refusal = gate.host_refusal(host) or gate.origin_refusal(headers.get("origin"), host)
        if refusal is None and path.startswith("/api/"):
            refusal = gate.token_refusal(gate.given_token(headers))
        elif refusal is None and path == "/":
            refusal = gate.token_refusal(_query_token(scope))
        if refusal is not None:
            await _with_headers(JSONResponse({"error": refusal}, status_code=403), host)(scope, receive, send)
            return
        if path.startswith(APP_FRAME_PATH):  # an app's page: its own policy, not the page's
            await app(scope, receive, send)
            return
        await _with_headers(app, host)(scope, receive, send)

    return checked


def _query_token(scope: Scope) -> str | None:
    from urllib.parse import parse_qs

    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(TOKEN_PARAMETER)
    return values[0] if values else None


def _with_headers(app: ASGIApp, host: str | None) -> ASGIApp:
    async def with_headers(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with(message: Message) -> None:
            if message["type"] == "http.response.start":
                added = [(name.encode(), value.encode()) for name, value in security_headers(host)]
                message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        await app(scope, receive, send_with)

    return with_headers

