"""The chat's status line on a terminal: who is talking (agent, model, thread), which servers are
up, and while a turn runs a spinner with the tool being called or the server's progress.

The line is computed each time it is drawn, from the running agent itself, so a server that
restarts, a tool list that changes or a reload shows without anyone telling the line.
"""

from __future__ import annotations

import time

from runner.agent.runtime import Runtime
from runner.events import Event, ToolProgress, UsageShown, UsageTotals
from runner.tools.caller import progress_summary, progress_text

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPINNER_STEP = 0.1  # seconds a spinner frame is shown
SHORT_THREAD = 6  # characters of the thread id kept on a narrow status line


class ChatStatus:
    """What the status line says; chat events are fed to :meth:`observe`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.activity: str | None = None  # None: no turn is running
        self.detail = ""

    def observe(self, event: Event) -> None:
        if event["type"] == "tool_call":
            self.activity, self.detail = f"calling {event['name']}", ""
        elif event["type"] == "progress":
            self.activity, self.detail = f"calling {event['tool']}", progress_text(event)
        elif event["type"] == "tool_result":
            self.activity, self.detail = "thinking", ""
        elif event["type"] == "token":
            who = f"{event['agent']} " if "agent" in event else ""
            self.activity, self.detail = f"{who}answering", ""

    def start(self, activity: str = "thinking") -> None:
        self.activity, self.detail = activity, ""

    def stop(self) -> None:
        self.activity, self.detail = None, ""

    def line(self, width: int | None = None) -> str:
        """The status line, spinner first while a turn runs. Where it is wider than ``width``,
        the thread, model and agent parts are shortened or left out first: the running call and
        the servers' health stay."""
        runtime = self.runtime
        doing = ""
        if self.activity is not None:
            frame = SPINNER[int(time.monotonic() / SPINNER_STEP) % len(SPINNER)]
            doing = f"{frame} {self.activity}" + (f" {self.detail}" if self.detail else "")
        name, model, thread = runtime.manifest.name, runtime.manifest.model.id, runtime.thread_id
        short_thread = (
            f"thread {thread[:SHORT_THREAD]}…" if len(thread) > SHORT_THREAD else f"thread {thread}"
        )
        text = ""
        for who in ([name, model, f"thread {thread}"], [name, model, short_thread], [name, short_thread],
                    [name], []):
            text = " · ".join(part for part in (doing, *who, self.servers()) if part)
            if width is None or len(text) <= width:
                break
        return text

    def servers(self) -> str:
        statuses = {key: connection.status for key, connection in self.runtime.fleet.connections.items()}
        if not statuses:
            return "no servers"
        up = sum(1 for status in statuses.values() if status == "ready")
        text = f"servers {up}/{len(statuses)} up"
        others = sorted(f"{key} {status}" for key, status in statuses.items() if status != "ready")
        return f"{text} ({', '.join(others)})" if others else text


def progress_line(event: ToolProgress) -> str:
    """``… tool: 2/4 (50%) message`` for a progress event."""
    return f"… {progress_summary(event)}"


def spent_text(totals: UsageTotals) -> str:
    """``2,310 tokens (2,200 in, 200 cached, 110 out) · $0.0010 · 1 tool call``; the cost is
    ``cost unknown`` where no price is known (never a guess), and says when some steps had none."""
    parts = [f"{totals['input_tokens']:,} in"]
    if totals["cached_tokens"]:
        parts.append(f"{totals['cached_tokens']:,} cached")
    parts.append(f"{totals['output_tokens']:,} out")
    if totals["reasoning_tokens"]:
        parts.append(f"{totals['reasoning_tokens']:,} reasoning")
    cost = totals["cost"]
    if cost is None:
        money = "cost unknown"
    else:
        money = f"${cost:.4f}" if cost >= 0.0001 or cost == 0 else f"${cost:.6f}"
        if totals["unpriced_steps"]:
            money += f" (+ {totals['unpriced_steps']} step(s) of unknown cost)"
    calls = totals["tool_calls"]
    return (f"{totals['total_tokens']:,} tokens ({', '.join(parts)}) · {money} · "
            f"{calls} tool call{'s' if calls != 1 else ''}")


def usage_line(turn: UsageTotals, thread: UsageTotals) -> str:
    """What the chat prints after a turn whose model reported usage."""
    return f"turn: {spent_text(turn)} | thread: {thread['total_tokens']:,} tokens, " + (
        "cost unknown" if thread["cost"] is None else f"${thread['cost']:.4f}")


def usage_rows(event: UsageShown) -> list[str]:
    """``/usage``: the thread's totals, then each agent's when there are several."""
    rows = [f"thread {event['thread']}: {spent_text(event['total'])}, "
            f"{event['total']['model_steps']} model step(s), {event['total']['seconds']:.1f} s"]
    if len(event["agents"]) > 1:
        rows += [f"  {agent}: {spent_text(totals)}" for agent, totals in sorted(event["agents"].items())]
    return rows
