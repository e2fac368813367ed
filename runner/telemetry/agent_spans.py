"""Spans of the agents of the manifest's ``agents:`` section (imports OpenTelemetry).

An agent called as a tool is an ``execute_tool {agent}`` span in the caller's run, and each run of
an agent (called as a tool, or as a workflow's step) is an ``invoke_agent {agent}`` span in the
current context: under the tool call that started it, or under the workflow run whose step it is.
An agent's model steps and tool calls are then its children. A run stopped by a question (an
interrupt) ends its span with ``mcp_run.agent.interrupted``; the resumed run is a span of its own,
with ``mcp_run.agent.resumed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.errors import GraphBubbleUp
from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import AttributeValue

from runner.telemetry.recorder import Recorder, _failed


@contextmanager
def agent_call(recorder: Recorder, agent: str, arguments_size: int) -> Iterator[None]:
    """The tool call that runs agent ``agent``."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": agent,
        "mcp_run.tool.agent": agent, "mcp_run.tool.arguments_size": arguments_size,
    }
    with _ended(recorder, f"execute_tool {agent}", attributes):
        yield


@contextmanager
def agent_run(recorder: Recorder, agent: str, thread_id: str | None, resumed: bool) -> Iterator[None]:
    """One run of agent ``agent`` (a model loop or a workflow); ``resumed``: an answer to a question
    continues a run stopped by it."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
        "mcp_run.generation": recorder.generation, "mcp_run.agent.resumed": resumed,
    }
    if thread_id:
        attributes["gen_ai.conversation.id"] = thread_id
    with _ended(recorder, f"invoke_agent {agent}", attributes):
        yield


@contextmanager
def _ended(recorder: Recorder, name: str, attributes: dict[str, Any]) -> Iterator[Span]:
    with recorder.tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes,
                                               record_exception=False, set_status_on_exception=False) as span:
        try:
            yield span
        except GraphBubbleUp:  # a question (or a handoff of control): not a failure
            span.set_attribute("mcp_run.agent.interrupted", True)
            raise
        except BaseException as exc:
            _failed(span, exc)
            raise
