"""``mcp-run FILE``: the chat (a person at a terminal, or a program speaking JSON lines with
``--json``) and one-shot turns with ``-p``; the command itself is ``runner.cli.file_command``.

The chat (``runner.cli.chat_session``, its commands in ``runner.cli.chat_commands``) first offers
to log in to each server it had to skip for want of a login (``runner.cli.logins``); it streams the
model's tokens, shows each tool call with a short preview of its result, and asks before tools that
need approval.

A one-shot turn prints the final answer on stdout (with ``--json``, every event of the turn), the
tool calls, the agents a workflow runs and diagnostics on stderr. Nobody is asked anything: a
tool that needs approval is denied unless ``--yes``, and a server's request for input is declined.
Servers are always shut down on the way out.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Sequence
from contextlib import aclosing
from functools import partial
from typing import Any, NoReturn

import anyio
import click
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.types import Command

from runner.agent.handoffs import handed_to
from runner.agent.host import Host
from runner.agent.nodes import MAX_STEPS_REASON
from runner.agent.reload import watch_and_reload
from runner.agent.resume import close_cut_off_turn, cut_off_turn
from runner.agent.runtime import Runtime, load_agent
from runner.agent.spending import LIMIT_REASON
from runner.agent.turns import stream_turn
from runner.cli import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, stderr, stdout
from runner.cli.chat_commands import CHAT_COMMAND_HELP
from runner.cli.chat_session import (
    CHAT_HANDLERS,
    LEAVE_COMMANDS,
    ChatSession,
    Interrupts,
    change_event,
    ready_event,
)
from runner.cli.closed_output import stop_when_output_closes
from runner.cli.completion import resolve_thread
from runner.cli.editor import chat_reader
from runner.cli.logins import offer_logins
from runner.cli.media import MediaFolder, save_turn_media
from runner.cli.safe_text import visible
from runner.cli.status import ChatStatus
from runner.cli.terminal import (
    ChatView,
    JsonLinesView,
    StartupSpinner,
    TerminalView,
    by_agent,
    change_line,
    handoff_line,
    preview,
    step_start_line,
)
from runner.errors import RunnerError
from runner.events import ApprovalAsked, ChatError, FinalAnswer, Interrupted, ToolResult
from runner.manifest import MAIN_AGENT
from runner.models.retries import model_call_line
from runner.servers import CatalogueChange, stop_on_signals
from runner.store.thread_locks import thread_turn
from runner.task_groups import background_tasks

# Importing chat_commands registers the chat commands' handlers with the chat session.
__all__ = ["CHAT_COMMAND_HELP", "CHAT_HANDLERS", "LEAVE_COMMANDS", "run_agent"]


RECAP_LINES = 6  # of the resumed thread's last messages


def run_agent(file: str, text: str | None, *, as_json: bool, thread_id: str | None, yes: bool,
              watch: bool, agent: str | None = None) -> NoReturn:
    """The chat with the agent of FILE, or one turn with ``text`` (``mcp-run FILE``'s options;
    ``agent``: the agent the conversation is switched to from the first message)."""
    if text is None:
        code = anyio.run(_until_signalled, partial(_chat, file, thread_id, watch, as_json, yes, agent))
    else:
        code = anyio.run(_until_signalled, partial(_one_shot, file, text, thread_id, as_json, yes, agent))
    sys.exit(code)


async def _until_signalled(body: Any) -> int:
    """Run ``body``; SIGTERM or SIGHUP end it like a normal exit (servers stopped, no orphans), and
    so does a closed output (``mcp-run FILE --json | head -1``: exit 141)."""
    code = EXIT_INTERRUPTED
    async with stop_on_signals() as stopped, stop_when_output_closes() as output:
        code = await body()
    output.raise_if_closed()
    if stopped.received is not None:
        stderr.print(f"stopped by {stopped.received.name}", style="yellow")
        return 128 + int(stopped.received)
    return code


async def _one_shot(file: str, text: str, thread_id: str | None, as_json: bool, yes: bool,
                    agent: str | None = None) -> int:
    # Nobody answers a server's request for input here: it is declined at once, the model told.
    async with load_agent(file, thread_id=thread_id, host=Host(answers_questions=False)) as runtime:
        note = ""
        if thread_id is not None:
            # Told once another run's turn of the thread has ended (the lock says it waits), so
            # "new" or "resumed" is what this turn finds, not what the thread was before that turn.
            async with thread_turn(runtime.checkpointer, thread_id):
                resolved, note = await resolve_thread(runtime, thread_id)
                runtime.use_thread(resolved)
                if (cut_off := await cut_off_turn(runtime)) is not None:
                    # A new message closes it: the model hears its unfinished calls were stopped.
                    await close_cut_off_turn(runtime, cut_off)
                    note = f"{note}; {visible(cut_off.note())}: closed (the chat's /resume would continue it)"
        stderr.print(note or f"thread {runtime.thread_id}", style="dim", markup=False, highlight=False)
        if as_json:  # a script continues the thread from here (--thread), knows the tools
            click.echo(json.dumps(ready_event(runtime)))
        runtime.listeners.append(partial(_show_change, as_json=as_json))
        final: FinalAnswer | None = None
        # Ctrl-C stops the turn (its tool calls and tasks cancelled on the servers) and says so;
        # a second one while it stops interrupts the way out (the servers are still stopped).
        try:
            async with stop_on_signals(signal.SIGINT) as interrupted:
                final = await _turn_until_answered(runtime, text, as_json=as_json, yes=yes, switch_to=agent)
        except RunnerError as exc:  # the model (after its retries and fallbacks), an answer object
            if not as_json:
                raise
            # A program reading the events learns why there is no `final` (and exit 1, as without --json).
            click.echo(json.dumps(ChatError(type="error", message=f"the turn failed: {exc}")))
            stderr.print(f"error: the turn failed: {exc}", style="red", markup=False)
            return EXIT_FAILURE
        if interrupted.received is not None:
            if as_json:
                click.echo(json.dumps(Interrupted(type="interrupted", what="turn")))
            else:
                stderr.print("interrupted", style="yellow")
            return EXIT_INTERRUPTED
        if final is None:
            if as_json:
                click.echo(json.dumps(ChatError(type="error", message="the turn ended without an answer")))
            stderr.print("error: the turn ended without an answer", style="red")
            return EXIT_FAILURE
        if not as_json:  # the answer object (``output:``) as JSON, ASCII-escaped: nothing to render
            click.echo(json.dumps(final["output"], indent=2) if "output" in final else visible(final["text"]))
        return EXIT_FAILURE if final.get("reason") in (MAX_STEPS_REASON, LIMIT_REASON) else EXIT_OK


def _show_change(change: CatalogueChange, *, as_json: bool) -> None:
    """A server's tools (prompts, resources) changed during the turn."""
    if as_json:
        click.echo(json.dumps(change_event(change)))
    else:
        stderr.print(change_line(change_event(change)), style="dim", markup=False)


async def _turn_until_answered(runtime: Runtime, text: str, *, as_json: bool, yes: bool,
                               switch_to: str | None = None) -> FinalAnswer | None:
    """Run the turn, approving (``--yes``) or denying each call that needs approval; its final
    event. ``switch_to``: the agent the conversation goes to first (``--agent``)."""
    message: str | Command = text
    final: FinalAnswer | None = None
    media = MediaFolder(runtime.fleet.state_dir)
    while True:
        approval: ApprovalAsked | None = None
        results: list[ToolResult] = []
        turn = stream_turn(runtime, message, switch_to=switch_to if isinstance(message, str) else None)
        async with aclosing(turn) as events:  # closed, even by a failed write
            async for event in events:
                if event["type"] == "tool_result":
                    results.append(event)
                started = step_start_line(event)  # a workflow's step: shown as a call would be
                if as_json:
                    click.echo(json.dumps(event, default=str))
                elif started is not None:
                    stderr.print(started, markup=False, style="cyan")
                elif event["type"] == "tool_call":
                    called = f"{by_agent(event)}→ {event['name']} {json.dumps(event['args'])}"
                    stderr.print(called, markup=False, style="cyan")
                elif event["type"] == "tool_result":
                    style = "red" if event["status"] == "error" else "dim"
                    stderr.print(f"{by_agent(event)}← {preview(event['text'])}", markup=False, style=style)
                elif event["type"] in ("model_retry", "model_fallback"):
                    stderr.print(model_call_line(event), markup=False, style="yellow")
                elif event["type"] == "handoff":
                    stderr.print(handoff_line(event), markup=False, style="magenta")
                if event["type"] == "approval":
                    approval = event
                elif event["type"] == "final":
                    final = event
        for saved in await save_turn_media(runtime, media, results):
            if as_json:
                click.echo(json.dumps(saved.event()))
            else:
                stderr.print(saved.line(), markup=False, style="dim")
        if approval is None:
            return final
        if yes:
            message = Command(resume={"action": "approve"})
        else:
            asks = approval_needed(approval)
            stderr.print(denied_line(approval), style="yellow", markup=False)
            message = Command(resume={"action": "deny", "asked": False,
                                      "reason": f"a one-shot run cannot ask, and it {asks}"})


def approval_needed(approval: ApprovalAsked) -> str:
    """``needs approval (policy rule 2: why)``: what a one-shot run says of a call it cannot ask about."""
    rule = approval.get("policy")
    asks = "needs approval"
    if rule is not None:
        asks += f" ({rule['source']}" + (f": {rule['reason']}" if rule["reason"] else "") + ")"
    return asks


def denied_line(approval: ApprovalAsked) -> str:
    """The line of a call a one-shot run denies, named by the agent that made it as its other
    lines are (``writer: denied notes__add_note: …``)."""
    return (f"{by_agent(approval)}denied {approval['tool']}: {visible(approval_needed(approval))} and no one "
            "can answer here (pass --yes to allow)")


async def _chat(file: str, thread_id: str | None, watch: bool, as_json: bool, yes: bool,
                agent: str | None = None) -> int:
    interrupts = Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts)
    spinner = StartupSpinner(stdout, "starting servers…") if not as_json else None
    if spinner is not None:
        spinner.start()
    try:
        async with load_agent(file, thread_id=thread_id, host=Host()) as runtime:
            if spinner is not None:
                spinner.stop()
                spinner = None
            if thread_id is not None:
                resolved, note = await resolve_thread(runtime, thread_id)
                runtime.use_thread(resolved)
                (stderr if as_json else stdout).print(note, markup=False, highlight=False)
                if not as_json:
                    for line in await _recap(runtime):
                        stdout.print(line, style="dim", markup=False, highlight=False)
            return await _converse(runtime, interrupts, watch=watch, as_json=as_json, yes=yes, agent=agent)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        if spinner is not None:
            spinner.stop()
        signal.signal(signal.SIGINT, previous)


async def _recap(runtime: Runtime) -> list[str]:
    """The last messages of the resumed thread, a line each: what was said, the tools called."""
    state = await runtime.graph.aget_state(runtime.config())
    values = state.values or {}
    return recap_lines(values.get("messages", []), values.get("agent") or MAIN_AGENT)


def recap_lines(messages: Sequence[BaseMessage], current: str) -> list[str]:
    """:func:`_recap`'s lines of ``messages``, each model message labelled by the agent that wrote
    it (``agent``: the main one): the thread's handoffs say who answered from each on. Before the
    first handoff main answered; in a thread with none, the agent answering it now (``current``:
    the thread was switched to it)."""
    speaker = MAIN_AGENT if any(handed_to(message) for message in messages) else current
    lines = []
    for message in messages:
        label = "agent" if speaker == MAIN_AGENT else speaker
        if isinstance(message, HumanMessage):
            lines.append(f"  you: {preview(message.text)}")
        elif isinstance(message, AIMessage):
            lines.extend(f"  {label} → {call['name']}" for call in message.tool_calls)
            if message.text:
                lines.append(f"  {label}: {preview(message.text)}")
        speaker = handed_to(message) or speaker
    return lines[-RECAP_LINES:]


async def _converse(runtime: Runtime, interrupts: Interrupts, *, watch: bool, as_json: bool,
                    yes: bool, agent: str | None = None) -> int:
    status = ChatStatus(runtime)
    async with chat_reader(stdout, runtime, as_json=as_json, status=status, interrupt=interrupts) as reader, \
            background_tasks() as group:  # the watcher, with --watch
        view: ChatView = JsonLinesView(reader) if as_json else TerminalView(stdout, reader, status)
        session = ChatSession(runtime, view, interrupts, yes=yes, agent=agent)
        if not as_json and sys.stdin.isatty():  # before watching: a login started here is no edit
            await offer_logins(runtime, reader.read)
        if watch:  # the chat starts once edits are seen, so that none is missed
            watching = anyio.Event()
            group.start_soon(partial(watch_and_reload, runtime, session.show_reload, stop=anyio.Event(),
                                     ready=watching))
            await watching.wait()
        code = await session.run()
    return code
