"""The two faces of the chat: a person at a terminal, or a program speaking JSON lines.

Each reads stdin through one reader, so a question and the prompt never compete for a line: the
line editor (``runner.cli.editor``) on a terminal, else a :class:`LineReader` of plain lines.
Every text from a manifest, a server or a model is printed with ``markup=False``: it is never read
as rich markup, so a server cannot style or hide output.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import click
from rich.console import Console

from runner.cli import counted
from runner.cli.media import inline_preview
from runner.cli.safe_text import visible
from runner.cli.status import ChatStatus, progress_line, usage_line, usage_rows
from runner.events import (
    AgentStarted,
    ApprovalAsked,
    CatalogueChanged,
    ChatError,
    ContextShown,
    Event,
    HandedOff,
    HelpShown,
    ToolCall,
    ToolProgress,
    ToolResult,
    UsageReported,
)
from runner.manifest import MAIN_AGENT
from runner.models.retries import model_call_line
from runner.tools.caller import unlisted_warning

PREVIEW_CHARS = 160
APPROVAL_ANSWERS = ("approve", "deny", "edit")
YES, NO = ("y", "yes"), ("n", "no", "")  # an empty answer denies


def approval_question(*, edit: bool) -> str:
    """The approval question of the chat, and of ``mcp-run call`` (no arguments to edit there)."""
    return f"approve? [y]es / [n]o{' / [e]dit' if edit else ''}: "


class StartupSpinner:
    """A spinner on a terminal while the agent starts; stopped (its line cleared) before any log
    line is printed, so a warning never lands on the spinner's line."""

    def __init__(self, console: Console, text: str) -> None:
        self._status = console.status(text) if console.is_terminal else None
        self._handlers: list[logging.Handler] = []

    def start(self) -> None:
        if self._status is None:
            return
        self._status.start()
        self._handlers = list(logging.getLogger().handlers)
        for handler in self._handlers:
            handler.addFilter(self._before_log_line)

    def stop(self) -> None:
        for handler in self._handlers:
            handler.removeFilter(self._before_log_line)
        self._handlers = []
        self._clear()

    def _clear(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _before_log_line(self, record: logging.LogRecord) -> bool:
        self._clear()  # the filters stay until stop(): a handler is iterating them now
        return True


def by_agent(event: ToolCall | ToolResult | ApprovalAsked) -> str:
    """``researcher: `` before what an agent of 'agents:' does; nothing for the main agent."""
    return f"{event['agent']}: " if "agent" in event else ""


def step_start_line(event: Event) -> str | None:
    """The line of an agent a workflow's step starts (chain, parallel, router, loop), which has no
    call of its own to show it; None for any other event (an agent called as a tool is shown by
    its call, ``→ researcher {"task": …}``)."""
    if event["type"] == "agent" and "call" not in event:
        return agent_start_line(event)
    return None


def agent_start_line(event: AgentStarted) -> str:
    """``board: → optimist {"task": "Should we…"}``: workflow board gives agent optimist its task
    (shortened to a line, as a result's preview is)."""
    task = json.dumps({"task": preview(event["task"])}, ensure_ascii=False)
    return f"{event['caller']}: → {event['agent']} {task}"


def handoff_line(event: HandedOff) -> str:
    """``main handed the conversation to billing: a billing question``."""
    because = f": {event['reason']}" if event.get("reason") else ""
    return f"{event['from']} handed the conversation to {event['to']}{because}"


def prompt_for(agent: str) -> str:
    """The chat's prompt: ``> ``, or ``billing> `` while another agent than main answers."""
    return "> " if agent == MAIN_AGENT else f"{agent}> "


def change_line(event: CatalogueChanged) -> str:
    """``notes tools: +fresh −old ~changed``: a server's changed list, in one line."""
    changes = ([f"+{n}" for n in event["added"]] + [f"−{n}" for n in event["removed"]]
               + [f"~{n}" for n in event["changed"]])
    return f"{event['server']} {event['kind']}: {' '.join(changes)}"


def context_line(event: ContextShown) -> str:
    """``context: 2,410 of 3,000 tokens (80%) · 12 of 40 messages sent, 26 summarized``."""
    if event["limit"] is None:
        used = f"context: {event['tokens']:,} tokens, no limit (set context.max_tokens)"
    else:
        share = round(100 * event["tokens"] / event["limit"])
        used = f"context: {event['tokens']:,} of {event['limit']:,} tokens ({share}%, {event['strategy']})"
    parts = [f"{event['sent']} of {counted(event['messages'], 'message')} sent"]
    if event["summary"]:
        parts.append(f"{event['summarized']} in the summary")
    if event["shortened"]:
        parts.append(f"{counted(event['shortened'], 'old tool result')} as a reference")
    return f"{used} · {', '.join(parts)}"


def preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


class LineReader:
    """The only reader of stdin, inside the event loop: a line is read only while someone waits
    for one. A question cancelled by Ctrl-C (an approval when the turn is interrupted) takes
    nothing, the line typed next goes to the next reader, and no thread is left blocked in a read
    (which would keep the process from exiting)."""

    def __init__(self, console: Console, fd: int | None = None) -> None:
        self._console = console
        self._fd = sys.stdin.fileno() if fd is None else fd
        mode = os.fstat(self._fd).st_mode
        # A terminal, pipe or socket can be waited on; a file or /dev/null never blocks a read.
        self._pollable = os.isatty(self._fd) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        self._buffer = b""
        self._ended = False
        self.waiting_prompt: str | None = None  # the prompt shown while a read waits
        self.keeps_partial_lines = True  # nothing is redrawn over an unfinished line

    async def read(self, prompt: str, *, message: bool = False, default: str = "",
                   choices: Sequence[str] = ()) -> str | None:
        """The next line without its newline, or None at the end of input (``message``: the
        chat's prompt rather than a question, ``default``, the text the line starts with, and
        ``choices``, what Tab completes, matter to the line editor only)."""
        self.write(prompt)
        self.waiting_prompt = prompt
        try:
            while b"\n" not in self._buffer and not self._ended:
                if self._pollable:
                    await anyio.wait_readable(self._fd)
                chunk = os.read(self._fd, 65536)
                self._buffer += chunk
                self._ended = not chunk
        finally:
            self.waiting_prompt = None
        if not self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace").removesuffix("\r")

    def write(self, text: str) -> None:
        self._console.file.write(visible(text))
        self._console.file.flush()

    @asynccontextmanager
    async def working(self) -> AsyncIterator[None]:
        """Plain lines have no status line to show while a turn runs."""
        yield


class ChatView(Protocol):
    async def read(self) -> str | None:
        """The next message or /command, or None at the end of input."""

    def show(self, event: Event, *, in_full: bool = False) -> None:
        """Show one event (README: "Chat events"); ``in_full``: a tool result not cut to a preview."""

    async def ask_approval(self, approval: ApprovalAsked) -> dict[str, Any]:
        """The answer to an ``approval`` event: {action: approve|deny|edit, reason?, args?}."""

    def working(self) -> Any:
        """An async context manager around a turn or a command (the status line's spinner)."""


class TerminalView:
    """The chat for a person: streamed tokens, one line a tool call, approval questions.

    A running call's progress is not printed as it comes (a served sub-agent sends one notice a
    token): the status line shows the latest, in place, and one line with the last progress is
    printed when the call ends, before its result."""

    def __init__(self, console: Console, reader: Any, status: ChatStatus | None = None) -> None:
        self.console = console
        self.reader = reader  # a LineReader or a ChatEditor
        self.status = status
        self._midline = False  # tokens were streamed and their line is not finished
        self._streamed = False  # the model's text since the last tool call was streamed (not to print again)
        # The streamed answer's unfinished line, where the reader keeps whole lines only.
        self._held = ""
        # The last progress of each running call (by tool name) and how many notices it sent.
        self._progress: dict[str, tuple[ToolProgress, int]] = {}
        self._last_usage: UsageReported | None = None  # the running turn's latest
        self._answering = MAIN_AGENT  # the agent answering the conversation, shown in the prompt

    async def read(self) -> str | None:
        self._end_answer_line()
        self._end_progress()  # calls the turn left without a result (interrupted, failed)
        return await self.reader.read(prompt_for(self._answering), message=True)

    def working(self) -> Any:
        return self.reader.working()

    def show(self, event: Event, *, in_full: bool = False) -> None:
        if self.status is not None:
            self.status.observe(event)
        if event["type"] == "progress":  # shown live by the status line; printed once, at the end
            _, notices = self._progress.get(event["tool"], (event, 0))
            self._progress[event["tool"]] = (event, notices + 1)
            return
        prompt = self.reader.waiting_prompt
        if prompt is not None:  # output while the person is at the prompt (a reload, a change)
            self.reader.write("\r\x1b[2K" if self.console.is_terminal else "\n")
        self._render(event, in_full)
        self._spent(event)
        if prompt is not None:
            self.reader.write(prompt)

    def _render(self, event: Event, in_full: bool) -> None:
        say = self.console.print
        if event["type"] == "token":
            # An agent working for another answers in that call's result; the agent answering
            # the conversation (handed it) answers the user.
            if event.get("agent", MAIN_AGENT) == self._answering:
                self._stream(event["text"])
            return
        if event["type"] == "usage":  # between the streamed answer and its final event: keeps the line
            return
        if self._midline:
            self._end_answer_line()
        if event["type"] in ("final", "tool_call"):
            streamed, self._streamed = self._streamed, False
            if event["type"] == "final" and streamed:
                return
        if event["type"] in ("interrupted", "error"):
            self._end_progress()
        if event["type"] == "final":
            if event["text"]:
                say(event["text"], markup=False)
        elif event["type"] == "handoff":
            self._answering = event["to"]
            say(handoff_line(event), style="magenta", markup=False)
        elif event["type"] == "current_agent":
            self._answering = event["agent"]
            say(f"talking to {event['agent']} (/agent NAME switches: {', '.join(event['choices'])})",
                style="dim", markup=False)
        elif event["type"] == "agent":
            if (started := step_start_line(event)) is not None:
                say(started, style="cyan", markup=False)
        elif event["type"] == "tool_call":
            if event.get("unlisted"):
                say(unlisted_warning(event["name"]), style="yellow", markup=False)
            say(f"{by_agent(event)}→ {event['name']} {json.dumps(event['args'])}", style="cyan", markup=False)
        elif event["type"] == "tool_result":
            self._end_progress(event["name"])
            text = event["text"] if in_full else f"{by_agent(event)}← {preview(event['text'])}"
            say(text, style="red" if event["status"] == "error" else ("" if in_full else "dim"), markup=False)
        elif event["type"] == "ready":
            # as the model sees them: a tool for each agent it may call and each handoff too
            offered = len(event["tools"]) + len(event["agents"]) + len(event["handoffs"])
            say(f"{event['name']} — {counted(offered, 'tool')}, model {event['model']}, thread "
                f"{event['thread']}. /help for commands.", style="dim", markup=False)
        elif event["type"] == "help":
            self._help(event)
        elif event["type"] == "tools":
            if event["search"]:
                say("tool search is on: the model is offered search_tools and the tools marked *; "
                    "it finds the others by searching", style="dim", markup=False)
            for tool in event["tools"]:
                marker = "  (asks for approval)" if tool["approval"] else ""
                marked = ("* " if tool["offered"] else "  ") if event["search"] else ""
                kind = f"[{tool['kind']}]  " if tool["kind"] != "tool" else ""
                say(f"{marked}{tool['name']}  {kind}{tool['description']}{marker}", markup=False)
        elif event["type"] == "prompts":
            for row in event["prompts"]:
                usage = f"{row['command']} {row['arguments']}".strip()
                say(f"{usage}  ({row['server']}: {row['original']})", markup=False)
        elif event["type"] == "agents":
            for agent in event["agents"]:
                called = f"  (called by {', '.join(agent['callers'])})" if agent["callers"] else ""
                about = agent["description"].partition("\n")[0]
                current = "  (answering)" if agent.get("current") else ""
                say(f"{agent['name']}  [{agent['kind']}]  {about}{called}{current}", markup=False)
        elif event["type"] == "thread":
            say(event.get("note") or f"thread {event['thread']}", markup=False)
        elif event["type"] == "saved":
            say(f"saved the case {event['case']} to {event['path']}", style="green", markup=False)
        elif event["type"] == "reload":
            say(event["summary"], style="green", markup=False)
        elif event["type"] == "reload_error":
            for problem in event["problems"]:
                say(problem, style="red", markup=False)
            say("the agent's files have problems; still running the last good version", style="yellow")
        elif event["type"] == "change":
            say(change_line(event), style="dim", markup=False)
        elif event["type"] in ("model_retry", "model_fallback"):
            say(model_call_line(event), style="yellow", markup=False)
        elif event["type"] == "elicitation_complete":
            done = f"[{event['server']}] the visit {event['elicitation_id']} is complete"
            say(done, style="dim", markup=False)
        elif event["type"] == "task":
            note = f" {event['message']}" if event.get("message") else ""
            say(f"… {event['tool']}: task {event['status']}{note}", style="dim", markup=False)
        elif event["type"] == "media":
            say(f"saved {event['mime_type']} from {event['tool']}: {event['path']}", style="green",
                markup=False)
            if self.console.is_terminal and (preview_codes := inline_preview(event)) is not None:
                self.reader.write(preview_codes)
        elif event["type"] == "media_list":
            if not event["files"]:
                say(f"no media saved in thread {event['thread']}", style="dim", markup=False)
            for path in event["files"]:
                say(path, markup=False)
        elif event["type"] == "policy":  # a denial's reason is in the result that follows
            verb = {"allow": "allows", "ask": "asked about", "deny": "denies"}[event["action"]]
            because = f": {event['reason']}" if event["reason"] and event["action"] != "deny" else ""
            say(f"{event['source']} {verb} {event['tool']}{because}", style="dim", markup=False)
        elif event["type"] == "context_window":
            say(context_line(event), markup=False)
        elif event["type"] == "context" and event["written"]:  # once per summary; trims are silent
            say(f"(summarized {counted(event['summarized'], 'earlier message')} to fit "
                f"{event['limit']:,} tokens; the thread keeps them all)", style="dim", markup=False)
        elif event["type"] == "interrupted":
            say(f"({event['what']} interrupted)", style="yellow", markup=False)
        elif event["type"] == "error":
            say(event["message"], style="red", markup=False)

    def _spent(self, event: Event) -> None:
        """After a turn, what it spent (from its last ``usage`` event); ``/usage``'s totals."""
        if event["type"] == "usage":
            self._last_usage = event
        elif event["type"] == "final" and self._last_usage is not None:
            self._end_answer_line()
            usage, self._last_usage = self._last_usage, None
            self.console.print(usage_line(usage["turn"], usage["thread"]), style="dim", markup=False)
        elif event["type"] == "usage_totals":
            for row in usage_rows(event):
                self.console.print(row, markup=False)

    def _stream(self, text: str) -> None:
        """Print a token; for a reader that keeps whole lines only (the line editor), a line is
        printed once complete or once the answer ends, in one write with its newline."""
        self._midline = self._streamed = True
        if self.reader.keeps_partial_lines:
            self.console.print(text, end="", markup=False)
            return
        lines, newline, self._held = (self._held + text).rpartition("\n")
        if newline:
            self.console.print(lines + newline, end="", markup=False)

    def _end_answer_line(self) -> None:
        """End the streamed answer's line, if it is unfinished: what was held back, then a newline."""
        if self._midline:
            self.console.print(self._held, markup=False)
            self._held, self._midline = "", False

    def _end_progress(self, tool: str | None = None) -> None:
        """The one line that stays of a call's progress (of ``tool``; of every call left, if None)."""
        for name in [tool] if tool is not None else list(self._progress):
            if (last := self._progress.pop(name, None)) is not None:
                event, notices = last
                count = f" ({notices} progress notices)" if notices > 1 else ""
                self.console.print(progress_line(event) + count, style="dim", markup=False)

    def _help(self, event: HelpShown) -> None:
        say = self.console.print
        commands = [(command["usage"], command["description"]) for command in event["commands"]]
        prompts = [((row["command"] + " " + row["arguments"]).strip(), row["description"])
                   for row in event["prompts"]]
        width = max(len(usage) for usage, _ in commands + prompts)  # one column for both lists
        say("Chat commands:", markup=False)
        for usage, description in commands:
            say(f"  {usage:<{width}}  {description}", markup=False)
        if prompts:
            say("Prompt commands (their messages go to the model):", markup=False)
            for usage, description in prompts:
                say(f"  {usage:<{width}}  {description}", markup=False)
        say("Anything else is a message to the model.", markup=False)

    async def ask_approval(self, approval: ApprovalAsked) -> dict[str, Any]:
        self._end_answer_line()
        asking = f"{by_agent(approval)}{approval['tool']} wants to run with {json.dumps(approval['args'])}"
        self.console.print(asking, style="yellow", markup=False)
        if (rule := approval.get("policy")) is not None:
            because = f": {rule['reason']}" if rule["reason"] else ""
            self.console.print(f"asked by {rule['source']}{because}", style="yellow", markup=False)
        while True:
            answer = (await self.reader.read(approval_question(edit=True)) or "").strip().lower()
            if answer in YES:
                return {"action": "approve"}
            if answer in NO:
                reason = await self.reader.read("reason (optional): ")
                return {"action": "deny", "reason": reason or "denied by the user"}
            if answer in ("e", "edit"):
                raw = await self.reader.read("arguments as JSON: ", default=json.dumps(approval["args"]))
                try:
                    args = json.loads(raw or "")
                except json.JSONDecodeError as exc:
                    self.console.print(f"not JSON: {exc}", style="red", markup=False)
                    continue
                if isinstance(args, dict):
                    self.console.print(f"→ {approval['tool']} {json.dumps(args)}", style="cyan", markup=False)
                    return {"action": "edit", "args": args}
                self.console.print("arguments must be a JSON object", style="red")
            else:
                self.console.print("answer y, n or e (yes, no, or edit the arguments)", style="red",
                                   markup=False)


class LineSource(Protocol):
    """Where a view reads lines: a LineReader, or the line editor (runner.cli.editor)."""

    async def read(self, prompt: str, *, message: bool = False, default: str = "",
                   choices: Sequence[str] = ()) -> str | None: ...


class JsonLinesView:
    """The chat for a program: one JSON object a line in, one event a line out (README)."""

    def __init__(self, reader: LineSource) -> None:
        self.reader = reader

    @asynccontextmanager
    async def working(self) -> AsyncIterator[None]:
        yield

    def show(self, event: Event, *, in_full: bool = False) -> None:
        click.echo(json.dumps(event, default=str))
        sys.stdout.flush()

    async def next_object(self) -> dict[str, Any] | None:
        # Here, not at the top: runner.hosting.mcp loads the agent, which `tools` and `call` do not need.
        from runner.hosting.mcp.malformed import NESTING_WORDS, too_deep

        while True:
            line = await self.reader.read("")
            if line is None:
                return None
            if not line.strip():
                continue
            if too_deep(line):  # json.loads would recurse once per level, to a RecursionError
                self.show({"type": "error",
                           "message": f"an input line must be a JSON object: {NESTING_WORDS}"})
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                self.show(ChatError(type="error", message=f"an input line must be a JSON object: {exc}"))
                continue
            if isinstance(value, dict):
                return value
            self.show(ChatError(type="error", message="an input line must be a JSON object"))

    async def read(self) -> str | None:
        while True:
            value = await self.next_object()
            if value is None:
                return None
            if isinstance(value.get("text"), str):
                return str(value["text"])
            pending = "no approval is pending; " if "action" in value else ""
            self.show(ChatError(type="error",
                                message=pending + 'expected {"text": "a message or a /command"}'))

    async def ask_approval(self, approval: ApprovalAsked) -> dict[str, Any]:
        asked = ApprovalAsked(type="approval", tool=approval["tool"], args=approval["args"],
                              id=approval["id"])
        if "agent" in approval:
            asked["agent"] = approval["agent"]
        if "policy" in approval:  # the rule of ``policy`` that asks
            asked["policy"] = approval["policy"]
        self.show(asked)
        while True:
            value = await self.next_object()
            if value is None:
                return {"action": "deny", "reason": "the input ended"}
            action = value.get("action")
            if action == "approve":
                return {"action": "approve"}
            if action == "deny":
                return {"action": "deny", "reason": str(value.get("reason") or "denied")}
            if action == "edit" and isinstance(value.get("args"), dict):
                # The call now runs with other arguments than its approval event showed: say so.
                self.show(ToolCall(type="tool_call", name=approval["tool"], args=value["args"],
                                   id=approval["id"], edited=True))
                return {"action": "edit", "args": value["args"]}
            self.show(ChatError(type="error", message='expected an approval answer: {"action": "approve"}, '
                                '{"action": "deny", "reason": "..."} or {"action": "edit", "args": {...}}'))
