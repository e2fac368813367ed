"""Commands that look at an agent without chatting: tools, call, prompts, prompt, watch.

Every text from the manifest or a server reaches rich as ``Text`` or with ``markup=False``.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import anyio
import click
from rich.table import Table
from rich.text import Text

from runner.agent.host import Host
from runner.agent.runtime import Runtime, load_agent
from runner.cli import EXIT_FAILURE, EXIT_INVALID, counted, main, reports_errors, stderr, stdout
from runner.cli.closed_output import stop_when_output_closes
from runner.cli.rows import (
    first_line,
    main_tool_names,
    offered_at_start,
    output_limit,
    output_text,
    prompt_rows,
    refused_arguments,
    tool_rows,
)
from runner.cli.safe_text import SafeConsole, visible
from runner.cli.status import progress_line
from runner.errors import PromptError, ToolError
from runner.events import Event, EventSink, ReloadEvent, Watching
from runner.manifest import did_you_mean
from runner.manifest.loading import load_manifest
from runner.servers import stop_on_signals
from runner.tools.suggest import unknown_tool_line

# A prompt message's role as MCP names it (LangChain's message types say human and ai).
ROLES = {"human": "user", "ai": "assistant"}
if TYPE_CHECKING:
    from runner.cli.media import SavedMedia


def _run(function: Any, *args: Any) -> Any:
    """Run ``function``; SIGTERM or SIGHUP end it like Ctrl-C (servers and containers stopped),
    and so does a closed output (runner.cli.closed_output)."""

    async def until_signalled() -> Any:
        async with stop_on_signals() as stopped, stop_when_output_closes() as output:
            return await function(*args)
        output.raise_if_closed()
        stderr.print(f"stopped by {stopped.received.name}", style="yellow")
        raise SystemExit(128 + int(stopped.received))

    return anyio.run(until_signalled)


CALL_MEDIA_FOLDER = "call"  # <state>/media/call/: the images, audio and files `mcp-run call` got


def _invalid(message: str) -> NoReturn:
    stderr.print(f"error: {message}", markup=False, style="red")
    raise SystemExit(EXIT_INVALID)


def print_table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A table whose columns but the last are never cut: wider than the terminal if need be (the
    terminal wraps the line; a name stays whole, to copy). The last column wraps."""
    rows = [tuple(map(visible, row)) for row in rows]  # measured as they will be shown
    widths = [max([len(header), *(len(row[index]) for row in rows)]) for index, header in enumerate(headers)]
    needed = sum(widths[:-1]) + 2 * len(headers) + min(widths[-1], 40)
    console = SafeConsole(file=stdout.file, width=max(stdout.width, needed), highlight=False)
    table = Table(*headers, box=None, show_edge=False)
    for column in table.columns[:-1]:
        column.no_wrap = True
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@reports_errors
def tools(file: str, as_json: bool) -> None:
    """List the tools the agent can call: generated name, server, original name, description.

    With tool search on, the model starts with search_tools and the tools marked * (pinned, local).
    """

    searching: list[bool] = []
    servers: dict[str, str] = {}  # each declared server's status once started

    def rows_of(runtime: Runtime) -> list[dict[str, Any]]:
        offered = offered_at_start(runtime)
        searching.append(offered is not None)
        servers.update({key: connection.status for key, connection in runtime.fleet.connections.items()})
        # the agents and handoffs are offered beside search_tools, as the pinned tools are
        return [{**row, "offered": offered is None or row["name"] in offered or row["kind"] != "tool"}
                for row in tool_rows(runtime, schemas=as_json)]

    def note(rows: list[dict[str, Any]]) -> str | None:
        if not any(searching):
            return None
        start = sum(row["offered"] for row in rows)
        return (f"tool search is on: the model is offered search_tools and the {start} marked *; "
                "it finds the others by searching")

    _print_listing(file, rows_of, as_json, ("name", "server", "original", "description"), lambda row: (
        ("* " if row["offered"] and any(searching) else "") + row["name"],
        row["server"] or ("local" if row["kind"] == "tool" else row["kind"]),
        row["original"], first_line(row["description"]) + (" (approval)" if row["approval"] else "")),
        "tool", note)
    if servers and "ready" not in servers.values():  # a script must tell "none started" from "none offered"
        stderr.print(f"error: no server could start ({len(servers)} declared)", markup=False, style="red")
        raise SystemExit(EXIT_FAILURE)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("name")
@click.argument("arguments", default="{}")
@click.option("--yes", is_flag=True, help="Approve a tool that needs approval without asking.")
@reports_errors
def call(file: str, name: str, arguments: str, yes: bool) -> None:
    """Call tool NAME with ARGUMENTS (a JSON object) exactly as the agent would; print the result.

    Arguments that do not fit the tool's input schema exit 2 before anything is asked or called.
    A call the manifest's policy (or tools.approve) asks about asks first on a terminal, and is
    denied otherwise unless --yes; a call it denies is refused with the rule and its reason.
    """
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        _invalid(f"ARGUMENTS is not valid JSON: {exc}")
    if not isinstance(parsed, dict):
        _invalid("ARGUMENTS must be a JSON object")

    async def call_tool() -> tuple[str, str | None, list[SavedMedia]] | str:
        # `sampling: allow` needs no one's approval, only the model: it is started for them.
        samples = any(getattr(spec, "sampling", None) == "allow"
                      for spec in load_manifest(file).manifest.servers.values())
        # The servers see the client `tools` lists with (a tool may be listed only to clients
        # declaring sampling); what no one can answer here is declined, and the result says so.
        async with load_agent(file, model=samples, host=_CallCommandHost()) as runtime:
            catalog = runtime.catalog
            if name not in catalog.entries and (down := _down_server(runtime, name)):
                stderr.print(down, markup=False, style="red")
                raise SystemExit(EXIT_FAILURE)
            unlisted = runtime.caller.unlisted(name)
            if name not in catalog.entries and unlisted is None:
                return unknown_tool_line(name, catalog.entries)
            if unlisted is not None:
                stderr.print(unlisted.warning(), markup=False, style="yellow")
            elif problems := runtime.caller.argument_problems(name, parsed):  # refused before anyone is asked
                return refused_arguments(name, problems, file)
            decision = runtime.caller.decide(name, parsed)  # a denial is the call's own error, below
            asks = decision is not None and decision.action == "ask"
            answer = await _ask_approval(name, parsed) if asks and not yes else True
            if not answer:
                assert decision is not None
                reason = "by you" if answer is False else f"{decision.unanswered()} (pass --yes to allow)"
                stderr.print(f"denied {name}: {reason}", markup=False, style="yellow")
                raise SystemExit(EXIT_FAILURE)
            try:
                output = await (runtime.caller.call(name, parsed) if unlisted is None
                                else runtime.caller.call_unlisted(unlisted, parsed))
            except ToolError as exc:  # said now, not once the servers have been stopped
                stderr.print(str(exc), markup=False, style="red")
                raise
            saved: list[SavedMedia] = []
            if not isinstance(output.content, str):  # text alone is a str: no media to save
                # Saved as the chat and -p save them, in a folder of the call command's own.
                # Imported here: the media module needs LangChain, which a text result does not.
                from runner.cli.media import MediaFolder, media_blocks

                saved = MediaFolder(runtime.fleet.state_dir).save(CALL_MEDIA_FOLDER, name, "call",
                                                                   media_blocks(output.content))
            return (*output_text(output, output_limit(runtime, name)), saved)

    try:
        result = _run(call_tool)
    except ToolError:
        raise SystemExit(EXIT_FAILURE) from None
    if isinstance(result, str):
        _invalid(result)
    text, structured, saved = result
    click.echo(visible(text))
    if structured is not None:
        stderr.print("structured content:", style="dim")
        click.echo(visible(structured), err=True)
    for media in saved:
        stderr.print(media.line(), markup=False, style="dim")


class _CallCommandHost(Host):
    """``mcp-run call``'s host: no one answers a server's questions (they are declined, and the
    result says so), sampling is declared, and the server's progress shows as the chat shows it."""

    def __init__(self) -> None:
        super().__init__(answers_questions=False, sampling="ask")

    def progress_sink(self) -> EventSink | None:
        return _show_progress


def _show_progress(event: Event) -> None:
    # The call's other events (a task's status, a URL visit completed) are not shown.
    if event["type"] == "progress":
        stderr.print(progress_line(event), markup=False, style="dim")


def _down_server(runtime: Runtime, name: str) -> str | None:
    """Why ``name`` is missing when its prefix is a configured server that is down: a runtime
    failure, not a mistyped name."""
    separator = runtime.manifest.agent.tool_separator
    for key, why in runtime.caller.down().items():
        if name.startswith(f"{key}{separator}"):
            why = why.removeprefix("failed: ").removeprefix(f"{key}: ")  # said once, not three times
            return f"error: server {key} is not available ({why}); tool '{name}' cannot be called"
    return None


async def _ask_approval(name: str, arguments: dict[str, Any]) -> bool | None:
    """Ask on a terminal (the same rule as the agent's); None when there is none to ask on."""
    if not sys.stdin.isatty():
        return None
    from runner.cli.terminal import NO, YES, LineReader, approval_question  # only a question needs it

    stderr.print(f"{name} wants to run with {json.dumps(arguments)}", style="yellow", markup=False)
    reader = LineReader(stderr)
    while True:  # asked as the chat asks
        answer = (await reader.read(approval_question(edit=False)) or "").strip().lower()
        if answer in YES or answer in NO:
            return answer in YES
        stderr.print("answer y or n (yes, or no)", style="red", markup=False)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@reports_errors
def prompts(file: str, as_json: bool) -> None:
    """List the prompt commands: alias or namespaced name, server, original name, arguments."""

    _print_listing(file, prompt_rows, as_json, ("command", "server", "original", "arguments"), lambda row: (
        row["command"], row["server"], row["original"], row["arguments"]), "prompt command")


Row = TypeVar("Row", bound=Mapping[str, Any])  # one row of a listing: a tool, a prompt command


def _print_listing(
    file: str,
    rows_of: Callable[[Runtime], list[Row]],
    as_json: bool,
    headers: tuple[str, ...],
    cells: Callable[[Row], tuple[str, ...]],
    noun: str,
    note: Callable[[list[Row]], str | None] = lambda rows: None,
) -> None:
    """A listing of the agent started without its model: JSON, or a table and a count."""

    async def listing() -> list[Row]:
        async with load_agent(file, model=False) as runtime:
            return rows_of(runtime)

    rows = _run(listing)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    print_table(headers, [cells(row) for row in rows])
    stdout.print(counted(len(rows), noun), style="dim")
    if (text := note(rows)) is not None:
        stdout.print(text, style="dim", markup=False)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("name")
@click.argument("arguments", nargs=-1)
@reports_errors
def prompt(file: str, name: str, arguments: tuple[str, ...]) -> None:
    """Render prompt NAME with key=value ARGUMENTS and print its messages."""
    line = "/" + name.lstrip("/") + "".join(" " + shlex.quote(argument) for argument in arguments)

    async def render() -> list[Any]:
        async with load_agent(file, model=False) as runtime:
            prompts = runtime.prompt_catalog
            wanted = name.lstrip("/")
            if wanted not in prompts:  # the catalog speaks of chat commands; here it is a prompt
                names = [command.name for command in prompts]
                raise PromptError(f"unknown prompt '{wanted}'{did_you_mean(wanted, names)}; "
                                  f"prompts: {', '.join(names) or 'none'}")
            return await runtime.prompt_messages(line)

    try:
        messages = _run(render)
    except PromptError as exc:  # an unknown prompt, a missing or malformed argument
        _invalid(str(exc))
    for message in messages:
        stdout.print(Text(f"[{ROLES.get(message.type, message.type)}]", style="bold"))
        content = message.content
        if isinstance(content, str):
            click.echo(visible(content))
            continue
        for block in content:
            if isinstance(block, str) or block.get("type") == "text":
                click.echo(visible(block if isinstance(block, str) else block.get("text", "")))
            else:
                click.echo(visible(f"[{block.get('type')} {block.get('mime_type', '')}]"))


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print events as JSON lines.")
@reports_errors
def watch(file: str, as_json: bool) -> None:
    """Edit FILE without running the model: re-validate and list the tools on every save."""
    from runner.agent.reconcile import ReloadReport
    from runner.agent.reload import watch_and_reload

    def show(runtime: Runtime, event: ReloadEvent) -> None:
        if as_json:
            event = event | {"tools": main_tool_names(runtime)} if event["type"] == "reload" else event
            click.echo(json.dumps(event), nl=True)
            return
        if event["type"] == "reload_error":
            for problem in event["problems"]:
                stderr.print(problem, markup=False)
            stderr.print("still running the last good version", style="yellow")
            return
        stdout.print(event["summary"], style="green", markup=False)
        stdout.print(", ".join(main_tool_names(runtime)) or "(no tools)", markup=False)

    async def follow() -> None:
        async with load_agent(file, model=False) as runtime:
            if as_json:
                click.echo(json.dumps(Watching(type="watching", tools=main_tool_names(runtime))))
            else:
                show(runtime, ReloadReport().event() | {"summary": "watching; tools:"})
            await watch_and_reload(runtime, lambda event: show(runtime, event), stop=anyio.Event())

    _run(follow)  # Ctrl-C: reports_errors says "interrupted" and exits 130
