"""OpenTelemetry traces and metrics of turns, model steps, tool calls, servers and reloads.

The rest of the runner calls the hooks below, one line each. With telemetry off (the default)
every hook is a cheap no-op and the runner never imports OpenTelemetry (other packages may); with
it on (the manifest's ``telemetry.enabled``, or an ``OTEL_EXPORTER_OTLP_*ENDPOINT`` variable) they
record through the :class:`~runner.telemetry.recorder.Recorder` that :func:`session` installs for
the agent's lifetime.

    recorder.py     spans and metrics (imports OpenTelemetry)
    agent_spans.py  the spans of the agents of ``agents:`` (imports OpenTelemetry)
    exporting.py    providers and OTLP/HTTP exporters from the manifest and the OTEL_* variables

A turn's events carry durations whether telemetry is on or off (:class:`TurnClock`): a
``tool_result`` event gets ``ms`` (since its ``tool_call`` event, or since the turn resumed after
an approval: the wait is not included), and
``final`` gets ``ms`` (the whole turn) and ``trace_id`` (the turn's trace; null when telemetry is
off), so scripts reading ``--json`` can join events with traces.
"""

from __future__ import annotations

import contextvars
import importlib.util
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from runner.errors import ManifestError, Problem
from runner.events import Event

if TYPE_CHECKING:
    from pathlib import Path

    from runner.manifest import Manifest
    from runner.manifest.loading import LoadedManifest
    from runner.telemetry.recorder import Recorder

logger = logging.getLogger(__name__)

EXTRA_HINT = "pip install 'mcp-run[otel]'"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                      "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
MISSING_PACKAGES = f"telemetry needs the OpenTelemetry packages, which are not installed: {EXTRA_HINT}"
LOG_NAME = "telemetry.log"  # in the state folder's logs: what the OpenTelemetry SDK says

_current: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("mcp_run_telemetry", default=None)
# The trace context of the request that runs the turns of this task (``mcp-run serve``).
_incoming: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "mcp_run_trace", default=None)
_Result = TypeVar("_Result")

__all__ = [
    "EXTRA_HINT", "TurnClock", "agent_call", "agent_run", "begin_turn", "current", "fallback",
    "heartbeat_failed", "installed",
    "package_problems",
    "http_request_hooks", "join_trace", "mcp_tool_call", "model_cost", "model_retry", "model_step",
    "recording", "relisted", "reloaded",
    "server_status", "session", "tool_hook", "trace_meta", "wanted",
]


def current() -> Recorder | None:
    """The recorder of the running agent, or None when telemetry is off."""
    return _current.get()


def wanted(enabled: bool | None, environ: Mapping[str, str]) -> bool:
    """On when the manifest says so; unset, when an OTLP endpoint variable is set (and the SDK
    is not disabled by ``OTEL_SDK_DISABLED``)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if enabled is not None:
        return enabled
    return any(environ.get(name) for name in ENDPOINT_VARIABLES)


PACKAGES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http")


def installed() -> bool:
    """Whether the OpenTelemetry packages of the ``otel`` extra are there (none is imported)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in PACKAGES)
    except (ImportError, ValueError):  # a parent package missing
        return False


def package_problems(loaded: LoadedManifest) -> list[Problem]:
    """The manifest asks for telemetry (``enabled: true``) without the packages installed."""
    if loaded.manifest.telemetry.enabled and not installed():
        return [loaded.source.problem(("telemetry", "enabled"), MISSING_PACKAGES)]
    return []


@contextmanager
def session(loaded: LoadedManifest, environ: Mapping[str, str], *, required: bool = True
            ) -> Iterator[Recorder | None]:
    """Record for the block when telemetry is wanted; flush (bounded) when it ends.

    A manifest asking for telemetry without the OpenTelemetry packages installed is a located
    error (not ``required``, for commands that run no turn: a warning); an endpoint variable
    alone then only earns a warning (nothing is exported).
    """
    spec = loaded.manifest.telemetry
    if not wanted(spec.enabled, environ):
        yield None
        return
    try:
        import runner.telemetry.exporting  # noqa: F401 (needs the OpenTelemetry packages)
    except ImportError as exc:
        if spec.enabled and required:
            raise ManifestError([loaded.source.problem(("telemetry", "enabled"), MISSING_PACKAGES)]) from exc
        logger.warning("telemetry is asked for, but the OpenTelemetry packages are not installed "
                       "(%s): no telemetry is exported", EXTRA_HINT)
        yield None
        return
    from runner.store.state_folder import state_folder

    log_path = state_folder(loaded, environ=environ) / "logs" / LOG_NAME
    with recording(loaded.manifest, environ, log_path) as recorder:
        yield recorder


@contextmanager
def recording(manifest: Manifest, environ: Mapping[str, str], log_path: Path | None = None
              ) -> Iterator[Recorder]:
    """Record in this context (and the tasks it starts) until the block ends, then flush.
    Needs the OpenTelemetry packages (ImportError otherwise)."""
    from runner.telemetry.exporting import start_recorder

    recorder = start_recorder(manifest, environ, log_path)
    token = _current.set(recorder)
    try:
        yield recorder
    finally:
        try:
            _current.reset(token)
        except ValueError:  # left in another context than entered: clear it there
            _current.set(None)
        recorder.close()


# --------------------------------------------------------------------------- turns and models


class TurnClock:
    """Stamps a turn's events; the recorder's subclass also ends the turn's span."""

    trace_id: str | None = None

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self._calls: dict[str, float] = {}

    def context(self) -> Any:
        """The context the turn's graph run starts in (None: the caller's)."""
        return None

    def seen(self, event: Event) -> Event:
        """``event`` with its duration fields added; it is yielded as it is returned."""
        now = time.perf_counter()
        if event["type"] == "tool_call":
            self._calls[event["id"]] = now
        elif event["type"] == "tool_result":
            event["ms"] = _ms(now - self._calls.pop(event["id"], self.began))
        elif event["type"] == "final":
            event["ms"] = _ms(now - self.began)
            event["trace_id"] = self.trace_id
        self.observe(event["type"], event)
        return event

    def observe(self, kind: str, event: Event) -> None:
        """What the recorder notes of an event (waits for an answer, the finish reason)."""

    def end(self, error: BaseException | None = None) -> None:
        """The turn is over (``error``: why it ended early; CancelledError: it was stopped)."""


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def begin_turn(agent: str, thread_id: str, resumed: bool) -> TurnClock:
    """The clock of a turn (durations of its events); with telemetry on, also its span."""
    recorder = _current.get()
    if recorder is None:
        return TurnClock()
    return recorder.begin_turn(agent, thread_id, resumed, _incoming.get())


def join_trace(meta: Mapping[str, Any] | None) -> None:
    """The request this task serves carries a trace context in its ``_meta`` (``traceparent``,
    ``tracestate``): the turns the task runs from now on join that trace."""
    if _current.get() is not None and meta and isinstance(meta.get("traceparent"), str):
        _incoming.set({key: str(meta[key]) for key in ("traceparent", "tracestate") if key in meta})


async def model_step(model: Any, call: Awaitable[_Result]) -> _Result:
    """Await one model call (``model`` is the chain's primary chat model), recorded as a step."""
    recorder = _current.get()
    if recorder is None:
        return await call
    return await recorder.model_step(model, call)


@contextmanager
def model_retry(event: Mapping[str, Any]) -> Iterator[None]:
    """The wait before a model request is tried again (``event``: its ``model_retry`` event),
    recorded as a span."""
    recorder = _current.get()
    if recorder is None:
        yield
        return
    with recorder.model_retry(event):
        yield


def model_cost(model: Any, response: Mapping[str, Any], cost: float) -> None:
    """A model step's cost in US dollars (``model``: the chain's primary chat model; ``response``:
    the reply's metadata, naming the model that answered), added to ``mcp_run.model.cost``."""
    recorder = _current.get()
    if recorder is not None:
        recorder.model_cost(model, response, cost)


# --------------------------------------------------------------------------- tools


def tool_hook(catalog: Callable[[], Any], inner: Any) -> Any:
    """A tool caller's hook, wrapped so every call the model makes is a span (``inner`` itself
    when telemetry is off); ``catalog`` gives the catalog as it is now."""
    recorder = _current.get()
    if recorder is None:
        return inner
    return recorder.tool_hook(catalog, inner)


async def mcp_tool_call(connection: Any, tool: str, call: Callable[[], Awaitable[_Result]]) -> _Result:
    """One ``tools/call`` request to one server (a fallback makes another), as a client span."""
    recorder = _current.get()
    if recorder is None:
        return await call()
    return await recorder.mcp_tool_call(connection, tool, call)


def fallback(event: Any) -> None:
    """A tool call is about to be retried on the failed server's fallback."""
    recorder = _current.get()
    if recorder is not None:
        recorder.fallback(event)


def policy_decided(action: str, rule: int | None, source: str, reason: str | None) -> None:
    """A policy rule decided the tool call of the current span (``rule``: its index in
    ``policy``, -1 for a server's ``tools.approve`` entry)."""
    recorder = _current.get()
    if recorder is not None:
        recorder.policy_decided(action, rule, source, reason)


def trace_meta() -> dict[str, Any] | None:
    """``traceparent`` / ``tracestate`` of the current span for a request's ``_meta`` (None: off)."""
    recorder = _current.get()
    return None if recorder is None else recorder.trace_meta()


_TRACEPARENT = re.compile(rb'"traceparent"\s*:\s*"([0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2})"')


async def _traceparent_header(request: Any) -> None:
    """An HTTP request carrying a JSON-RPC request whose ``_meta`` holds a traceparent gets it as
    its ``traceparent`` header too (the SDK sends from its own task, where no span is current)."""
    if "traceparent" in request.headers:
        return
    match = _TRACEPARENT.search(request.content or b"")
    if match is not None:
        request.headers["traceparent"] = match.group(1).decode()


def http_request_hooks() -> list[Callable[[Any], Awaitable[None]]]:
    """httpx request hooks of an HTTP server's client: none when telemetry is off."""
    return [] if _current.get() is None else [_traceparent_header]


# --------------------------------------------------------------------------- agents


@contextmanager
def agent_call(agent: str, arguments_size: int) -> Iterator[None]:
    """The tool call that runs agent ``agent`` of ``agents:``, as an ``execute_tool`` span."""
    recorder = _current.get()
    if recorder is None:
        yield
        return
    from runner.telemetry.agent_spans import agent_call as traced

    with traced(recorder, agent, arguments_size):
        yield


@contextmanager
def agent_run(agent: str, thread_id: str | None, resumed: bool) -> Iterator[None]:
    """One run of agent ``agent`` of ``agents:`` (a tool call's, or a workflow step's), as an
    ``invoke_agent`` span under the current one (``resumed``: an answer continues it)."""
    recorder = _current.get()
    if recorder is None:
        yield
        return
    from runner.telemetry.agent_spans import agent_run as traced

    with traced(recorder, agent, thread_id, resumed):
        yield


# --------------------------------------------------------------------------- servers and reloads


def server_status(connection: Any, status: str) -> None:
    """A server's status changed (start, restart with its reason, failure, downtime)."""
    recorder = _current.get()
    if recorder is not None:
        recorder.server_status(connection, status)


def heartbeat_failed(connection: Any, ending: str) -> None:
    """A session's watch ended: ``stale`` means the heartbeat got no answer."""
    recorder = _current.get()
    if recorder is not None and ending == "stale":
        recorder.heartbeat_failed(connection)


def relisted(connection: Any, kinds: Any, began_ns: int) -> None:
    """A list_changed refresh of ``kinds`` ended (it began at ``began_ns``, time.time_ns())."""
    recorder = _current.get()
    if recorder is not None:
        recorder.relisted(connection, kinds, began_ns)


def reloaded(report: Any, *, initial: bool) -> None:
    """A manifest was applied (``initial``: at start-up): a new generation of the agent."""
    recorder = _current.get()
    if recorder is not None:
        recorder.reloaded(report, initial=initial)
