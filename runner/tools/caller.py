"""A catalog tool's call path: argument validation, the server call with its timeout, fallbacks
on transient failures, resource tools, progress, and conversion of the result.

:class:`ToolCalls` is the half of :class:`runner.tools.catalog.ToolCatalog` that calls; the catalog
builds the entries it calls. Failures meant for the model are raised as :class:`ToolError`.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from mcp import types
from mcp.shared.dispatcher import ProgressFnT

from runner import telemetry
from runner.errors import ErrorKind, ServerClosedError, ServerError, ToolError
from runner.events import EventSink, ToolProgress
from runner.manifest import Manifest
from runner.servers.inbound_requests import Ask, CallEvents, call_events
from runner.tools.arguments import fill_defaults, format_problems, validate_arguments
from runner.tools.asking import Answer, Answered, call_answering
from runner.tools.content import ToolOutput, convert_result
from runner.tools.suggest import unknown_tool_text

if TYPE_CHECKING:
    from langchain_core.messages import ToolMessage

    from runner.tools.catalog import CatalogEntry

logger = logging.getLogger(__name__)

READ_RESOURCE, LIST_RESOURCES = "read_resource", "list_resources"
RESOURCE_TOOLS = (READ_RESOURCE, LIST_RESOURCES)


class Connection(Protocol):
    """What the catalog needs of a server connection (runner.servers.ServerConnection)."""

    key: str

    # Read-only, so a connection that narrows them (a Literal status, a ServerError) fits.
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> Exception | None: ...
    @property
    def tools(self) -> list[types.Tool]: ...
    @property
    def resources(self) -> list[types.Resource]: ...
    @property
    def resource_templates(self) -> list[types.ResourceTemplate]: ...

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, ask: Ask | None = None,
        progress: ProgressFnT | None = None, events: CallEvents | None = None,
    ) -> types.CallToolResult: ...
    async def read_resource(self, uri: str) -> types.ReadResourceResult: ...


ToolCall = Callable[[str, dict[str, Any]], Awaitable[ToolOutput]]
# Wraps every call the model makes: gets the tool's name, the arguments and the catalog's own call.
ToolCallHook = Callable[[str, dict[str, Any], ToolCall], Awaitable[ToolOutput]]


@dataclass(frozen=True)
class FallbackEvent:
    """Passed to a server's ``on_fallback`` hook before the call is retried elsewhere."""

    server: str
    fallback: str
    tool: str
    arguments: dict[str, Any]
    error: ServerError


class ToolCalls:
    """Calls the catalog's tools; the catalog provides the attributes declared here."""

    manifest: Manifest
    connections: Mapping[str, Connection]
    provider: str
    entries: dict[str, CatalogEntry]
    call_hook: ToolCallHook | None
    answer: Answer | None
    progress_sink: Callable[[], EventSink | None]

    def _open_calls(self, fallback_hooks: dict[str, Callable[[FallbackEvent], Any]]) -> None:
        self._in_flight: Counter[str] = Counter()
        self._calls_ended = anyio.Event()
        self._hooks = fallback_hooks

    def down(self) -> dict[str, str]:
        """The manifest's servers that are not running, with why (for error messages)."""
        found = {}
        for key in self.manifest.servers:
            connection = self.connections.get(key)
            if connection is None:
                found[key] = "not running"
            elif connection.status == "failed":
                found[key] = f"failed: {connection.error}" if connection.error else "failed"
        return found

    async def run_tool_call(self, call: Mapping[str, Any]) -> ToolMessage | None:
        """Answer a model's tool call as the catalog's LangChain tool would, without LangChain's
        per-call machinery (callback managers, config merging, signature inspection), which costs
        more than the server call itself; None for a tool that is not a server's (a local tool, or
        none): those go through their LangChain tool. Raises what the tool would raise."""
        entry = self.entries.get(call["name"])
        if entry is None or entry.origin.server is None:
            return None
        message = _tool_message or _import_tool_message()
        output = await self._hooked_call(entry.name, dict(call["args"]))
        content: str | list[str | dict[Any, Any]] = (
            output.content if isinstance(output.content, str) else list(output.content)
        )
        return message(content, artifact=output.artifact, tool_call_id=call["id"], name=entry.name,
                       status="success")

    async def _hooked_call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        if self.call_hook is None:
            return await self.call(name, arguments)
        return await self.call_hook(name, arguments, self.call)

    def argument_problems(self, name: str, arguments: dict[str, Any]) -> list[str]:
        """Why ``call`` would refuse ``arguments`` for tool ``name`` without calling it, each as
        ``path: message`` (:func:`problem_lines` words them for a person); empty when they fit
        the tool's input schema, or when it has none to check against (not a server's tool)."""
        entry = self.entries.get(name)
        if entry is None or entry.origin.server is None or entry.definition is None:
            return []
        schema = entry.definition.input_schema
        return validate_arguments(schema, fill_defaults(schema, arguments))

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call tool ``name`` the way the agent does; raises ToolError with text for the model."""
        entry = self.entries.get(name)
        if entry is None:
            down = "".join(f" Server '{key}' is down ({why})." for key, why in sorted(self.down().items()))
            raise ToolError(unknown_tool_text(name, self.entries) + down)
        server, original = entry.origin
        if server is None:
            content = await entry.tool.ainvoke(arguments)
            return ToolOutput(content if isinstance(content, str | list) else str(content), None, False)
        if original in RESOURCE_TOOLS and entry.definition is None:
            return await self._resource_call(server, original, arguments)
        assert entry.definition is not None
        arguments = fill_defaults(entry.definition.input_schema, arguments)
        if problems := validate_arguments(entry.definition.input_schema, arguments):
            raise ToolError(f"invalid arguments for {name}:\n{format_problems(problems)}")
        sink = self.progress_sink()
        progress = _progress_reporter(sink, name, server)
        events = call_events(sink, name, server)
        if self.answer is None:  # no one to ask: each question is declined at once (no relay)
            answered = Answered()
            result = await self._call_with_fallbacks(server, original, arguments, answered.decline, progress,
                                                     events)
        else:
            result, answered = await call_answering(
                lambda ask: self._call_with_fallbacks(server, original, arguments, ask, progress, events),
                self.answer,
            )
        spec = self.manifest.servers[server]
        assert spec.max_output_chars is not None
        output = convert_result(result, max_output_chars=spec.max_output_chars, provider=self.provider)
        if note := answered.note():  # the model hears why the server got no input
            output = output.with_note(note)
        if output.is_error:
            raise ToolError(output.content if isinstance(output.content, str) else str(output.content))
        return output

    async def _call_with_fallbacks(
        self, server: str, tool: str, arguments: dict[str, Any], ask: Ask, progress: ProgressFnT | None,
        events: CallEvents | None = None,
    ) -> types.CallToolResult:
        current = server
        seen = {server}
        while True:
            connection = self.connections.get(current)
            try:
                if connection is None:  # removed (a required server failed at reload): transient
                    raise ServerClosedError(current, "is not running")
                self._in_flight[current] += 1
                try:
                    if telemetry.current() is None:
                        return await connection.call_tool(tool, arguments, ask=ask, progress=progress,
                                                          events=events)
                    return await telemetry.mcp_tool_call(connection, tool, partial(
                        connection.call_tool, tool, arguments, ask=ask, progress=progress, events=events))
                finally:
                    self._in_flight[current] -= 1
                    self._calls_ended.set()
            except ServerError as exc:
                fallback = self.manifest.servers[current].fallback
                if exc.kind is not ErrorKind.TRANSIENT or fallback is None or fallback in seen:
                    raise ToolError(f"{tool} failed: {exc}") from exc
                logger.warning("%s: %s failed, falling back to %s: %s", current, tool, fallback,
                               str(exc).removeprefix(f"{current}: "))
                await self._before_fallback(FallbackEvent(current, fallback, tool, arguments, exc))
                seen.add(fallback)
                current = fallback

    async def drained(self, servers: set[str]) -> None:
        """Wait until no call made through this catalog is in flight on ``servers``."""
        while any(self._in_flight[server] for server in servers):
            self._calls_ended = anyio.Event()
            await self._calls_ended.wait()

    async def _before_fallback(self, event: FallbackEvent) -> None:
        telemetry.fallback(event)
        hook = self._hooks.get(event.server)
        if hook is None:
            return
        outcome = hook(event)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome is False:
            raise ToolError(f"{event.tool} failed: {event.error} (fallback to {event.fallback} declined)")

    async def _resource_call(self, server: str, which: str, arguments: dict[str, Any]) -> ToolOutput:
        connection = self.connections[server]
        spec = self.manifest.servers[server]
        assert spec.max_output_chars is not None
        if which == LIST_RESOURCES:
            lines = [f"{r.uri} — {r.name}" + (f": {r.description}" if r.description else "")
                     for r in connection.resources]
            lines += [f"{t.uri_template} (template) — {t.name}" for t in connection.resource_templates]
            text = "\n".join(lines) or f"the '{server}' server offers no resources"
            return ToolOutput(text, None, False)
        uri = arguments.get("uri")
        if not isinstance(uri, str) or not uri:
            raise ToolError("read_resource needs a 'uri' string")
        try:
            result = await connection.read_resource(uri)
        except ServerError as exc:
            raise ToolError(f"cannot read {uri}: {exc}") from exc
        blocks: list[types.ContentBlock] = [
            types.EmbeddedResource(type="resource", resource=contents) for contents in result.contents
        ]
        wrapped = types.CallToolResult(content=blocks)
        return convert_result(wrapped, max_output_chars=spec.max_output_chars, provider=self.provider)


# LangChain's ToolMessage, imported by the first graph call: listing and calling never need
# LangChain, and the calls after the first pay no import statement.
_tool_message: type[ToolMessage] | None = None


def _import_tool_message() -> type[ToolMessage]:
    global _tool_message
    from langchain_core.messages import ToolMessage

    _tool_message = ToolMessage
    return ToolMessage


def progress_text(event: ToolProgress) -> str:
    """``2/4 (50%) message`` for a ``progress`` event (``2 message`` without a total)."""
    done, total = event["progress"], event["total"]
    amount = f"{done:g}/{total:g} ({done / total:.0%})" if total else f"{done:g}"
    return f"{amount} {event['message']}" if event["message"] else amount


def progress_summary(event: ToolProgress) -> str:
    """``tool: 2/4 (50%) message`` for a ``progress`` event: what the chat and ``serve`` say of it."""
    return f"{event['tool']}: {progress_text(event)}"


def _progress_reporter(
    sink: EventSink | None, name: str, server: str
) -> ProgressFnT | None:
    """What passes the call's progress to the sink; None where no one listens, so the request
    carries no progress token and the server has no progress to send (a ``max_timeout`` call
    still asks for it: progress keeps it alive)."""
    if sink is None:
        return None
    # Notifications arrive in the SDK's task; the sink (a graph's stream) needs the caller's context.
    caller = contextvars.copy_context()

    async def report(progress: float, total: float | None, message: str | None) -> None:
        caller.run(sink, ToolProgress(type="progress", tool=name, server=server, progress=progress,
                                      total=total, message=message))

    return report
