"""Where a tool call's events go during a turn: the running graph's custom stream, and what a
stopped turn's calls say after its stream is no longer read."""

from __future__ import annotations

import contextvars
import sys
from typing import TypeVar

from runner.events import Event, EventSink


class StoppedTurnEvents:
    """Events of a turn's tool calls that come once the turn is stopped: its graph run's stream
    is no longer read then, but a task's ``cancelled`` status comes as the call is cancelled.

    :func:`runner.agent.turns.stream_turn` sets one in its graph run's context (:data:`turn_events`),
    calls :meth:`stop` when the turn is stopped, and hands ``kept`` over once the run has closed.
    """

    def __init__(self) -> None:
        self.stopped = False
        self.kept: list[Event] = []

    def through(self, stream: EventSink) -> EventSink:
        """Write to ``stream`` while the turn runs, to ``kept`` once it is stopped."""

        def write(event: Event) -> None:
            if self.stopped:
                self.kept.append(event)
            else:
                stream(event)

        return write

    def stop(self) -> None:
        """The turn is stopped: keep the events from now on, for after the run has closed."""
        self.stopped = True


T = TypeVar("T")
AGENT_KEY = "mcp_run_agent"  # the config metadata naming the agent of 'agents:' a node runs for
NAMESPACE = "namespace"  # of an ``agent`` event on its way to the turn: where its run's events come from
# Of a ``tool_call`` event on its way to the turn, sent by a call that runs again in a resumed run
# (its model step ran before): the turn tells it unless it was told in this turn already.
RERUN = "rerun"


def current_agent() -> str | None:
    """The agent of 'agents:' the running graph node works for; None for the main agent."""
    config = sys.modules.get("langgraph.config")
    if config is None:
        return None
    try:
        metadata = config.get_config().get("metadata") or {}
    except (RuntimeError, KeyError):
        return None
    name = metadata.get(AGENT_KEY)
    return name if isinstance(name, str) else None


def naming_agent(payload: T) -> T:
    """``payload`` (a question's interrupt payload) with the agent of 'agents:' that asks, if any."""
    agent = current_agent()
    if agent is not None:
        payload["agent"] = agent  # type: ignore[index]  # every question type has the optional key
    return payload


turn_events: contextvars.ContextVar[StoppedTurnEvents | None] = contextvars.ContextVar(
    "turn_events", default=None
)


def stream_writer() -> EventSink | None:
    """The running graph's custom stream (progress events), or None outside a graph run.

    A tool invoked directly inside another runnable has a config but no graph runtime in it: the
    lookup then fails with KeyError rather than RuntimeError."""
    config = sys.modules.get("langgraph.config")
    if config is None:  # LangGraph was never imported, so no graph is running
        return None
    try:
        stream = config.get_stream_writer()
    except (RuntimeError, KeyError):
        return None
    stopped = turn_events.get()
    return stream if stopped is None else stopped.through(stream)
