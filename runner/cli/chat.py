"""``mcp-run FILE``: the interactive chat, and one-shot turns with ``-p``.

The chat streams the model's tokens, shows each tool call with a short preview of its result,
asks before tools that need approval, and takes slash commands. Ctrl-C stops the current turn; a
second Ctrl-C (or one at the prompt) exits. Servers are always shut down on the way out.
"""

from __future__ import annotations

import json
import signal
import sys
from functools import partial
from typing import Any

import anyio
import click
from langgraph.types import Command
from rich.console import Console

from runner.cli import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, main, reports_errors, stderr, stdout
from runner.cli.auth import offer_logins
from runner.errors import ManifestError, PromptError, RunnerError
from runner.graph import MAX_STEPS_REASON
from runner.reload import reload_runtime, watch_and_reload
from runner.runtime import Runtime, load_agent, stream_turn
from runner.servers import stop_on_signals

PREVIEW_CHARS = 160


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


@main.command(hidden=True)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-p", "--prompt", "text", help="Run one turn with TEXT and print the final answer.")
@click.option("--json", "as_json", is_flag=True, help="With -p: print the turn's events as JSON lines.")
@click.option("--thread", "thread_id", help="Resume the conversation with this thread id.")
@click.option("--yes", is_flag=True, help="With -p: approve tools that need approval.")
@click.option("--watch", is_flag=True, help="Reload the manifest, templates and modules on change.")
@reports_errors
def run(file: str, text: str | None, as_json: bool, thread_id: str | None, yes: bool, watch: bool) -> None:
    """Chat with the agent of FILE, or run one turn with -p."""
    if text is None:
        code = anyio.run(_until_signalled, partial(_chat, file, thread_id, watch))
    else:
        code = anyio.run(_until_signalled, partial(_one_shot, file, text, thread_id, as_json, yes))
    sys.exit(code)


async def _until_signalled(body: Any) -> int:
    """Run ``body``; SIGTERM or SIGHUP end it like a normal exit (servers stopped, no orphans)."""
    code = EXIT_INTERRUPTED
    async with stop_on_signals() as stopped:
        code = await body()
    if stopped.received is not None:
        stderr.print(f"stopped by {stopped.received.name}", style="yellow")
        return 128 + int(stopped.received)
    return code


async def _one_shot(file: str, text: str, thread_id: str | None, as_json: bool, yes: bool) -> int:
    async with load_agent(file, thread_id=thread_id) as runtime:
        stderr.print(f"thread {runtime.thread_id}", style="dim")
        message: str | Command = text
        final: dict[str, Any] | None = None
        while True:
            approval = None
            async for event in stream_turn(runtime, message):
                if as_json:
                    click.echo(json.dumps(event, default=str))
                elif event["type"] == "tool_call":
                    stderr.print(f"→ {event['name']} {json.dumps(event['args'])}", markup=False, style="cyan")
                elif event["type"] == "tool_result":
                    style = "red" if event["status"] == "error" else "dim"
                    stderr.print(f"← {_preview(event['text'])}", markup=False, style=style)
                if event["type"] == "approval":
                    approval = event
                elif event["type"] == "final":
                    final = event
            if approval is None:
                break
            if yes:
                message = Command(resume={"action": "approve"})
            else:
                stderr.print(f"denied {approval['tool']}: needs approval (pass --yes to allow)",
                             style="yellow", markup=False)
                message = Command(resume={"action": "deny", "reason": "not approved (one-shot run)"})
        if final is None:
            stderr.print("error: the turn ended without an answer", style="red")
            return EXIT_FAILURE
        if not as_json:
            click.echo(final["text"])
        return EXIT_FAILURE if final.get("reason") == MAX_STEPS_REASON else EXIT_OK


class _Interrupts:
    """Ctrl-C cancels the running turn; a second one while it stops, or one at the prompt, exits."""

    def __init__(self) -> None:
        self.turn: anyio.CancelScope | None = None
        self.exit = False

    def __call__(self, *_: Any) -> None:
        if self.turn is not None and not self.turn.cancel_called:
            self.turn.cancel()
        else:
            self.exit = True
            raise KeyboardInterrupt


async def _read_line(prompt: str) -> str | None:
    try:
        return await anyio.to_thread.run_sync(input, prompt, abandon_on_cancel=True)
    except EOFError:
        return None


async def _chat(file: str, thread_id: str | None, watch: bool) -> int:
    console = stdout
    interrupts = _Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts)
    spinner = console.status("starting servers…") if console.is_terminal else None
    if spinner is not None:
        spinner.start()
    try:
        async with load_agent(file, thread_id=thread_id) as runtime:
            if spinner is not None:
                spinner.stop()
                spinner = None
            if sys.stdin.isatty():
                await offer_logins(runtime, _read_line)
            if not watch:
                return await _converse(runtime, console, interrupts)
            stop = anyio.Event()
            async with anyio.create_task_group() as group:
                group.start_soon(partial(watch_and_reload, runtime, partial(print_reload, console),
                                         stop=stop))
                try:
                    return await _converse(runtime, console, interrupts)
                finally:
                    stop.set()
                    group.cancel_scope.cancel()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        if spinner is not None:
            spinner.stop()
        signal.signal(signal.SIGINT, previous)


async def _converse(runtime: Runtime, console: Console, interrupts: _Interrupts) -> int:
    runtime.listeners.append(lambda change: console.print(_change_line(change), style="dim", markup=False))
    console.print(
        f"{runtime.manifest.name} — {len(runtime.catalog.entries)} tools, model "
        f"{runtime.manifest.model.id}, thread {runtime.thread_id}. /help for commands.",
        style="dim", markup=False,
    )
    while True:
        line = await _read_line("> ")
        if line is None or line.strip() in ("/exit", "/quit"):
            return EXIT_OK
        line = line.strip()
        if not line:
            continue
        message: Any = line
        if line.startswith("/"):
            handled = await _slash_command(runtime, console, line)
            if handled is True:
                continue
            message = handled
        with anyio.CancelScope() as scope:
            interrupts.turn = scope
            await _turn(runtime, console, message)
        interrupts.turn = None
        if scope.cancelled_caught:
            console.print("\n(turn interrupted)", style="yellow")


async def _slash_command(runtime: Runtime, console: Console, line: str) -> Any:
    """Handle a chat command; True when handled, else the messages to send to the model."""
    word = line.split()[0]
    if word == "/help":
        console.print("/tools  /prompts  /thread [ID|new]  /exit, and the prompt commands below:",
                      markup=False)
        for command in runtime.prompt_catalog:
            console.print(f"  {command.usage}", markup=False)
        return True
    if word == "/tools":
        for entry in runtime.catalog.entries.values():
            first = (entry.description or "").strip().splitlines()
            console.print(f"{entry.name}  {first[0] if first else ''}", markup=False)
        return True
    if word == "/prompts":
        for command in runtime.prompt_catalog:
            console.print(f"{command.usage}  ({command.server}: {command.prompt.name})", markup=False)
        return True
    if word == "/thread":
        parts = line.split()
        if len(parts) > 1:
            import uuid

            runtime.thread_id = uuid.uuid4().hex[:12] if parts[1] == "new" else parts[1]
        console.print(f"thread {runtime.thread_id}", markup=False)
        return True
    if word == "/reload":
        try:
            print_reload(console, (report := await reload_runtime(runtime)).event()
                         | {"summary": report.summary()})
        except ManifestError as exc:
            print_reload(console, {"type": "reload_error", "problems": [str(p) for p in exc.problems]})
        return True
    try:
        return await runtime.prompt_messages(line)
    except PromptError as exc:
        console.print(f"{exc}", style="red", markup=False)
        return True
    except RunnerError as exc:
        console.print(f"error: {exc}", style="red", markup=False)
        return True


async def _turn(runtime: Runtime, console: Console, message: Any) -> None:
    streamed = False
    while True:
        approval = None
        async for event in stream_turn(runtime, message):
            kind = event["type"]
            if kind == "token":
                console.print(event["text"], end="", markup=False)
                streamed = True
            elif kind == "tool_call":
                if streamed:
                    console.print()
                    streamed = False
                console.print(f"→ {event['name']} {json.dumps(event['args'])}", style="cyan", markup=False)
            elif kind == "tool_result":
                style = "red" if event["status"] == "error" else "dim"
                console.print(f"← {_preview(event['text'])}", style=style, markup=False)
            elif kind == "approval":
                approval = event
            elif kind == "final" and not streamed and event["text"]:
                console.print(event["text"], markup=False)
        if streamed:
            console.print()
            streamed = False
        if approval is None:
            return
        message = Command(resume=await _ask_approval(console, approval))


async def _ask_approval(console: Console, approval: dict[str, Any]) -> dict[str, Any]:
    console.print(f"{approval['tool']} wants to run with {json.dumps(approval['args'])}",
                  style="yellow", markup=False)
    while True:
        answer = (await _read_line("approve? [y]es / [n]o / [e]dit: ") or "n").strip().lower()
        if answer in ("y", "yes"):
            return {"action": "approve"}
        if answer in ("n", "no"):
            reason = await _read_line("reason (optional): ")
            return {"action": "deny", "reason": reason or "denied by the user"}
        if answer in ("e", "edit"):
            raw = await _read_line("arguments as JSON: ")
            try:
                args = json.loads(raw or "")
            except json.JSONDecodeError as exc:
                console.print(f"not JSON: {exc}", style="red", markup=False)
                continue
            if isinstance(args, dict):
                return {"action": "edit", "args": args}
            console.print("arguments must be a JSON object", style="red")


def print_reload(console: Console, event: dict[str, Any]) -> None:
    """One line per reload; the located problems of an invalid edit (the agent keeps running)."""
    if event["type"] == "reload":
        console.print(event["summary"], style="green", markup=False)
        return
    for problem in event["problems"]:
        console.print(problem, style="red", markup=False)
    console.print("the manifest has problems; still running the last good version", style="yellow")


def _change_line(change: Any) -> str:
    parts = [f"+{name}" for name in change.added] + [f"−{name}" for name in change.removed]
    parts += [f"~{name}" for name in change.changed]
    return f"{change.server} {change.kind}: {' '.join(parts)}"
