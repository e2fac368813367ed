"""``mcp-run FILE``: the chat (a person at a terminal, or a program speaking JSON lines with
``--json``) and one-shot turns with ``-p``.

On a terminal, the chat first offers to log in to each server it had to skip for want of a login
(``runner.cli.logins``). It streams the model's tokens, shows each tool call with a short preview
of its result, asks before tools that need approval, and takes chat commands (``CHAT_COMMANDS``)
and prompt commands. Ctrl-C stops the current turn; a second Ctrl-C (or one at the prompt) exits. Servers
are always shut down on the way out.
"""

from __future__ import annotations

import json
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import click
from langgraph.types import Command

from runner.cli import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, reports_errors, stderr, stdout
from runner.cli.completion import resolve_thread
from runner.cli.editor import chat_reader
from runner.cli.logins import offer_logins
from runner.cli.media import MediaFolder, media_blocks, save_turn_media
from runner.cli.questions import QUESTION_EVENTS, answer_question
from runner.cli.rows import offered_tools, output_limit, output_text, prompt_rows, tool_rows
from runner.cli.status import ChatStatus
from runner.cli.terminal import ChatView, JsonLinesView, StartupSpinner, TerminalView, preview
from runner.errors import CaseSaveError, ManifestError, RunnerError, ToolError
from runner.evals.saving import save_case
from runner.graph import MAX_STEPS_REASON
from runner.manifest import CHAT_COMMANDS, did_you_mean
from runner.reload import reload_runtime, watch_and_reload
from runner.runtime import Runtime, load_agent
from runner.servers import stop_on_signals
from runner.tools.suggest import unknown_tool_line
from runner.turns import stream_turn


class _FileCommand(click.Command):
    """Its usage reads ``mcp-run FILE [OPTIONS]``: the file stands where a command name would."""

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.parent.command_path if ctx.parent else "mcp-run", "FILE [OPTIONS]")


@click.command(cls=_FileCommand)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-p", "--prompt", "text", help="Run one turn with TEXT and print the final answer.")
@click.option("--json", "as_json", is_flag=True,
              help="Events as JSON lines: with -p the turn's; without, a chat that reads JSON lines.")
@click.option("--thread", "thread_id", help="Resume the conversation with this thread id.")
@click.option("--yes", is_flag=True, help="Approve tools that need approval without asking.")
@click.option("--watch", is_flag=True, help="Reload the manifest, templates and modules on change.")
@reports_errors
def run_file(file: str, text: str | None, as_json: bool, thread_id: str | None, yes: bool,
             watch: bool) -> None:
    """Chat with the agent of FILE, or run one turn with -p."""
    if text is None:
        code = anyio.run(_until_signalled, partial(_chat, file, thread_id, watch, as_json, yes))
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
    # Nobody answers a server's request for input here: it is declined at once, the model told.
    async with load_agent(file, thread_id=thread_id, interactive=False) as runtime:
        note = ""
        if thread_id is not None:
            runtime.thread_id, note = await resolve_thread(runtime, thread_id)
        stderr.print(note or f"thread {runtime.thread_id}", style="dim", markup=False, highlight=False)
        message: str | Command = text
        final: dict[str, Any] | None = None
        media = MediaFolder(runtime.fleet.state_dir)
        while True:
            approval = None
            results = []
            async for event in stream_turn(runtime, message):
                if event["type"] == "tool_result":
                    results.append(event)
                if as_json:
                    click.echo(json.dumps(event, default=str))
                elif event["type"] == "tool_call":
                    stderr.print(f"→ {event['name']} {json.dumps(event['args'])}", markup=False,
                                 style="cyan")
                elif event["type"] == "tool_result":
                    style = "red" if event["status"] == "error" else "dim"
                    stderr.print(f"← {preview(event['text'])}", markup=False, style=style)
                if event["type"] == "approval":
                    approval = event
                elif event["type"] == "final":
                    final = event
            for saved in await save_turn_media(runtime, media, results):
                if as_json:
                    click.echo(json.dumps(saved.event()))
                else:
                    stderr.print(f"saved {saved.mime_type} from {saved.tool}: {saved.path}", markup=False,
                                 style="dim")
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

    def __call__(self, *_: Any) -> None:
        if self.turn is not None and not self.turn.cancel_called:
            self.turn.cancel()
        else:
            raise KeyboardInterrupt


async def _chat(file: str, thread_id: str | None, watch: bool, as_json: bool, yes: bool) -> int:
    interrupts = _Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts)
    spinner = StartupSpinner(stdout, "starting servers…") if not as_json else None
    if spinner is not None:
        spinner.start()
    try:
        async with load_agent(file, thread_id=thread_id) as runtime:
            if spinner is not None:
                spinner.stop()
                spinner = None
            if thread_id is not None:
                runtime.thread_id, note = await resolve_thread(runtime, thread_id)
                if note:
                    (stderr if as_json else stdout).print(note, markup=False, highlight=False)
            return await _converse(runtime, interrupts, watch=watch, as_json=as_json, yes=yes)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        if spinner is not None:
            spinner.stop()
        signal.signal(signal.SIGINT, previous)


async def _converse(runtime: Runtime, interrupts: _Interrupts, *, watch: bool, as_json: bool,
                    yes: bool) -> int:
    code = EXIT_OK
    error: BaseException | None = None
    status = ChatStatus(runtime)
    async with chat_reader(stdout, runtime, as_json=as_json, status=status, interrupt=interrupts) as reader, \
            anyio.create_task_group() as group:  # the watcher, with --watch
        view: ChatView = JsonLinesView(reader) if as_json else TerminalView(stdout, reader, status)
        session = ChatSession(runtime, view, interrupts, yes=yes)
        if not as_json and sys.stdin.isatty():  # before watching: a login started here is no edit
            await offer_logins(runtime, reader.read)
        if watch:  # the chat starts once edits are seen, so that none is missed
            watching = anyio.Event()
            group.start_soon(partial(watch_and_reload, runtime, session.show_reload, stop=anyio.Event(),
                                     ready=watching))
            await watching.wait()
        try:
            code = await session.run()
        except BaseException as exc:  # re-raised below unwrapped, once the group has stopped
            error = exc
        finally:
            group.cancel_scope.cancel()
    if error is not None:
        raise error
    return code


# What /help says of each chat command; the names are manifest.CHAT_COMMANDS (prompt commands may
# not take them), and tests/test_cli_chat.py checks that each has a description and a handler.
CHAT_COMMAND_HELP = {
    "help": ("/help", "this list"),
    "tools": ("/tools", "the tools the model sees"),
    "prompts": ("/prompts", "the prompt commands"),
    "call": ("/call NAME {json}",
             "call a tool directly, without the model (asks first if it needs approval)"),
    "thread": ("/thread [ID|new]", "show the conversation thread, switch to ID, or start a new one"),
    "reload": ("/reload", "reload the manifest, templates and modules now"),
    "save": ("/save NAME", "write the conversation so far as the test case evals/NAME.yaml"),
    "media": ("/media", "the images, audio and files tools returned in this thread, saved as files"),
    "exit": ("/exit", "leave the chat (or Ctrl-D)"),
    "quit": ("/quit", "leave the chat"),
}
LEAVE_COMMANDS = ("exit", "quit")

Handler = Callable[["ChatSession", str], Awaitable[None]]
CHAT_HANDLERS: dict[str, Handler] = {}


def chat_command(name: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        CHAT_HANDLERS[name] = handler
        return handler

    return register


class ChatSession:
    """One chat over a running agent, shown through a view (a terminal or JSON lines)."""

    def __init__(self, runtime: Runtime, view: ChatView, interrupts: _Interrupts, *,
                 yes: bool = False) -> None:
        self.runtime = runtime
        self.view = view
        self.interrupts = interrupts
        self.yes = yes
        self.direct_calls = 0
        self.media = MediaFolder(runtime.fleet.state_dir)
        runtime.listeners.append(self._show_change)

    async def run(self) -> int:
        runtime = self.runtime
        self.view.show({"type": "ready", "name": runtime.manifest.name, "model": runtime.manifest.model.id,
                        "thread": runtime.thread_id, "tools": sorted(runtime.catalog.entries)})
        while True:
            line = await self.view.read()
            if line is None:
                return EXIT_OK
            line = line.strip()
            if not line:
                continue
            if not line.startswith("/"):
                await self._interruptible(partial(self._turn, line))
                continue
            name = line[1:].split(maxsplit=1)[0] if line[1:].strip() else ""
            if name in LEAVE_COMMANDS:
                return EXIT_OK
            if name in CHAT_HANDLERS:
                await self._interruptible(partial(CHAT_HANDLERS[name], self, line))
            elif name in runtime.prompt_catalog:
                await self._prompt_command(line)
            else:
                self.error(self._unknown_command(name))

    def error(self, message: str) -> None:
        self.view.show({"type": "error", "message": message})

    def _unknown_command(self, name: str) -> str:
        prompts = [command.name for command in self.runtime.prompt_catalog]
        hint = did_you_mean(f"/{name}", [f"/{command}" for command in (*CHAT_COMMANDS, *prompts)])
        known = ", ".join(f"/{command}" for command in CHAT_COMMANDS)
        if prompts:
            known += "; prompt commands: " + ", ".join(f"/{prompt}" for prompt in prompts)
        return f"unknown command '/{name}'{hint}; commands: {known}"

    async def _interruptible(self, work: Callable[[], Awaitable[None]]) -> None:
        with anyio.CancelScope() as scope:
            self.interrupts.turn = scope
            async with self.view.working():
                await work()
        self.interrupts.turn = None
        if scope.cancelled_caught:
            self.view.show({"type": "interrupted"})

    async def _prompt_command(self, line: str) -> None:
        try:
            messages = await self.runtime.prompt_messages(line)
        except RunnerError as exc:
            self.error(str(exc))
            return
        await self._interruptible(partial(self._turn, messages))

    async def _turn(self, message: Any) -> None:
        while True:
            pending = None  # an interrupt: a tool call to approve, or a server's question
            results = []
            async for event in stream_turn(self.runtime, message):
                if event["type"] in ("approval", *QUESTION_EVENTS):
                    pending = event
                else:
                    self.view.show(event)
                    if event["type"] == "tool_result":
                        results.append(event)
            for saved in await save_turn_media(self.runtime, self.media, results):
                self.view.show(saved.event())
            if pending is None:
                return
            if pending["type"] == "approval":
                message = Command(resume=await self.approve(pending))
            else:
                message = Command(resume=await answer_question(self.view, pending))

    async def approve(self, approval: dict[str, Any]) -> dict[str, Any]:
        if self.yes:
            return {"action": "approve"}
        return await self.view.ask_approval(approval)

    def _show_change(self, change: Any) -> None:
        self.view.show({"type": "change", "server": change.server, "kind": change.kind,
                        "added": list(change.added), "removed": list(change.removed),
                        "changed": list(change.changed)})

    def show_reload(self, event: dict[str, Any]) -> None:
        if event["type"] == "reload":
            event = event | {"tools": sorted(self.runtime.catalog.entries)}
        self.view.show(event)


@chat_command("help")
async def _help(session: ChatSession, line: str) -> None:
    commands = [{"command": f"/{name}", "usage": CHAT_COMMAND_HELP[name][0],
                 "description": CHAT_COMMAND_HELP[name][1]} for name in CHAT_COMMANDS]
    session.view.show({"type": "help", "commands": commands, "prompts": prompt_rows(session.runtime)})


@chat_command("tools")
async def _tools(session: ChatSession, line: str) -> None:
    offered = await offered_tools(session.runtime)
    rows = [{**{key: row[key] for key in ("name", "server", "original", "description", "approval")},
             "bound": offered is None or row["name"] in offered} for row in tool_rows(session.runtime)]
    session.view.show({"type": "tools", "tools": rows, "search": offered is not None})


@chat_command("prompts")
async def _prompts(session: ChatSession, line: str) -> None:
    session.view.show({"type": "prompts", "prompts": prompt_rows(session.runtime)})


@chat_command("thread")
async def _thread(session: ChatSession, line: str) -> None:
    parts = line.split()
    note = ""
    if len(parts) > 1 and parts[1] == "new":
        session.runtime.thread_id = uuid.uuid4().hex[:12]
    elif len(parts) > 1:
        session.runtime.thread_id, note = await resolve_thread(session.runtime, parts[1])
    session.view.show({"type": "thread", "thread": session.runtime.thread_id, "note": note})


@chat_command("reload")
async def _reload(session: ChatSession, line: str) -> None:
    try:
        report = await reload_runtime(session.runtime)
    except ManifestError as exc:
        session.show_reload({"type": "reload_error", "problems": [str(problem) for problem in exc.problems]})
        return
    session.show_reload(report.event() | {"summary": report.summary()})


@chat_command("save")
async def _save(session: ChatSession, line: str) -> None:
    """``/save NAME``: the thread so far as a case for ``mcp-run test``, beside the manifest."""
    name = line.removeprefix("/save").strip()
    if not name:
        session.error("usage: /save NAME (the case is written to evals/NAME.yaml)")
        return
    runtime = session.runtime
    state = await runtime.graph.aget_state(runtime.config())
    try:
        path = save_case(runtime.loaded.path, name, state.values.get("messages", []))
    except CaseSaveError as exc:
        session.error(str(exc))
        return
    session.view.show({"type": "saved", "case": name, "path": str(path)})


@chat_command("call")
async def _call(session: ChatSession, line: str) -> None:
    """``/call NAME {json}``: the tool through the catalog (validation, timeout, fallback), as
    ``mcp-run call`` does; outside the conversation, so the model does not see it."""
    name, _, raw = line.removeprefix("/call").strip().partition(" ")
    catalog = session.runtime.catalog
    if not name:
        session.error('usage: /call NAME {"arg": value}; /tools lists the tools')
        return
    if name not in catalog.entries:
        session.error(unknown_tool_line(name, catalog.entries))
        return
    try:
        args = json.loads(raw.strip() or "{}")
    except json.JSONDecodeError as exc:
        session.error(f"the arguments of /call must be a JSON object: {exc}")
        return
    if not isinstance(args, dict):
        session.error("the arguments of /call must be a JSON object")
        return
    session.direct_calls += 1
    call_id = f"direct_{session.direct_calls}"
    session.view.show({"type": "tool_call", "name": name, "args": args, "id": call_id})
    if catalog.needs_approval(name):
        answer = await session.approve({"type": "approval", "tool": name, "args": args, "id": call_id})
        if answer["action"] == "deny":
            session.view.show({"type": "tool_result", "name": name, "id": call_id, "status": "error",
                               "text": f"denied: {answer['reason']}"}, in_full=True)
            return
        args = answer.get("args", args)
    try:
        output = await catalog.call(name, args)
    except ToolError as exc:
        session.view.show({"type": "tool_result", "name": name, "id": call_id, "status": "error",
                           "text": str(exc)}, in_full=True)
        return
    text, structured = output_text(output, output_limit(session.runtime, name))
    if structured is not None:
        text = f"{text}\nstructured content:\n{structured}" if text else structured
    session.view.show({"type": "tool_result", "name": name, "id": call_id, "status": "success",
                       "text": text}, in_full=True)
    if not isinstance(output.content, str):
        thread = session.runtime.thread_id
        for saved in session.media.save(thread, name, call_id, media_blocks(output.content)):
            session.view.show(saved.event())


@chat_command("media")
async def _media(session: ChatSession, line: str) -> None:
    thread = session.runtime.thread_id
    files = [str(path) for path in session.media.files(thread)]
    session.view.show({"type": "media_list", "thread": thread, "folder": str(session.media.folder(thread)),
                       "files": files})
