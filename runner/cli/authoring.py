"""Getting started: ``init``, ``import`` and ``config``, and shell completion of names.

    mcp-run init [DIR] [--model ID] [--server NAME=COMMAND…] [--from FILE] [--force]
    mcp-run import FILE [-o agent.yaml [--merge | --force]] [--format F] [--name NAME]
    mcp-run config FILE [--server KEY] [--json]

Completion of tool names cannot start servers (too slow, and it would run programs while typing),
so it offers what the manifest itself names: ``tools.only`` entries and ``tools.rename`` targets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from runner.authoring.effective import as_json, effective_manifest, render_text
from runner.authoring.formats import FORMATS
from runner.authoring.importing import (
    ExistingServers,
    Imported,
    connection,
    existing_servers,
    import_config,
    manifest_text,
    merge_into,
    validate_text,
)
from runner.authoring.scaffold import MANIFEST, command_servers, manifest_for, starter_files, write_starter
from runner.cli import EXIT_FAILURE, EXIT_INVALID, counted, main, reports_errors, stderr, stdout
from runner.cli.safe_text import visible
from runner.errors import ManifestError, ModelError, Problem
from runner.manifest import OFFLINE_ID, SCRIPTED_ID

# ----------------------------------------------------------------------------------- completion


def _files(incomplete: str, suffixes: tuple[str, ...]) -> list[CompletionItem]:
    folder, _, prefix = incomplete.rpartition("/")
    base = Path(folder or ".")
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return []
    items = []
    for entry in entries:
        if not entry.name.startswith(prefix) or (entry.name.startswith(".") and not prefix.startswith(".")):
            continue
        text = f"{folder}/{entry.name}" if folder else entry.name
        if entry.is_dir():
            items.append(CompletionItem(text + "/", type="dir"))
        elif entry.name.endswith(suffixes):
            items.append(CompletionItem(text))
    return items


def complete_manifest(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Manifest files (``*.yaml``, ``*.yml``) and folders."""
    return manifest_files(incomplete)


def manifest_files(incomplete: str) -> list[CompletionItem]:
    """The manifest files (``*.yaml``, ``*.yml``) and folders whose path starts with ``incomplete``."""
    return _files(incomplete, (".yaml", ".yml"))


def complete_config(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """MCP configuration files (``*.json``, ``*.jsonc``) and folders."""
    return _files(incomplete, (".json", ".jsonc"))


def _manifest_servers(ctx: click.Context) -> dict[str, Any]:
    """The raw ``servers`` of the manifest named on the command line; nothing is started."""
    import yaml

    # While an option still lacks its value, click leaves the positional arguments unparsed.
    file = ctx.params.get("file") or next((arg for arg in ctx.args if not arg.startswith("-")), None)
    try:
        data = yaml.safe_load(Path(file).read_text(encoding="utf-8")) if file else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    servers = data.get("servers") if isinstance(data, dict) else None
    return servers if isinstance(servers, dict) else {}


def complete_server(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Server keys of the manifest given earlier on the line."""
    return [CompletionItem(str(key)) for key in _manifest_servers(ctx) if str(key).startswith(incomplete)]


def complete_tool(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Tool names the manifest itself names (``tools.only``, ``tools.rename``), as the model sees them."""
    names = []
    for key, spec in _manifest_servers(ctx).items():
        tools = spec.get("tools") if isinstance(spec, dict) else None
        if not isinstance(tools, dict):
            continue
        only = [n for n in tools.get("only") or [] if isinstance(n, str) and not set(n) & set("*?[")]
        renamed = rename if isinstance(rename := tools.get("rename"), dict) else {}
        names += [str(renamed[n]) if n in renamed else f"{key}__{n}" for n in only]
        names += [str(target) for source, target in renamed.items() if source not in only]
    return [CompletionItem(name) for name in sorted(set(names)) if name.startswith(incomplete)]


# --------------------------------------------------------------------------------------- report


def _report(imported: Imported, *, target: str, guessed: bool) -> None:
    told = (f" (the format told from the file; mcp-run import --format {'|'.join(sorted(FORMATS))} "
            "reads it as another)") if guessed else ""
    stderr.print(f"{counted(imported.active, 'server')} from "
                 f"{FORMATS[imported.format]} into {target}{told}", markup=False)
    for name, key in imported.renamed.items():
        stderr.print(f"  server '{name}' is '{key}'", markup=False)
    if imported.variables:
        stderr.print("set these variables before running (nothing secret was copied):", markup=False)
        for name, why in sorted(imported.variables.items()):
            stderr.print(f"  {name}  {why}", markup=False)
    for warning in imported.warnings:
        stderr.print(f"warning: {warning}", markup=False, style="yellow")


def _fail(message: str) -> None:
    stderr.print(f"error: {message}", markup=False, style="red")
    raise SystemExit(EXIT_INVALID)


def _write(path: Path, text: str) -> None:
    """Write through a temporary file, so an interrupted write never leaves half a manifest."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        stderr.print(f"error: cannot write {path}: {exc.strerror}", markup=False, style="red")
        raise SystemExit(EXIT_FAILURE) from None


# ------------------------------------------------------------------------------------- commands


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False), shell_complete=complete_config)
@click.option("-o", "--output", type=click.Path(dir_okay=False), shell_complete=complete_manifest,
              help="Write the manifest here instead of printing it.")
@click.option("--merge", is_flag=True, help="Add the servers to the existing OUTPUT, keeping its comments.")
@click.option("--force", is_flag=True, help="Replace an existing OUTPUT.")
@click.option("--format", "format_", type=click.Choice(sorted(FORMATS)), help="Do not guess the format.")
@click.option("--name", default="agent", show_default=True, help="The agent's name in a new manifest.")
@reports_errors
def import_(file: str, output: str | None, merge: bool, force: bool, format_: str | None, name: str) -> None:
    """Convert FILE (Claude Desktop, Claude Code, VS Code or Cursor MCP config) into a manifest."""
    if merge and not output:
        _fail("--merge needs -o MANIFEST, the manifest to add the servers to")
    if merge and force:
        _fail("--merge adds to OUTPUT and --force replaces it; choose one")
    target = Path(output) if output else None
    if target and target.exists() and not (merge or force):
        _fail(f"{output} exists; --merge adds the servers to it, --force replaces it")
    if merge and output is not None and target and target.exists():
        try:
            current = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"cannot read {output}: {getattr(exc, 'strerror', None) or exc}")
        imported = import_config(file, format=format_, existing=existing_servers(current, file=output))
        text = merge_into(current, imported, file=output)
    else:
        imported = import_config(file, format=format_)
        text = manifest_text(imported, name=name, source=Path(file).name)
    validate_text(text, file=output or "agent.yaml")
    if target:
        _write(target, text)
    else:
        click.echo(visible(text), nl=False)
    _report(imported, target=output or "stdout", guessed=format_ is None)


@main.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--model", default="offline", show_default=True, help="Model id (provider:model).")
@click.option("--server", "servers", multiple=True, metavar="NAME=COMMAND",
              help="Add a stdio server, e.g. time='uvx mcp-server-time' (repeatable).")
@click.option("--from", "from_file", type=click.Path(exists=True, dir_okay=False),
              shell_complete=complete_config, help="Import the servers of an MCP config file.")
@click.option("--name", help="The agent's name (default: the folder's name).")
@click.option("--force", is_flag=True, help="Replace files that exist.")
@reports_errors
def init(directory: str, model: str, servers: tuple[str, ...], from_file: str | None, name: str | None,
         force: bool) -> None:
    """Write a starter agent in DIRECTORY (default .): agent.yaml, prompts/system.md.j2,
    agent.schema.json, and .mcp-run/ in .gitignore. It validates and runs offline as written."""
    folder = Path(directory)
    try:
        given = command_servers(servers)
    except ValueError as exc:
        _fail(f"--server {exc}")
    taken = ExistingServers(
        [s.key for s in given], {connection({"command": s.command, "args": s.args}): s.key for s in given}
    )
    imported = import_config(from_file, existing=taken) if from_file else None
    agent_name = name or folder.resolve().name or "agent"
    text = manifest_for(name=agent_name, model=model, servers=given, imported=imported)
    validate_text(text, file=str(folder / MANIFEST))
    try:
        needs = _model_needs(model)
    except ModelError as exc:
        _fail(f"--model: {exc}")
    try:
        written = write_starter(folder, starter_files(text), force=force)
    except OSError as exc:
        stderr.print(f"error: cannot write in {folder}: {exc.strerror}", markup=False, style="red")
        raise SystemExit(EXIT_FAILURE) from None
    if imported:
        _report(imported, target=str(folder / MANIFEST), guessed=True)
    stdout.print(f"wrote {', '.join(written)} in {folder}", markup=False)
    for need in needs:  # else the command below fails at once
        stdout.print(f"first: {need}", style="yellow", markup=False)
    manifest = folder / MANIFEST
    first = (
        f"set {', '.join(sorted(imported.variables))}, then run " if imported and imported.variables else ""
    )
    stdout.print(
        f"next: {first}mcp-run {manifest} -p 'hello'   (mcp-run {manifest} for a chat)", markup=False
    )


def _model_needs(model: str) -> list[str]:
    """What the model needs here before a turn can run: its provider's package, its API key."""
    if model in (OFFLINE_ID, SCRIPTED_ID):
        return []
    from runner.models.registry import model_requirements, provider_of

    return model_requirements(model, provider_of(model), spec=None, environ=os.environ)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False), shell_complete=complete_manifest)
@click.option("--server", "server", shell_complete=complete_server, help="Show only this server.")
@click.option("--json", "json_output", is_flag=True, help="Print JSON: values, their sources, variables.")
@reports_errors
def config(file: str, server: str | None, json_output: bool) -> None:
    """Print the effective manifest of FILE: defaults applied, where each value comes from."""
    try:
        effective = effective_manifest(file)
    except OSError as exc:
        raise ManifestError([Problem(file, 1, 1, "", f"cannot read the manifest: {exc.strerror}")]) from exc
    if server is not None:
        servers = effective.data.get("servers", {})
        if server not in servers:
            _fail(f"no server '{server}' in {file} (servers: {', '.join(servers) or 'none'})")
        effective = effective.only_server(server)
    if json_output:
        click.echo(json.dumps(as_json(effective), indent=2))
    else:
        click.echo(visible(render_text(effective)), nl=False)
