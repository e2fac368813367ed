"""Durations of a turn's events, measured whether telemetry is on or off.

A ``tool_result`` event gets ``ms`` (since its ``tool_call`` event: approval waits included), and
``final`` gets ``ms`` (the whole turn) and ``trace_id`` (the turn's trace; null when telemetry is
off), so scripts reading ``--json`` can join events with traces.
"""

from __future__ import annotations

import time
from typing import Any


class TurnClock:
    """Stamps a turn's events; the recorder's subclass also ends the turn's span."""

    trace_id: str | None = None

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self._calls: dict[str, float] = {}

    def context(self) -> Any:
        """The context the turn's graph run starts in (None: the caller's)."""
        return None

    def seen(self, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` with its duration fields added; it is yielded as it is returned."""
        kind = event.get("type")
        now = time.perf_counter()
        if kind == "tool_call":
            self._calls[event["id"]] = now
        elif kind == "tool_result":
            event["ms"] = _ms(now - self._calls.pop(event["id"], self.began))
        elif kind == "final":
            event["ms"] = _ms(now - self.began)
            event["trace_id"] = self.trace_id
        self.observe(kind, event)
        return event

    def observe(self, kind: Any, event: dict[str, Any]) -> None:
        """What the recorder notes of an event (waits for an answer, the finish reason)."""

    def end(self, error: BaseException | None = None) -> None:
        """The turn is over (``error``: why it ended early)."""


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
