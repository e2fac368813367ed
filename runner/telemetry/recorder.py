"""Spans and metrics of a running agent, named after OpenTelemetry's semantic conventions for
generative AI (``gen_ai.*``) and for MCP (``mcp.*``) where they define names; ``mcp_run.*`` for
the rest. Argument and result contents are recorded only with ``telemetry.capture_content``;
header and environment values never are.

A turn is ``invoke_agent {agent}``, parent of its model steps (``chat {model}``) and tool calls
(``execute_tool {tool}``); each request to a server is a client span ``tools/call {tool}`` under
its tool call (a fallback adds one), and its trace context travels in the request's ``_meta``.
An agent of ``agents:`` has spans of its own (:mod:`runner.telemetry.agent_spans`).
Server starts, restarts, failures, heartbeat failures, list_changed refreshes and reloads are
spans of their own traces.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from runner import sdk
from runner.errors import ServerError
from runner.events import Event
from runner.telemetry import TurnClock

FLUSH_MILLIS = 2500  # what closing waits at most for the last exports
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
WAITS = ("approval", "elicitation", "sampling")
BUILTIN_PROVIDER = "mcp_run"

_Result = TypeVar("_Result")
_PROPAGATOR = TraceContextTextMapPropagator()
# The generated name of the tool call running in this context: MCP-level spans and metrics carry
# it as gen_ai.tool.name (joinable with mcp_run.tool.calls), the server's name as mcp.tool.name.
_calling: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_run_tool_call", default=None)


class Recorder:
    """Writes the agent's spans and metrics through its own providers (the global OpenTelemetry
    providers are left alone, so LangSmith or an application's own setup are not disturbed)."""

    def __init__(self, tracer_provider: TracerProvider, meter_provider: MeterProvider, *,
                 agent: str, capture_content: bool) -> None:
        self._providers = (tracer_provider, meter_provider)
        self.tracer = tracer_provider.get_tracer("mcp-run")
        self.agent = agent
        self.capture_content = capture_content
        self.generation = 0
        self._servers: WeakKeyDictionary[Any, tuple[str, int]] = WeakKeyDictionary()  # status, since (ns)
        # thread -> what it waits for, since when, and the span of the turn that began waiting
        self._waiting: dict[str, tuple[str, float, SpanContext]] = {}
        meter = meter_provider.get_meter("mcp-run")
        self.tool_calls = meter.create_counter("mcp_run.tool.calls", "{call}", "Tool calls the model made")
        self.tool_duration = meter.create_histogram(
            "mcp_run.tool.duration", "s", "Duration of a tool call, fallbacks included",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS)
        self.mcp_duration = meter.create_histogram(
            "mcp.client.operation.duration", "s", "Duration of an MCP request as the client saw it",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS)
        self.model_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", "s", "Duration of a model step",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS)
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", "{token}", "Tokens of a model step, by gen_ai.token.type",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
        self.cost = meter.create_counter(
            "mcp_run.model.cost", "USD", "Cost of the model steps, from model.pricing or the price library")
        self.restarts = meter.create_counter(
            "mcp_run.server.restarts", "{restart}", "Lost sessions restarted (ready) or given up (failed)")
        self.downtime = meter.create_histogram(
            "mcp_run.server.downtime", "s", "Time a server was restarting before it was ready again",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS)
        self.fallbacks = meter.create_counter("mcp_run.tool.fallbacks", "{fallback}", "Calls sent elsewhere")
        self.reloads = meter.create_counter("mcp_run.reloads", "{reload}", "Manifest reloads")
        self.waits = meter.create_histogram(
            "mcp_run.wait.duration", "s", "Time a turn waited for an approval, input or sampling answer",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS)
        self.active_turns = meter.create_up_down_counter(
            "mcp_run.turns.active", "{turn}", "Turns running now (conversations being served)")

    def close(self) -> None:
        """Export what is left, traces and metrics at the same time, waiting a bounded time (the
        endpoint may be gone)."""
        tracer_provider, meter_provider = self._providers
        metrics = threading.Thread(target=meter_provider.shutdown, kwargs={"timeout_millis": FLUSH_MILLIS},
                                   name="mcp-run metrics flush", daemon=True)
        metrics.start()
        tracer_provider.force_flush(FLUSH_MILLIS)
        tracer_provider.shutdown()
        metrics.join(FLUSH_MILLIS / 1000)

    # -- turns and model steps ------------------------------------------------------------

    def begin_turn(self, agent: str, thread_id: str, resumed: bool,
                   incoming: dict[str, str] | None = None) -> TurnClock:
        """A turn's span: the root of its trace, or a child of the caller's (``incoming``)."""
        parent = _PROPAGATOR.extract(incoming) if incoming else otel_context.Context()
        return _TracedTurn(self, agent, thread_id, resumed, parent)

    def wait_began(self, thread_id: str, kind: str, turn: SpanContext) -> None:
        self._waiting.setdefault(thread_id, (kind, time.perf_counter(), turn))

    def wait_ended(self, thread_id: str) -> tuple[str, float, SpanContext] | None:
        waiting = self._waiting.pop(thread_id, None)
        if waiting is None:
            return None
        kind, since, turn = waiting
        seconds = time.perf_counter() - since
        self.waits.record(seconds, {"mcp_run.wait.kind": kind})
        return kind, seconds, turn

    async def model_step(self, model: Any, call: Awaitable[_Result]) -> _Result:
        provider, requested = _model_names(model)
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                      "gen_ai.request.model": requested}
        metric = dict(attributes)
        began = time.perf_counter()
        with self._span(f"chat {requested}", SpanKind.CLIENT, attributes) as span:
            try:
                reply = await call
            except BaseException as exc:
                metric["error.type"] = _failed(span, exc)
                raise
            finally:
                self.model_duration.record(time.perf_counter() - began, metric)
            metadata = getattr(reply, "response_metadata", None) or {}
            answered = metadata.get("model_name") or metadata.get("model") or requested
            span.set_attribute("gen_ai.response.model", str(answered))
            if reason := metadata.get("finish_reason") or metadata.get("stop_reason"):
                span.set_attribute("gen_ai.response.finish_reasons", [str(reason)])
            usage = getattr(reply, "usage_metadata", None) or {}
            for kind in ("input", "output"):
                count = usage.get(f"{kind}_tokens")
                if isinstance(count, int):
                    span.set_attribute(f"gen_ai.usage.{kind}_tokens", count)
                    self.tokens.record(count, {**attributes, "gen_ai.token.type": kind})
            return reply

    @contextmanager
    def model_retry(self, event: Mapping[str, Any]) -> Iterator[None]:
        """A span for the wait before another attempt; the model step's span is its parent."""
        attributes = {"gen_ai.request.model": str(event["model"]),
                      "mcp_run.retry.attempt": event["attempt"], "mcp_run.retry.delay": float(event["delay"]),
                      "mcp_run.retry.reason": str(event["reason"])}
        if event.get("status") is not None:
            attributes["http.response.status_code"] = event["status"]
        with self._span(f"retry {event['model']}", SpanKind.INTERNAL, attributes):
            yield

    def model_cost(self, model: Any, response: Mapping[str, Any], cost: float) -> None:
        provider, requested = _model_names(model) if model is not None else (BUILTIN_PROVIDER, "unknown")
        answered = response.get("model_name") or response.get("model") or requested
        self.cost.add(cost, {"gen_ai.provider.name": provider, "gen_ai.request.model": requested,
                             "gen_ai.response.model": str(answered)})

    # -- tool calls -----------------------------------------------------------------------

    def tool_hook(self, catalog: Callable[[], Any], inner: Any) -> Callable[..., Awaitable[Any]]:
        async def traced(name: str, arguments: dict[str, Any], call: Any) -> Any:
            current = catalog()  # the catalog as it is now (a reload replaces it)
            entry = current.entries.get(name)
            server, original = entry.origin if entry is not None else (None, name)
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "mcp_run.tool.original_name": original, "mcp_run.tool.arguments_size": _size(arguments),
            }
            connection = current.connections.get(server) if server is not None else None
            if connection is not None:
                attributes.update(_server_attributes(connection))
            if self.capture_content:
                attributes["gen_ai.tool.call.arguments"] = _json(arguments)
            metric = {"mcp_run.server": server or "local", "gen_ai.tool.name": name, "mcp_run.status": "ok"}
            began = time.perf_counter()
            with self._span(f"execute_tool {name}", SpanKind.INTERNAL, attributes) as span:
                calling = _calling.set(name)
                try:
                    output = await (call(name, arguments) if inner is None else inner(name, arguments, call))
                except BaseException as exc:
                    metric["mcp_run.status"] = "error"
                    metric["error.type"] = _failed(span, exc)
                    raise
                finally:
                    _calling.reset(calling)
                    self.tool_calls.add(1, metric)
                    self.tool_duration.record(time.perf_counter() - began, metric)
                span.set_attribute("mcp_run.tool.result_size", _size(output.content))
                if self.capture_content:
                    span.set_attribute("gen_ai.tool.call.result", _json(output.content))
                return output

        return traced

    async def mcp_tool_call(
        self, connection: Any, tool: str, call: Callable[[], Awaitable[_Result]]
    ) -> _Result:
        attributes = {"mcp.method.name": "tools/call", "mcp.tool.name": tool,
                      "gen_ai.operation.name": "execute_tool", **_server_attributes(connection)}
        if (generated := _calling.get()) is not None:  # not for /call and `mcp-run call`
            attributes["gen_ai.tool.name"] = generated
        metric: dict[str, AttributeValue] = {
            key: attributes[key]
            for key in ("mcp.method.name", "mcp.tool.name", "gen_ai.tool.name", "mcp_run.server")
            if key in attributes
        }
        began = time.perf_counter()
        with self._span(f"tools/call {tool}", SpanKind.CLIENT, attributes) as span:
            try:
                result = await call()
            except BaseException as exc:
                metric["error.type"] = _failed(span, exc)
                raise
            finally:
                self.mcp_duration.record(time.perf_counter() - began, metric)
            if getattr(result, "is_error", False):
                span.set_attribute("error.type", "tool_error")
                span.set_status(Status(StatusCode.ERROR, "tool_error"))
            return result

    def policy_decided(self, action: str, rule: int | None, source: str, reason: str | None) -> None:
        span = trace.get_current_span()
        span.set_attributes({"mcp_run.policy.action": action, "mcp_run.policy.source": source,
                             "mcp_run.policy.rule": -1 if rule is None else rule})
        if reason is not None:
            span.set_attribute("mcp_run.policy.reason", reason)

    def fallback(self, event: Any) -> None:
        span = trace.get_current_span()
        span.set_attribute("mcp_run.fallback.server", event.fallback)
        span.add_event("fallback", {"mcp_run.server": event.server, "mcp_run.fallback.server": event.fallback,
                                    "error.type": type(event.error).__name__})
        metric = {"mcp_run.server": event.server, "mcp_run.fallback.server": event.fallback,
                  "mcp.tool.name": event.tool}
        if (generated := _calling.get()) is not None:
            metric["gen_ai.tool.name"] = generated
        self.fallbacks.add(1, metric)

    def trace_meta(self) -> dict[str, Any] | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        return dict(carrier) or None

    # -- servers and reloads --------------------------------------------------------------

    def server_status(self, connection: Any, status: str) -> None:
        now = time.time_ns()
        previous, since = self._servers.get(connection, (None, now))
        self._servers[connection] = (status, now)
        attributes = _server_attributes(connection)
        if previous == "restarting" and status in ("ready", "failed"):  # not "stopped": a shutdown
            self.restarts.add(1, {"mcp_run.server": connection.key, "mcp_run.status": status})
        if status == "ready" and previous == "starting":
            self._background(f"server start {connection.key}", since, now, attributes)
        elif status == "ready" and previous == "restarting":
            self.downtime.record((now - since) / 1e9, {"mcp_run.server": connection.key})
            self._background(f"server restart {connection.key}", since, now, {
                **attributes, **_reason("mcp_run.restart.reason", connection.last_incident),
                "mcp_run.server.restarts": connection.restarts})
        elif status == "failed":
            reason = _reason("mcp_run.failure.reason", connection.error)
            name = f"server failed {connection.key}"
            self._background(name, since, now, {**attributes, **reason}, failed=True)

    def heartbeat_failed(self, connection: Any) -> None:
        now = time.time_ns()
        self._background(f"heartbeat failed {connection.key}", now, now,
                         {**_server_attributes(connection), "error.type": "stale"}, failed=True)

    def relisted(self, connection: Any, kinds: Any, began_ns: int) -> None:
        self._background(f"list_changed {connection.key}", began_ns, time.time_ns(),
                         {**_server_attributes(connection), "mcp_run.kinds": sorted(kinds)})

    def reloaded(self, report: Any, *, initial: bool) -> None:
        self.generation += 1
        if initial:
            return
        now = time.time_ns()
        self.reloads.add(1, {"mcp_run.status": "failed" if report.failed else "ok"})
        self._background("reload", now - int(report.seconds * 1e9), now, {
            "mcp_run.generation": self.generation, "mcp_run.reload.started": report.started,
            "mcp_run.reload.stopped": report.stopped, "mcp_run.reload.restarted": report.restarted,
            "mcp_run.reload.rebuilt": report.rebuilt, "mcp_run.reload.failed": sorted(report.failed),
        }, failed=bool(report.failed))

    # -- helpers --------------------------------------------------------------------------

    @contextmanager
    def _span(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> Iterator[Span]:
        with self.tracer.start_as_current_span(name, kind=kind, attributes=attributes,
                                               record_exception=False, set_status_on_exception=False) as span:
            yield span

    def _background(self, name: str, start: int, end: int, attributes: dict[str, Any], *,
                    failed: bool = False) -> None:
        """A finished span of its own trace (servers and reloads belong to no turn)."""
        span = self.tracer.start_span(name, context=otel_context.Context(), start_time=start,
                                      attributes=attributes)
        if failed:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)


class _TracedTurn(TurnClock):
    """A turn's clock that is also its span, parent of everything its graph run records."""

    def __init__(self, recorder: Recorder, agent: str, thread_id: str, resumed: bool,
                 parent: otel_context.Context) -> None:
        super().__init__()
        self.recorder = recorder
        self.thread_id = thread_id
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": thread_id, "mcp_run.generation": recorder.generation,
            "mcp_run.turn.resumed": resumed,
        }
        waited = recorder.wait_ended(thread_id) if resumed else None
        links = []
        if waited is not None:  # the turn that asked is another trace: linked from this one
            attributes.update({"mcp_run.wait.kind": waited[0], "mcp_run.wait.seconds": waited[1]})
            links.append(Link(waited[2], {"mcp_run.link": "asked"}))
        self.span = recorder.tracer.start_span(f"invoke_agent {agent}", kind=SpanKind.INTERNAL,
                                               context=parent, attributes=attributes, links=links)
        sampled = self.span.get_span_context()
        self.trace_id = format_trace_id(sampled.trace_id) if sampled.trace_flags.sampled else None
        recorder.active_turns.add(1)

    def context(self) -> contextvars.Context:
        run_context = contextvars.copy_context()
        run_context.run(otel_context.attach, trace.set_span_in_context(self.span))
        return run_context

    def observe(self, kind: str, event: Event) -> None:
        if kind in WAITS:
            self.recorder.wait_began(self.thread_id, kind, self.span.get_span_context())
        elif event["type"] == "final" and event["reason"]:
            self.span.set_attribute("gen_ai.response.finish_reasons", [str(event["reason"])])

    def end(self, error: BaseException | None = None) -> None:
        if error is not None:
            _failed(self.span, error)
        self.span.end()
        self.recorder.active_turns.add(-1)


def _failed(span: Span, exc: BaseException) -> str:
    """Mark ``span`` failed by ``exc``; its ``error.type``. Only the type: messages stay out."""
    cause = exc.__cause__
    if isinstance(exc, ServerError):
        kind = type(exc).__name__
    elif isinstance(cause, ServerError):
        kind = type(cause).__name__
    elif type(exc).__name__ == "ToolError":
        kind = "tool_error"  # the server's isError result, or arguments it would not accept
    elif type(exc).__name__ == "CancelledError":
        kind = "cancelled"
    else:
        kind = type(exc).__name__
    span.set_attribute("error.type", kind)
    server_error = exc if isinstance(exc, ServerError) else cause
    if isinstance(server_error, ServerError):
        span.set_attribute("mcp_run.error.kind", str(server_error.kind.value))
    span.set_status(Status(StatusCode.ERROR, kind))
    return kind


def _server_attributes(connection: Any) -> dict[str, Any]:
    spec = connection.spec
    attributes: dict[str, Any] = {
        "mcp_run.server": connection.key, "mcp_run.server.transport": spec.transport,
        "network.transport": "pipe" if spec.transport == "stdio" else "tcp",
    }
    if connection.era:
        attributes["mcp.protocol.version"] = connection.era
    url = getattr(spec, "url", None)
    if url:  # host and port only: paths, queries and credentials may hold secrets
        parts = urlsplit(url)
        if parts.hostname:
            attributes["server.address"] = parts.hostname
        if parts.port:
            attributes["server.port"] = parts.port
    return attributes


def _reason(key: str, error: BaseException | None) -> dict[str, str]:
    if error is None:
        return {}
    return {key: str(error)[:300], "error.type": type(error).__name__}


def _model_names(model: Any) -> tuple[str, str]:
    """(provider, model id) of a LangChain chat model, as it reports them to tracers."""
    params = sdk.chat_model_trace_params(model)
    if type(model).__module__.startswith("runner."):  # the built-in models (offline, scripted)
        provider = BUILTIN_PROVIDER
    else:  # the partner packages name their provider as init_chat_model does (openai, anthropic...)
        provider = params.get("ls_provider") or sdk.chat_model_type(model) or "unknown"
    name = (params.get("ls_model_name") or getattr(model, "model_name", None)
            or getattr(model, "model", None) or sdk.chat_model_type(model) or provider)
    return str(provider), str(name)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(_json(value))


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
