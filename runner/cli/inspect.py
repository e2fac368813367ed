"""Commands that look at an agent without chatting: tools, call, prompts, prompt."""

from __future__ import annotations

import json
from typing import Any

import anyio
import click
from rich.table import Table

from runner.cli import EXIT_FAILURE, EXIT_INVALID, main, reports_errors, stderr, stdout
from runner.errors import ToolError
from runner.runtime import Runtime, load_agent


def _run(function: Any, *args: Any) -> Any:
    return anyio.run(function, *args)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@reports_errors
def tools(file: str, as_json: bool) -> None:
    """List the tools the model sees: generated name, server, original name, description."""

    async def list_tools() -> list[dict[str, Any]]:
        async with load_agent(file, model=False) as runtime:
            return [
                {
                    "name": entry.name,
                    "server": entry.origin.server,
                    "original": entry.origin.name,
                    "description": entry.description,
                    "approval": runtime.catalog.needs_approval(entry.name),
                    "input_schema": entry.tool.tool_call_schema
                    if isinstance(entry.tool.tool_call_schema, dict)
                    else entry.tool.tool_call_schema.model_json_schema(),
                }
                for entry in runtime.catalog.entries.values()
            ]

    rows = _run(list_tools)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table("name", "server", "original", "description", box=None, show_edge=False)
    for row in rows:
        description = (row["description"] or "").strip().splitlines()
        marker = " (approval)" if row["approval"] else ""
        table.add_row(row["name"], row["server"] or "local", row["original"],
                      (description[0] if description else "") + marker)
    stdout.print(table)
    stdout.print(f"{len(rows)} tool{'s' if len(rows) != 1 else ''}", style="dim")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("name")
@click.argument("arguments", default="{}")
@reports_errors
def call(file: str, name: str, arguments: str) -> None:
    """Call tool NAME with ARGUMENTS (a JSON object) exactly as the agent would; print the result."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        stderr.print(f"error: ARGUMENTS is not valid JSON: {exc}", markup=False, style="red")
        raise SystemExit(EXIT_INVALID) from None
    if not isinstance(parsed, dict):
        stderr.print("error: ARGUMENTS must be a JSON object", style="red")
        raise SystemExit(EXIT_INVALID)

    async def call_tool() -> tuple[Any, Any]:
        async with load_agent(file, model=False) as runtime:
            try:
                output = await runtime.catalog.call(name, parsed)
            except ToolError as exc:  # said now, not once the servers have been stopped
                stderr.print(str(exc), markup=False, style="red")
                raise
            return output.content, output.artifact

    try:
        content, artifact = _run(call_tool)
    except ToolError:
        raise SystemExit(EXIT_FAILURE) from None
    if isinstance(content, str):
        click.echo(content)
    else:
        for block in content:
            if block.get("type") == "text":
                click.echo(block.get("text", ""))
            else:
                click.echo(f"[{block.get('type')} {block.get('mime_type', '')}]".replace(" ]", "]"))
    if artifact is not None:
        stderr.print("structured content:", style="dim")
        click.echo(json.dumps(artifact, indent=2, default=str), err=True)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@reports_errors
def prompts(file: str) -> None:
    """List the prompt commands: alias or namespaced name, server, original name, arguments."""

    async def list_prompts() -> list[Any]:
        async with load_agent(file, model=False) as runtime:
            return list(runtime.prompt_catalog)

    commands = _run(list_prompts)
    table = Table("command", "server", "original", "arguments", box=None, show_edge=False)
    for command in commands:
        table.add_row(f"/{command.name}", command.server, command.prompt.name, command.usage)
    stdout.print(table)
    stdout.print(f"{len(commands)} prompt command{'s' if len(commands) != 1 else ''}", style="dim")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("name")
@click.argument("arguments", nargs=-1)
@reports_errors
def prompt(file: str, name: str, arguments: tuple[str, ...]) -> None:
    """Render prompt NAME with key=value ARGUMENTS and print its messages."""
    import shlex

    line = "/" + name.lstrip("/") + "".join(" " + shlex.quote(argument) for argument in arguments)

    async def render() -> list[Any]:
        async with load_agent(file, model=False) as runtime:
            return await runtime.prompt_messages(line)

    for message in _run(render):
        stdout.print(f"[{message.type}]", style="bold")
        content = message.content
        if isinstance(content, str):
            click.echo(content)
            continue
        for block in content:
            if isinstance(block, str) or block.get("type") == "text":
                click.echo(block if isinstance(block, str) else block.get("text", ""))
            else:
                click.echo(f"[{block.get('type')} {block.get('mime_type', '')}]")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print events as JSON lines.")
@reports_errors
def watch(file: str, as_json: bool) -> None:
    """Edit FILE without running the model: re-validate and list the tools on every save."""
    from runner.reload import watch_and_reload

    def show(runtime: Runtime, event: dict[str, Any]) -> None:
        if as_json:
            event = event | {"tools": sorted(runtime.catalog.entries)} if event["type"] == "reload" else event
            click.echo(json.dumps(event), nl=True)
            return
        if event["type"] == "reload_error":
            for problem in event["problems"]:
                stderr.print(problem, markup=False)
            stderr.print("still running the last good version", style="yellow")
            return
        stdout.print(event["summary"], style="green", markup=False)
        stdout.print(", ".join(sorted(runtime.catalog.entries)) or "(no tools)", markup=False)

    async def follow() -> None:
        async with load_agent(file, model=False) as runtime:
            show(runtime, {"type": "reload", "summary": "watching; tools:", "started": [], "stopped": [],
                           "restarted": [], "rebuilt": []})
            await watch_and_reload(runtime, lambda event: show(runtime, event), stop=anyio.Event())

    try:
        _run(follow)
    except KeyboardInterrupt:
        pass
