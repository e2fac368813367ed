"""A catalog tool's call path: argument validation, the server call with its timeout, fallbacks
on transient failures, resource tools, progress, questions, and conversion of the result.

A :class:`ToolCaller` calls the tools of a :class:`runner.tools.catalog.ToolCatalog` (the catalog
builds and lists them); what a call asks of whoever runs the agent (the answers to a server's
questions, where its progress goes) is its :class:`CallHost`. Failures meant for the model are
raised as :class:`ToolError`.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from mcp import types
from mcp.shared.dispatcher import ProgressFnT

from runner import telemetry
from runner.errors import ErrorKind, ServerClosedError, ServerError, ToolError
from runner.events import CallNotice, CallRetried, EventSink, ToolProgress
from runner.servers.inbound_requests import Ask, CallEvents, Question, Reply, call_events
from runner.tools.arguments import fill_defaults, format_problems, validate_arguments
from runner.tools.asking import Answered, call_answering
from runner.tools.content import ToolOutput, convert_result
from runner.tools.filters import is_selected
from runner.tools.naming import generate_name
from runner.tools.policy import PolicyDecision
from runner.tools.suggest import close_names, unknown_tool_text
from runner.tools.visibility import offered_to_model

if TYPE_CHECKING:
    from langchain_core.messages import ToolMessage

    from runner.tools.catalog import ToolCatalog

logger = logging.getLogger(__name__)

READ_RESOURCE, LIST_RESOURCES = "read_resource", "list_resources"
# Where a tool message keeps the times its call was made again (``CallRetried`` notices), so a
# thread's history can show them (the web page's tool cards): its ``response_metadata``, which no
# provider is sent.
RETRIES_KEY = "mcp_run_retries"
RESOURCE_TOOLS = (READ_RESOURCE, LIST_RESOURCES)

"""Where a call's ``progress`` events go (a graph run's custom stream, a terminal line)."""


class CallHost(Protocol):
    """What a tool call asks of whoever runs the agent (:class:`runner.agent.host.AgentHost`
    extends it with what the rest of the agent asks)."""

    @property
    def answers_questions(self) -> bool:
        """False: a server's questions during a call are declined at once, and the model told why."""
        ...

    async def answer(self, server: str, question: Question) -> Reply:
        """The answer to server ``server``'s question, in the calling task; may raise (a
        ``GraphInterrupt``) to pause the graph until the answer comes."""
        ...

    def progress_sink(self) -> EventSink | None:
        """Where the calling task's progress goes (None: nowhere; the server is not asked for any)."""
        ...


class NoHost:
    """A host that answers nothing and hears no progress: a catalog's calls made on their own."""

    answers_questions = False

    async def answer(self, server: str, question: Question) -> Reply:
        return await Answered().decline(server, question)

    def progress_sink(self) -> EventSink | None:
        return None


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


# The id of the model's tool call being answered (run_tool_call), for the events of its policy decision.
_call_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("policy_call_id", default=None)

ToolCall = Callable[[str, dict[str, Any]], Awaitable[ToolOutput]]
# Wraps every call the model makes: gets the tool's name, the arguments and the catalog's own call.
ToolCallHook = Callable[[str, dict[str, Any], ToolCall], Awaitable[ToolOutput]]


@dataclass(frozen=True)
class UnlistedTool:
    """A tool a running server does not list, named as the catalog would name it: the model is
    never offered it, but ``mcp-run call`` and ``/call`` may reach it (the SDK's client does)."""

    name: str  # as asked for: <server><separator><tool>
    server: str
    tool: str  # the server's name for it

    def warning(self) -> str:
        return unlisted_warning(self.name)


def unlisted_warning(name: str) -> str:
    """What ``mcp-run call`` and ``/call`` say before calling a tool its server does not list."""
    return (f"warning: the server does not list a tool '{name}'; calling it anyway (its arguments "
            "are not checked, and the model is never offered it)")


@dataclass(frozen=True)
class FallbackEvent:
    """Passed to a server's ``on_fallback`` hook before the call is retried elsewhere."""

    server: str
    fallback: str
    tool: str
    arguments: dict[str, Any]
    error: ServerError


class ToolCaller:
    """Calls the tools of the current catalog the way the agent does.

    ``catalog`` gives the catalog as it is now (a reload replaces it; a call keeps the one it
    started with); ``host`` answers servers' questions and hears progress; ``hook`` sees every
    call the model makes (recording, replaying, tracing them).
    """

    def __init__(
        self, catalog: Callable[[], ToolCatalog], *, host: CallHost | None = None,
        hook: ToolCallHook | None = None,
    ) -> None:
        self._catalog = catalog
        self._host: CallHost = host if host is not None else NoHost()
        self._hook = hook
        self._in_flight: Counter[str] = Counter()
        self._calls_ended = anyio.Event()

    def down(self) -> dict[str, str]:
        """The manifest's servers that are not running, with why (for error messages)."""
        catalog = self._catalog()
        found = {}
        for key in catalog.manifest.servers:
            connection = catalog.connections.get(key)
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
        catalog = self._catalog()
        entry = catalog.entries.get(call["name"])
        if entry is None:
            return None
        if entry.origin.server is None:  # a local tool: refused here when denied, else run by LangChain
            token = _call_id.set(call.get("id"))
            try:
                self._apply(catalog.policy.decide(entry.name, entry.origin, call["args"]), entry.name)
            finally:
                _call_id.reset(token)
            return None
        message = _tool_message or _import_tool_message()
        token = _call_id.set(call.get("id"))
        try:
            output = await self.model_call(entry.name, dict(call["args"]))
        finally:
            _call_id.reset(token)
        content: str | list[str | dict[Any, Any]] = (
            output.content if isinstance(output.content, str) else list(output.content)
        )
        kept = {RETRIES_KEY: [dict(retry) for retry in output.retries]} if output.retries else {}
        return message(content, artifact=output.artifact, tool_call_id=call["id"], name=entry.name,
                       status="success", response_metadata=kept)

    async def model_call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """A call the model makes: :meth:`call`, through the hook; never of a tool only for apps."""
        entry = self._catalog().entries.get(name)
        if entry is not None and entry.definition is not None and not offered_to_model(entry.definition):
            raise ToolError(f"{name} is a tool for its server's app pages only (_meta.ui.visibility); "
                            "the model cannot call it")
        if self._hook is None:
            return await self.call(name, arguments)
        return await self._hook(name, arguments, self.call)

    def argument_problems(self, name: str, arguments: dict[str, Any]) -> list[str]:
        """Why ``call`` would refuse ``arguments`` for tool ``name`` without calling it, each as
        ``path: message`` (:func:`problem_lines` words them for a person); empty when they fit
        the tool's input schema, or when it has none to check against (not a server's tool)."""
        entry = self._catalog().entries.get(name)
        if entry is None or entry.origin.server is None or entry.definition is None:
            return []
        schema = entry.definition.input_schema
        return validate_arguments(schema, fill_defaults(schema, arguments))

    def decide(self, name: str, arguments: dict[str, Any]) -> PolicyDecision | None:
        """What the manifest's ``policy`` (and ``tools.approve``) says of calling ``name`` with
        ``arguments`` as they will be sent (a server tool's defaults filled in); None: no rule
        matches, the call runs. A name the catalog lacks is judged as an unlisted tool's."""
        catalog = self._catalog()
        entry = catalog.entries.get(name)
        if entry is None:
            unlisted = self.unlisted(name)
            origin: tuple[str | None, str] = (unlisted.server, unlisted.tool) if unlisted else (None, name)
            return catalog.policy.decide(name, origin, arguments)
        if entry.definition is not None:
            arguments = fill_defaults(entry.definition.input_schema, arguments)
        return catalog.policy.decide(name, entry.origin, arguments)

    def decide_offered(self, server: str, tool: str, arguments: dict[str, Any]
                       ) -> tuple[str, PolicyDecision | None]:
        """What the policy says of a call of tool ``tool`` that server ``server`` offers in a
        sampling request (not the catalog's: judged by the name the agent would give it)."""
        catalog = self._catalog()
        name = generate_name(server, tool, separator=catalog.manifest.agent.tool_separator)
        return name, catalog.policy.decide(name, (server, tool), arguments)

    def _apply(self, decision: PolicyDecision | None, name: str) -> None:
        """Refuse a call the policy denies (whoever makes it), and say what decided it: the
        caller's events and the current span (a ``deny`` raises ToolError with its reason)."""
        if decision is None:
            return
        telemetry.policy_decided(decision.action, decision.rule, decision.source, decision.reason)
        if (sink := self._host.progress_sink()) is not None:
            sink(decision.event(name, _call_id.get()))
        if decision.action == "deny":
            raise ToolError(decision.denial(name))

    def unlisted(self, name: str) -> UnlistedTool | None:
        """The tool ``name`` stands for when the catalog lacks it because its server, running,
        does not list it; None when the name is the catalog's, names no running server, or names
        a tool the server lists or the manifest leaves out (``tools.only`` / ``except``). A name
        close to one the server lists is taken for a typo of it, not for an unlisted tool."""
        catalog = self._catalog()
        if name in catalog.entries:
            return None
        separator = catalog.manifest.agent.tool_separator
        for key, connection in catalog.connections.items():
            tool = name.removeprefix(f"{key}{separator}")
            spec = catalog.manifest.servers.get(key)
            if tool == name or not tool or spec is None or not spec.expose or connection.status == "failed":
                continue
            listed = [offered.name for offered in connection.tools]
            if tool in listed or close_names(tool, listed) or not is_selected(tool, spec.tools):
                return None
            return UnlistedTool(name, key, tool)
        return None

    async def call_unlisted(self, tool: UnlistedTool, arguments: dict[str, Any]) -> ToolOutput:
        """Call a tool its server does not list (``mcp-run call``, ``/call``): as :meth:`call`
        does, with no schema to check the arguments against."""
        self._apply(self.decide(tool.name, arguments), tool.name)
        return await self._server_call(self._catalog(), tool.name, tool.server, tool.tool, arguments)

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call tool ``name`` the way the agent does; raises ToolError with text for the model.

        A call the manifest's policy denies is refused here, with its reason; one it says to
        ask about is asked by whoever runs the call (the approval node, ``/call``, ``mcp-run
        call``) before calling."""
        catalog = self._catalog()
        entry = catalog.entries.get(name)
        if entry is None:
            down = "".join(f" Server '{key}' is down ({why})." for key, why in sorted(self.down().items()))
            raise ToolError(unknown_tool_text(name, catalog.entries) + down)
        server, original = entry.origin
        if entry.definition is not None:  # invalid arguments are refused before any policy
            arguments = fill_defaults(entry.definition.input_schema, arguments)
            if problems := validate_arguments(entry.definition.input_schema, arguments):
                raise ToolError(f"invalid arguments for {name}:\n{format_problems(problems)}")
        self._apply(catalog.policy.decide(name, entry.origin, arguments), name)
        if server is None:
            content = await entry.tool.ainvoke(arguments)
            return ToolOutput(content if isinstance(content, str | list) else str(content), None, False)
        if original in RESOURCE_TOOLS and entry.definition is None:
            return await self._resource_call(catalog, server, original, arguments)
        return await self._server_call(catalog, name, server, original, arguments)

    async def _server_call(self, catalog: ToolCatalog, name: str, server: str, original: str,
                           arguments: dict[str, Any]) -> ToolOutput:
        """Tool ``original`` of ``server`` (``name`` in the catalog) called with its fallbacks, the
        servers' questions answered by the host, and the result converted."""
        sink = self._host.progress_sink()
        progress = _progress_reporter(sink, name, server)
        told = call_events(sink, name, server, _call_id.get())
        retried: list[CallRetried] = []
        events: CallEvents | None = None
        if told is not None:  # the call's events are heard: its retries are kept too, for its message

            def events(notice: CallNotice) -> None:
                if notice["type"] == "retry":
                    retried.append(notice)
                told(notice)

        def call_server(ask: Ask) -> Awaitable[types.CallToolResult]:
            return self._call_with_fallbacks(catalog, server, original, arguments, ask, progress, events)

        # No one to ask: each question is declined at once (no relay).
        answer = self._host.answer if self._host.answers_questions else None
        result, answered = await call_answering(call_server, answer)
        spec = catalog.manifest.servers[server]
        assert spec.max_output_chars is not None
        output = convert_result(result, max_output_chars=spec.max_output_chars, provider=catalog.provider)
        if note := answered.note():  # the model hears why the server got no input
            output = output.with_note(note)
        if output.is_error:
            raise ToolError(output.content if isinstance(output.content, str) else str(output.content))
        return replace(output, retries=tuple(retried)) if retried else output

    async def _call_with_fallbacks(
        self, catalog: ToolCatalog, server: str, tool: str, arguments: dict[str, Any], ask: Ask,
        progress: ProgressFnT | None, events: CallEvents | None = None,
    ) -> types.CallToolResult:
        current = server
        seen = {server}
        while True:
            connection = catalog.connections.get(current)
            try:
                if connection is None:  # removed (a required server failed at reload): transient
                    raise ServerClosedError(current, f"tools/call {tool!r}: the server is not running")
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
                fallback = catalog.manifest.servers[current].fallback
                if exc.kind is not ErrorKind.TRANSIENT or fallback is None or fallback in seen:
                    raise ToolError(str(exc)) from exc  # it names the server and the request
                logger.warning("%s: %s failed, falling back to %s: %s", current, tool, fallback,
                               str(exc).removeprefix(f"{current}: "))
                await _before_fallback(catalog, FallbackEvent(current, fallback, tool, arguments, exc))
                if events is not None:
                    events(CallRetried(type="retry", server=current, fallback=fallback,
                                       reason=str(exc).removeprefix(f"{current}: ")))
                seen.add(fallback)
                current = fallback

    async def drained(self, servers: set[str]) -> None:
        """Wait until no call made through this caller is in flight on ``servers``."""
        while any(self._in_flight[server] for server in servers):
            self._calls_ended = anyio.Event()
            await self._calls_ended.wait()

    async def _resource_call(
        self, catalog: ToolCatalog, server: str, which: str, arguments: dict[str, Any]
    ) -> ToolOutput:
        connection = catalog.connections[server]
        spec = catalog.manifest.servers[server]
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
            raise ToolError(str(exc)) from exc  # it names the server and the URI
        blocks: list[types.ContentBlock] = [
            types.EmbeddedResource(type="resource", resource=contents) for contents in result.contents
        ]
        wrapped = types.CallToolResult(content=blocks)
        return convert_result(wrapped, max_output_chars=spec.max_output_chars, provider=catalog.provider)


async def _before_fallback(catalog: ToolCatalog, event: FallbackEvent) -> None:
    telemetry.fallback(event)
    hook = catalog.fallback_hooks.get(event.server)
    if hook is None:
        return
    outcome = hook(event)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    if outcome is False:
        raise ToolError(f"{event.error} (fallback to {event.fallback} declined)")


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
