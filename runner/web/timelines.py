"""The timelines of a thread's turns, kept so a thread reopened (a reload, a restart of
``mcp-run web``) shows them as they were seen: what each model step was given and spent, and each
tool call's duration and status, with the wall-clock time each arrived.

The checkpoint keeps no step's or call's duration, so the page's server records, for each turn it
streams, the events its timeline is made of (``<state>/web/timelines/``, private to the user), by
the position of the turn's message in the thread. A turn resumed after a question adds to the turn
it continues: one timeline per turn.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.agent.team import agent_thread
from runner.store.private import private_folder, private_opener
from runner.web.steps import STEP_EVENT

logger = logging.getLogger(__name__)

TURNS_KEPT = 200  # turns of one thread whose timelines are kept (the latest)


def timeline_entry(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a timeline keeps of a turn's event (None: nothing), with the time it arrived (``at``,
    milliseconds since the epoch)."""
    kind = event.get("type")
    if kind in (STEP_EVENT, "usage"):
        kept = dict(event)
    elif kind == "tool_call":
        kept = {"type": kind, "id": event["id"]}
    elif kind == "tool_result":
        kept = {key: event[key] for key in ("type", "id", "name", "status", "ms", "agent") if key in event}
    else:
        return None
    return {"at": time.time() * 1000, "event": kept}


def stopped_entries(entries: list[dict[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """The entries that end, as ``stopped``, the calls of a stopped turn's ``entries`` that had no
    result (``names``: each call's tool, by its id): running until the stop."""
    now = time.time() * 1000
    started = {entry["event"]["id"]: entry["at"] for entry in entries
               if entry["event"].get("type") == "tool_call"}
    ended = {entry["event"]["id"] for entry in entries if entry["event"].get("type") == "tool_result"}
    return [{"at": now, "event": {"type": "tool_result", "id": call_id, "name": names.get(call_id, call_id),
                                  "status": "stopped", "ms": now - at}}
            for call_id, at in started.items() if call_id not in ended]


def call_durations(kept: Mapping[int, list[dict[str, Any]]]) -> dict[str, float]:
    """Each tool call's milliseconds (by its id) in the kept timelines ``kept``."""
    return {entry["event"]["id"]: entry["event"]["ms"] for entries in kept.values() for entry in entries
            if entry["event"].get("type") == "tool_result" and "ms" in entry["event"]}


class Timelines:
    """The kept timelines, one file per thread of an agent."""

    def __init__(self, state_dir: Path) -> None:
        self.folder = state_dir / "web" / "timelines"

    def _path(self, agent: str, thread: str) -> Path:
        return self.folder / (hashlib.sha256(agent_thread(agent, thread).encode()).hexdigest()[:32] + ".json")

    def read(self, agent: str, thread: str) -> dict[int, list[dict[str, Any]]]:
        """Each kept turn's entries, by the position of its message among the thread's messages
        from the user."""
        path = self._path(agent, thread)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:  # the page shows the turns without their timelines
            logger.warning("the timelines in %s cannot be read: %s", path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {int(key): value for key, value in data.items()
                if key.isdigit() and isinstance(value, list)}

    def add(self, agent: str, thread: str, turn: int, entries: list[dict[str, Any]]) -> None:
        """``entries`` added to turn ``turn``'s (the position of its message from the user)."""
        if not entries:
            return
        kept = self.read(agent, thread)
        kept[turn] = [*kept.get(turn, []), *entries]
        latest = sorted(kept)[-TURNS_KEPT:]
        private_folder(self.folder)
        path = self._path(agent, thread)
        partial = path.with_suffix(".tmp")
        with open(partial, "w", encoding="utf-8", opener=private_opener) as file:
            json.dump({str(key): kept[key] for key in latest}, file, default=str)
        os.replace(partial, path)

    def forget(self, agent: str, thread: str) -> None:
        self._path(agent, thread).unlink(missing_ok=True)
