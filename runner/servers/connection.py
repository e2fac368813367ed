"""``ServerConnection``: one server's catalogue and requests, and a read-only view of its lifecycle.

The connection's session and its lifecycle (status, era, restarts, errors: ``lifecycle``) belong to
its lifetime task (``supervision.supervise``); this module is what everyone else touches: the
lifecycle read through it, the cached catalogue, and the requests. A request waits
(within its timeout) while the server starts or restarts, and every failure leaves here as one of
the errors in ``runner.errors``: ``ServerTimeoutError`` (the SDK cancels the request on the
server), ``ServerClosedError`` (the connection is gone, or the server failed for good),
``ServerRequestError`` (a JSON-RPC error answer, with its code), worded by the table in
``translation``. A tool's ``isError`` result is a result, not an exception.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClientExtension
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from runner import telemetry
from runner.errors import (
    CANCELLED_CODE,
    ServerClosedError,
    ServerError,
    ServerRequestError,
    ServerTimeoutError,
)
from runner.events import CallRetried
from runner.manifest import HttpServerSpec, StdioServerSpec
from runner.servers import lean_calls as calls
from runner.servers import tasks
from runner.servers.inbound_requests import Ask, CallEvents, SamplingPolicy, ServerRequests
from runner.servers.lifecycle import Lifecycle, LifecycleView, Status
from runner.servers.offerings import (
    KINDS,
    Catalogue,
    CatalogueChange,
    CatalogueKind,
    ChangeSignal,
    fetch_catalogue,
)
from runner.servers.protocol_eras import EraMemory
from runner.servers.translation import Boundary, timed_out, translated
from runner.servers.transports.environment import secret_values
from runner.servers.transports.links import Link
from runner.servers.transports.stdio import StderrLog

logger = logging.getLogger(__name__)

ServerSpecType = StdioServerSpec | HttpServerSpec
Publish = Callable[[CatalogueChange], None]
Kinds = set[CatalogueKind] | tuple[CatalogueKind, ...]
URL_ROUNDS = 3  # a call answered "visit this URL first" is made again at most this often
CANCEL_NOTICE_LIMIT = 2.0  # seconds the requests in flight get to tell the server they are cancelled
BACKSTOP_GRACE = 1.0  # the SDK times requests out itself; this only catches a wedged transport write

_Result = TypeVar("_Result")


def _noting(report_on: ProgressFnT, heard: list[bool]) -> ProgressFnT:
    """``report_on``, noting in ``heard`` that some progress came."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        heard.append(True)
        await report_on(progress, total, message)

    return report


class ServerConnection:
    """One server of the fleet. Created by the fleet; its lifetime task owns the session and
    writes the lifecycle, which the connection only reads (``lifecycle``, ``status``, ...)."""

    def __init__(
        self, key: str, spec: ServerSpecType, *, base_dir: Path, state_dir: Path, publish: Publish,
        lifecycle: LifecycleView,
        sampling: SamplingPolicy | None = None, extensions: Sequence[ClientExtension] = (),
    ) -> None:
        self.key = key
        self.spec = spec
        self.base_dir = base_dir
        self._lifecycle = lifecycle
        self.catalogue = Catalogue()
        self.stderr_log = (
            StderrLog(key, state_dir / "logs" / f"{key}.log", secret_values(spec))
            if isinstance(spec, StdioServerSpec) else None
        )
        self.requests = ServerRequests(
            key, spec, base_dir=base_dir, log_path=state_dir / "logs" / f"{key}.log", sampling=sampling,
            extensions=extensions,
        )
        self.eras = EraMemory(state_dir)  # which era to start in: supervision reads and records it
        self.changes = ChangeSignal()
        self._publish = publish
        self._client: Client | None = None
        self._link: Link | None = None
        self.stop_requested = anyio.Event()
        self._in_flight: set[anyio.CancelScope] = set()  # a scope per request, to cancel them on stop
        self._none_in_flight = anyio.Event()  # set (and replaced) when the last one leaves
        self._listing_lock = anyio.Lock()
        self._tools_by_name: tuple[list[types.Tool] | None, dict[str, types.Tool]] = (None, {})
        telemetry.server_status(self, self.status)  # "starting"; the lifetime task reports the rest

    def __repr__(self) -> str:  # specs hold secrets (env, headers): never show them
        return f"<ServerConnection {self.key} {self.spec.transport} {self.status}>"

    # -- lifecycle (written by the lifetime task only) ---------------------------------------

    @property
    def lifecycle(self) -> Lifecycle:
        """The lifecycle now: a frozen snapshot."""
        return self._lifecycle.now

    @property
    def status(self) -> Status:
        return self._lifecycle.now.status

    @property
    def era(self) -> str | None:
        return self._lifecycle.now.era

    @property
    def instructions(self) -> str | None:
        return self._lifecycle.now.instructions

    @property
    def pid(self) -> int | None:
        return self._lifecycle.now.pid

    @property
    def error(self) -> ServerError | None:
        """Why the server is failed (or its last start failed)."""
        return self._lifecycle.now.error

    @property
    def last_incident(self) -> ServerError | None:
        """Why the previous session ended."""
        return self._lifecycle.now.last_incident

    @property
    def sessions(self) -> int:
        """Sessions that finished their handshake."""
        return self._lifecycle.now.sessions

    @property
    def restarts(self) -> int:
        """Restart attempts made."""
        return self._lifecycle.now.restarts

    @property
    def settled(self) -> anyio.Event:
        """Set when the first start is over: ready or failed."""
        return self._lifecycle.settled

    @property
    def finished(self) -> anyio.Event:
        """Set when the lifetime task has ended."""
        return self._lifecycle.finished

    # -- catalogue ---------------------------------------------------------------------------

    @property
    def tools(self) -> list[types.Tool]:
        return self.catalogue.tools

    @property
    def prompts(self) -> list[types.Prompt]:
        return self.catalogue.prompts

    @property
    def resources(self) -> list[types.Resource]:
        return self.catalogue.resources

    @property
    def resource_templates(self) -> list[types.ResourceTemplate]:
        return self.catalogue.resource_templates

    @property
    def log_path(self) -> Path | None:
        """The file holding the server's stderr (stdio servers only)."""
        return self.stderr_log.path if self.stderr_log is not None else None

    def tool_timeout(self, name: str) -> float:
        """The request timeout of tool ``name``: its ``tools.timeouts`` entry, else the server's."""
        assert self.spec.timeout is not None, "specs are resolved against defaults"
        return self.spec.tools.timeouts.get(name, self.spec.timeout)

    # -- requests ----------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: dict,
        *,
        timeout: float | None = None,
        progress: ProgressFnT | None = None,
        ask: Ask | None = None,
        events: CallEvents | None = None,
    ) -> types.CallToolResult:
        """Call tool ``name``; ``progress(progress, total, message)`` receives its progress
        notifications and ``ask`` answers the server's requests for input while the call runs.

        With ``max_timeout`` set, ``timeout`` is the idle limit: each progress notification gives
        the call another ``timeout``, up to ``max_timeout`` in total. A tool that runs as a task
        (``runner.servers.tasks``) reports its statuses to ``events``. A call answered -32042 (a URL
        the user must visit first) is made again once the user has been there, ``URL_ROUNDS`` times
        at most (``ServerRequests.visit``).
        """
        limit = self.tool_timeout(name) if timeout is None else timeout
        rounds = 0
        while True:
            try:
                return await self._call_tool(name, arguments, limit, progress, ask, events)
            except ServerRequestError as exc:
                rounds += 1
                if exc.code != types.URL_ELICITATION_REQUIRED or rounds > URL_ROUNDS:
                    raise
                await self.requests.visit(exc, ask, events, limit)
                if events is not None:
                    events(CallRetried(type="retry", server=self.key,
                                       reason="the user visited the URL the server asked for"))

    async def _call_tool(
        self, name: str, arguments: dict, limit: float, progress: ProgressFnT | None, ask: Ask | None,
        events: CallEvents | None,
    ) -> types.CallToolResult:
        total = self.spec.max_timeout
        setting = f"servers.{self.key}.tools.timeouts.{name} or servers.{self.key}.timeout"
        if self._as_task(name):
            return await self._call_as_task(name, arguments, limit, ask, events, setting)
        if total is None or total <= limit:
            heard: list[bool] = []  # progress came: max_timeout would have let it keep the call alive
            reporter = progress if progress is None or total is not None else _noting(progress, heard)
            try:
                with self.requests.asking(ask, events):
                    return await self._request(
                        f"tools/call {name!r}",
                        limit,
                        lambda client, remaining: calls.call_tool(
                            client, name, arguments, read_timeout_seconds=remaining,
                            progress_callback=reporter,
                            meta=telemetry.trace_meta(),
                        ),
                        setting=setting,
                    )
            except ServerTimeoutError as exc:
                if not heard:
                    raise
                raise timed_out(Boundary(self.key, f"tools/call {name!r}", limit), (
                    f" (set {setting} to allow longer, or servers.{self.key}.max_timeout: a call that "
                    "reports progress then keeps going up to that total)")) from exc
        idle = anyio.CancelScope(deadline=anyio.current_time() + limit)

        report_on = progress  # the parameters below take the names ProgressFnT gives them

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            idle.deadline = anyio.current_time() + limit  # progress shows the call is alive
            if report_on is not None:
                await report_on(progress, total, message)

        with self.requests.asking(ask, events), idle:  # leaving it cancels the request on the server
            return await self._request(
                f"tools/call {name!r}",
                total,
                lambda client, remaining: calls.call_tool(
                    client, name, arguments, read_timeout_seconds=remaining, progress_callback=on_progress,
                    meta=telemetry.trace_meta(),
                ),
                setting=f"servers.{self.key}.max_timeout",
            )
        raise timed_out(
            Boundary(self.key, f"tools/call {name!r}", limit, setting), " without progress"
        )

    def _as_task(self, name: str) -> bool:
        """Whether a call of ``name`` is task-augmented; raises when it has to be and cannot be."""
        tools = self.catalogue.tools
        if self._tools_by_name[0] is not tools:
            self._tools_by_name = (tools, {tool.name: tool for tool in tools})
        tool = self._tools_by_name[1].get(name)
        if tool is None or tool.execution is None:
            return False
        client = self._client  # None while restarting: its last session said it could
        capable = client is None or tasks.server_runs_tasks(client.server_capabilities)
        if why := tasks.unavailable(tool, self.spec.tasks, capable):
            raise ServerRequestError(self.key, f"tools/call {name!r}: {why}", code=types.METHOD_NOT_FOUND)
        return tasks.runs_as_task(tool, self.spec.tasks, capable)

    async def _call_as_task(
        self, name: str, arguments: dict, limit: float, ask: Ask | None, events: CallEvents | None,
        setting: str,
    ) -> types.CallToolResult:
        """A task-augmented call, bounded as a whole: by ``timeout``, or with ``max_timeout`` set,
        by ``max_timeout`` in total and ``timeout`` without an update of its status."""
        total = self.spec.max_timeout
        idle = anyio.CancelScope(deadline=math.inf)
        if total is not None and total > limit:
            idle.deadline = anyio.current_time() + limit
            setting = f"servers.{self.key}.max_timeout"
        else:
            total = limit

        def alive() -> None:  # a new status shows the task is alive
            if idle.deadline != math.inf:
                idle.deadline = anyio.current_time() + limit

        with self.requests.asking(ask, events), idle:  # leaving it cancels the task on the server
            return await self._request(
                f"tools/call {name!r} (task)",
                total,
                lambda client, remaining: tasks.TaskRun(
                    self.key, client.session, name, arguments, events=events, alive=alive
                ).run(anyio.current_time() + remaining),
                setting=setting,
            )
        raise timed_out(
            Boundary(self.key, f"tools/call {name!r} (task)", limit, f"servers.{self.key}.timeout"),
            " without a status change",
        )

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> types.GetPromptResult:
        return await self._request(
            f"prompts/get {name!r}",
            self._default_timeout(),
            lambda client, _: client.get_prompt(name, arguments),
        )

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        return await self._request(
            f"resources/read {uri!r}", self._default_timeout(), lambda client, _: client.read_resource(uri)
        )

    async def refresh(self, kinds: Kinds = KINDS) -> list[CatalogueChange]:
        """List ``kinds`` (default: everything) again now; subscribers get the changes too."""
        return await self._request(
            "refresh", self._default_timeout(), lambda client, _: self.relist(client, kinds)
        )

    async def relist(self, client: Client, kinds: Kinds) -> list[CatalogueChange]:
        """List ``kinds`` on ``client``, update the cache, publish and return the changes."""
        async with self._listing_lock:
            listing = await fetch_catalogue(self.key, client, kinds)
            if client is not self._client:
                return []  # the session ended meanwhile; its successor lists for itself
            return self._apply(listing, kinds)

    def _default_timeout(self) -> float:
        assert self.spec.timeout is not None, "specs are resolved against defaults"
        return self.spec.timeout

    async def _request(
        self,
        what: str,
        timeout: float,
        send: Callable[[Client, float], Awaitable[_Result]],
        *,
        setting: str | None = None,
    ) -> _Result:
        now = anyio.current_time()
        deadline = now + timeout
        client = self._client
        link = self._link

        def session_gone() -> bool:
            return client is not self._client or (link is not None and link.session_expired)

        boundary = Boundary(self.key, what, timeout, setting or f"servers.{self.key}.timeout", session_gone)
        if self.status != "ready" or client is None:
            client = await self._ready_client(boundary, deadline)
            link = self._link
            now = anyio.current_time()
        remaining = max(deadline - now, 0.001)
        with translated(boundary), anyio.CancelScope() as stopping:  # see cancel_requests
            self._in_flight.add(stopping)
            try:
                # A bare scope, not fail_after (a generator context manager): this wraps every request.
                with anyio.CancelScope(deadline=now + remaining + BACKSTOP_GRACE):
                    return await send(client, remaining)
                raise TimeoutError  # the backstop ran out (only its deadline cancels it)
            finally:
                self._in_flight.discard(stopping)
                if not self._in_flight:
                    self._none_in_flight.set()
                    self._none_in_flight = anyio.Event()
        raise ServerRequestError(self.key, f"{what}: cancelled, the server is stopping", code=CANCELLED_CODE)

    async def cancel_requests(self, limit: float = CANCEL_NOTICE_LIMIT) -> None:
        """Cancel the requests in flight and wait (up to ``limit`` seconds) until each has left,
        the SDK having told the server (``notifications/cancelled``): before the server is stopped,
        while that can still reach it. Each cancelled request raises a ``-32003`` error."""
        if not self._in_flight:
            return
        for request in list(self._in_flight):
            request.cancel()
        with anyio.move_on_after(limit, shield=True):
            await self._none_in_flight.wait()

    async def _ready_client(self, boundary: Boundary, deadline: float) -> Client:
        """The live client; waits (until ``deadline``) while the server starts or restarts, but
        not once a restart attempt has failed: the server is down, and the call fails at once
        (ServerClosedError: transient, so a fallback server takes it)."""
        while True:
            if self.status in ("failed", "stopped"):
                error = self.error
                reason = f" ({str(error).removeprefix(f'{self.key}: ')})" if error is not None else ""
                state = "has failed" if self.status == "failed" else "is stopped"
                raise ServerClosedError(self.key, f"{boundary.what}: the server {state}{reason}")
            if self.status == "ready" and self._client is not None:
                return self._client
            if self.status == "restarting" and self.error is not None:  # an attempt failed: it is down
                reason = str(self.error).removeprefix(f"{self.key}: ")
                raise ServerClosedError(
                    self.key, f"{boundary.what}: the server is down ({reason}); mcp-run keeps restarting it"
                )
            changed = self._lifecycle.next_change()
            with anyio.move_on_after(deadline - anyio.current_time()):
                await changed.wait()
            if not changed.is_set():
                raise timed_out(boundary, " waiting for the server to be ready")

    async def wait_for_status(self, *statuses: Status) -> Status:
        """Wait until the status is one of ``statuses`` (bound it with ``anyio.fail_after``)."""
        await self.wait_until(lambda connection: connection.status in statuses)
        return self.status

    async def wait_until(self, condition: Callable[[ServerConnection], bool]) -> None:
        """Wait until ``condition(self)`` holds; it is checked at every status change."""
        await self._lifecycle.wait_until(lambda _: condition(self))

    # -- the session (set by the lifetime task, before it writes the lifecycle) --------------

    def attach(self, client: Client, link: Link, listing: Catalogue) -> None:
        """A session finished its handshake and first listing: its requests go to ``client``."""
        changes = self.catalogue.update(self.key, listing, KINDS)
        if self.sessions:  # after a restart, subscribers hear what differs
            for change in changes:
                self._publish(change)
        self._client, self._link = client, link

    def detach(self) -> None:
        self._client, self._link = None, None

    def forget_offerings(self) -> None:
        """The server is given up on: whatever it offered is gone."""
        self._apply(Catalogue(), KINDS)

    def _apply(self, listing: Catalogue, kinds: Kinds) -> list[CatalogueChange]:
        changes = self.catalogue.update(self.key, listing, kinds)
        for change in changes:
            self._publish(change)
        return changes

    # -- notifications from the session -----------------------------------------------------

    async def on_message(self, message: object) -> None:
        """Legacy-era list_changed notifications (2026 ones arrive through the listen stream)."""
        if isinstance(message, types.ToolListChangedNotification):
            self.changes.mark("tools")
        elif isinstance(message, types.PromptListChangedNotification):
            self.changes.mark("prompts")
        elif isinstance(message, types.ResourceListChangedNotification):
            self.changes.mark("resources")
        elif isinstance(message, types.ElicitCompleteNotification):
            self.requests.on_elicitation_complete(message.params.elicitation_id)
        elif isinstance(message, Exception):
            logger.debug("server %s transport reported %r", self.key, message)

    async def apply_live(self, spec: ServerSpecType) -> None:
        """Settings that need no new session (timeouts, filters, roots): read at each request;
        a change of roots is announced to the live session."""
        self.spec = spec
        client = self._client
        if not self.requests.update(spec) or client is None:
            return
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-07-28 servers receive the roots with each request for them
        boundary = Boundary(self.key, "notifications/roots/list_changed")
        try:
            with translated(boundary), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)  # deprecated in 2026, current in 2025
                await client.session.send_roots_list_changed()
        except ServerClosedError as exc:  # the session is ending; its successor lists anew
            logger.info("server %s", exc)
