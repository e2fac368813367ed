"""The agent as an MCP server (``mcp-run serve``): one running agent answers many callers.

    await serve_agent("agent.yaml", ServeOptions(http=parse_address("127.0.0.1:8000"), token=...))

The agent starts once (its MCP servers, its model, its checkpointer) and every conversation
shares it: :mod:`runner.hosting.mcp.conversations` orders the turns (per thread, bounded) and
reads threads back, :mod:`runner.hosting.mcp.relayed_questions` puts the agent's questions to the caller,
:mod:`runner.hosting.mcp.handlers` offers the ``ask`` tool (:mod:`runner.hosting.mcp.ask`), the prompt
commands and the threads (:mod:`runner.hosting.mcp.change_notices` tells 2025-11-25 callers when they
change), and :mod:`runner.hosting.mcp.http_wire` carries it over stdio or streamable HTTP. With
``watch`` the manifest is reloaded on every edit (:func:`runner.agent.reload.watch_and_reload`).
With ``a2a``, the HTTP server also answers A2A callers under ``/a2a`` (:mod:`runner.hosting.a2a_api`),
their turns ordered by the same scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from starlette.types import ASGIApp

from runner.agent.host import Host
from runner.agent.reload import watch_and_reload
from runner.agent.runtime import load_agent
from runner.errors import ServeError
from runner.events import Listening, ReloadEvent, ServeEvent, ServingStdio
from runner.hosting.callers import NO_CALLERS, Callers
from runner.hosting.mcp.ask import ASK_TOOL, DEFAULT_ANSWER_WITHIN
from runner.hosting.mcp.conversations import (
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_TURNS,
    THREAD_SCHEME,
    THREAD_TEMPLATE,
    TurnScheduler,
)
from runner.hosting.mcp.handlers import AgentService
from runner.hosting.mcp.http_wire import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    MCP_PATH,
    Address,
    Sessions,
    bind,
    check_binding,
    http_url,
    parse_address,
    serve_http,
)
from runner.hosting.mcp.stdio_wire import serve_stdio

__all__ = [
    "ASK_TOOL",
    "DEFAULT_ANSWER_WITHIN",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "THREAD_SCHEME",
    "THREAD_TEMPLATE",
    "Address",
    "AgentService",
    "Callers",
    "ServeOptions",
    "Sessions",
    "TurnScheduler",
    "check_binding",
    "parse_address",
    "serve_agent",
]

Events = Callable[[ServeEvent], None]


@dataclass(frozen=True)
class ServeOptions:
    """How to serve: ``http`` None means stdio. ``token`` is required by every HTTP request; or
    ``callers``, each named by its own token (:mod:`runner.hosting.callers`), not both.
    ``sessions``: how long 2025-11-25 callers' HTTP sessions last idle, and how many may be open."""

    http: Address | None = None
    token: str | None = None
    callers: Callers = NO_CALLERS
    a2a: bool = False  # A2A beside MCP on the HTTP server (runner.hosting.a2a_api), under /a2a
    allow_remote: bool = False
    stateless: bool = False
    watch: bool = False
    max_turns: int = DEFAULT_MAX_TURNS
    max_queued: int = DEFAULT_MAX_QUEUED
    answer_within: float = DEFAULT_ANSWER_WITHIN  # seconds a caller has to answer a question
    sessions: Sessions = Sessions()


async def serve_agent(path: str | Path, options: ServeOptions, on_event: Events = lambda event: None, *,
                      hurry: anyio.Event | None = None, input_ended: anyio.Event | None = None) -> None:
    """Serve the agent of manifest ``path`` until the client goes away (stdio) or until cancelled.

    Cancelled, it stops gracefully (running turns answered that the agent is stopping, open HTTP
    requests given time to finish); once ``hurry`` is set it waits for no turn or request. Over
    stdio, ``input_ended`` is set when the client closes stdin (from then on it stops on its own).

    ``on_event`` hears ``listening`` (with the HTTP ``url``), ``ready`` (stdio), and with
    ``watch`` the ``reload`` and ``reload_error`` events of :func:`runner.agent.reload.watch_and_reload`.
    The agent's servers are stopped on the way out, however it ends.
    """
    sock = None
    if options.token and options.callers:
        raise ServeError("serve with one token (--token-env) or with callers' tokens (--tokens-file, "
                         "MCP_RUN_TOKEN_<CALLER>), not both")
    callers = options.callers or Callers.one(options.token)
    if options.http is not None:
        try:
            check_binding(options.http, allow_remote=options.allow_remote, token=callers)
        except ValueError as exc:
            raise ServeError(str(exc)) from exc
        sock = bind(options.http)  # before the servers start: a taken port fails at once
    try:
        if options.a2a:  # its package missing fails here, before the servers start
            from runner.hosting import a2a_api

        async with load_agent(path, host=Host()) as runtime:
            service = AgentService(runtime, TurnScheduler(max_turns=options.max_turns,
                                                          max_queued=options.max_queued),
                                   stateless=options.stateless, answer_within=options.answer_within)
            async with anyio.create_task_group() as group:
                group.start_soon(service.announce_changes)
                if options.watch:
                    watching = anyio.Event()
                    group.start_soon(partial(watch_and_reload, runtime, partial(_reloaded, service, on_event),
                                             stop=anyio.Event(), ready=watching))
                    await watching.wait()  # edits from here on are seen
                if sock is None:
                    on_event(ServingStdio(type="ready", name=runtime.manifest.name, transport="stdio"))
                    await serve_stdio(service.server, on_stop=service.stop, hurry=hurry,
                                      input_ended=input_ended)
                else:
                    # The OpenAI-compatible API beside MCP: the agent is the model of its name. It
                    # uses this package's conversations: imported here, where both are loaded.
                    from runner.hosting.chat_completions import (
                        API_PREFIX,
                        ChatCompletions,
                        served_agents,
                        unauthorized,
                    )

                    api = ChatCompletions(lambda: served_agents(runtime), service.scheduler)
                    also: dict[str, ASGIApp] = {API_PREFIX: api}
                    stops = [service.stop, api.stop]
                    listening = Listening(type="listening", url="", name=runtime.manifest.name)
                    if options.a2a:
                        url = http_url(sock).removesuffix(MCP_PATH) + a2a_api.A2A_PATH
                        app, a2a_turns = a2a_api.a2a_app(runtime, service.scheduler, url,
                                                           bearer=bool(callers))
                        also[a2a_api.A2A_PATH] = app
                        stops.append(a2a_turns.stop)
                        listening["a2a"] = a2a_api.card_url(url)
                    await serve_http(service.server, sock, callers=callers, stateless=options.stateless,
                                     sessions=options.sessions, also=also,
                                     refusals={API_PREFIX: unauthorized()},
                                     on_ready=lambda url: on_event(listening | {"url": url}),
                                     on_stop=partial(_stop_all, stops), hurry=hurry)
                group.cancel_scope.cancel()
    finally:
        if sock is not None:
            sock.close()


async def _stop_all(stops: list[Callable[[], Coroutine[Any, Any, None]]]) -> None:
    """Stop the turns of every API at once."""
    async with anyio.create_task_group() as group:
        for stop in stops:
            group.start_soon(stop)


def _reloaded(service: AgentService, on_event: Events, event: ReloadEvent) -> None:
    if event["type"] == "reload":
        service.lists_may_have_changed()
    on_event(event)
