"""The command line: the only package that prints for people and knows exit codes.

``mcp-run FILE`` chats with the agent of FILE (``runner.cli.file_command``, then
``runner.cli.chat``); every other first word is a command. ``mcp-run --help`` lists the commands
from their own definitions, so the list cannot go stale. Exit codes: 0 done, 1 runtime failure (a
server, the model, a tool), 2 invalid input (manifest, arguments, user input), 130 interrupted,
141 the output's reader has gone (``runner.cli.closed_output``).
"""

from __future__ import annotations

import difflib
import importlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from runner.cli.safe_text import SafeConsole, VisibleLogLines, visible_traceback
from runner.errors import ManifestError, RunnerError

if TYPE_CHECKING:  # the manifest models (pydantic) are imported by the commands that read one
    from click.shell_completion import CompletionItem

    from runner.manifest.loading import LoadedManifest

EXIT_OK, EXIT_FAILURE, EXIT_INVALID, EXIT_INTERRUPTED = 0, 1, 2, 130

stdout = SafeConsole(highlight=False, soft_wrap=True)
stderr = SafeConsole(stderr=True, highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def counted(number: int, noun: str) -> str:
    """``1 tool``, ``2 tools``, ``0 tools``."""
    return f"{number} {noun}{'s' if number != 1 else ''}"


def reports_errors(command: F) -> F:
    """Turn runner errors into located messages and exit codes; tracebacks only with --debug."""

    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        debug = click.get_current_context().find_root().params.get("debug", False)
        if isinstance(kwargs.get("file"), str):  # "needs a login" hints name this manifest
            from runner.auth.context import set_manifest_file

            set_manifest_file(kwargs["file"])
        try:
            return command(*args, **kwargs)
        except ManifestError as exc:
            if debug:
                _exit_with_traceback(exc, EXIT_INVALID)
            for problem in exc.problems:
                stderr.print(str(problem), markup=False)
            stderr.print(f"{counted(len(exc.problems), 'problem')} found", style="red")
            sys.exit(EXIT_INVALID)
        except RunnerError as exc:
            if debug:
                _exit_with_traceback(exc, EXIT_FAILURE)
            stderr.print(f"error: {exc}", style="red", markup=False)
            sys.exit(EXIT_FAILURE)
        except KeyboardInterrupt:
            stderr.print("interrupted", style="yellow")
            sys.exit(EXIT_INTERRUPTED)

    return run  # type: ignore[return-value]


def _exit_with_traceback(error: RunnerError, code: int) -> NoReturn:
    """--debug: the error's traceback (not Python's raw print of it, which would pass a server's
    escape sequences to the terminal) and the exit code the error has without --debug."""
    click.echo(visible_traceback(error), err=True, nl=False)
    sys.exit(code)


# The commands defined outside this module, by module: each is imported on first use, so that
# `validate` and `schema` answer without loading the MCP SDK, LangChain or LangGraph. A new command
# module is one line here; importing a module that defines other commands than its line says fails
# (and tests/cli/test_cli_registry.py imports every module of this package to check the table).
COMMAND_MODULES: Mapping[str, tuple[str, ...]] = {
    "runner.cli.inspecting": ("tools", "call", "prompts", "prompt", "watch"),
    "runner.cli.authoring": ("init", "import", "config"),
    "runner.cli.auth": ("auth",),
    "runner.cli.evals": ("test",),
    "runner.cli.serve": ("serve",),
    "runner.cli.graphing": ("graph",),
    "runner.cli.web": ("web",),
}
# What `mcp-run --help` says of each command, so that listing the commands imports none of their
# modules (tests/cli/test_cli_registry.py checks each line against the command's own docstring).
COMMAND_SUMMARIES: Mapping[str, str] = {
    "auth": "Log in to remote servers that need OAuth; show or forget the stored logins.",
    "call": "Call tool NAME with ARGUMENTS (a JSON object) exactly as the agent would; print the result.",
    "config": "Print the effective manifest of FILE: defaults applied, where each value comes from.",
    "graph": "Print the agents and workflows of FILE as a Mermaid flowchart (paste it into any Mermaid "
             "viewer).",
    "import": "Convert FILE (Claude Desktop, Claude Code, VS Code or Cursor MCP config) into a manifest.",
    "init": "Write a starter agent in DIRECTORY (default .): agent.yaml, prompts/system.md.j2, "
            "agent.schema.json, and .mcp-run/ in .gitignore.",
    "prompt": "Render prompt NAME with key=value ARGUMENTS and print its messages.",
    "prompts": "List the prompt commands: alias or namespaced name, server, original name, arguments.",
    "serve": "Serve the agent of FILE as an MCP server: tool 'ask', its prompt commands, its threads "
             "(over --http, also the OpenAI Chat Completions API under /v1).",
    "test": "Run the cases in evals/ next to FILE (or CASE_FILES) against the agent of FILE.",
    "tools": "List the tools the agent can call: generated name, server, original name, description.",
    "watch": "Edit FILE without running the model: re-validate and list the tools on every save.",
    "web": "Open the agent of FILE in a browser page: chat, tool calls, questions, threads, servers.",
}
# `mcp-run FILE ...` is no command: a first word that names no command but a file (one that exists,
# or any *.yaml / *.yml path) runs that file's agent with this module's `run_file`.
FILE_MODULE = "runner.cli.file_command"
MANIFEST_SUFFIXES = (".yaml", ".yml")


class CommandRegistryError(RuntimeError):
    """A command module and COMMAND_MODULES disagree: a programming error, found at first use."""


class _FileOrCommand(click.Group):
    """``mcp-run FILE …`` runs the agent; ``mcp-run COMMAND …`` runs a command."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | {name for names in COMMAND_MODULES.values() for name in names})

    def invoke(self, ctx: click.Context) -> Any:
        # Click would turn a Ctrl-C outside a command's own handling into "Aborted!" and exit 1,
        # and a closed output pipe into exit 1 (runner.cli.closed_output: 141, for every command).
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            stderr.print("interrupted", style="yellow")
            sys.exit(EXIT_INTERRUPTED)
        except BaseException as exc:
            from runner.cli.closed_output import exit_at_closed_output, is_broken_pipe

            if is_broken_pipe(exc):
                exit_at_closed_output()
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:  # not imported yet: its summary comes from the table
                # Shortened as click shortens a help text (its make_default_short_help is deprecated).
                summary = click.Command(name, help=COMMAND_SUMMARIES[name]).get_short_help_str(limit)
                rows.append((name, summary))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """The commands, and the manifest files and folders (``mcp-run FILE``) a first word can be."""
        items = super().shell_complete(ctx, incomplete)
        if incomplete.startswith("-"):
            return items
        load_command_module("runner.cli.authoring")
        from runner.cli.authoring import manifest_files

        return items + manifest_files(incomplete)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = next((module for module, names in COMMAND_MODULES.items() if cmd_name in names), None)
            if module is not None:
                load_command_module(module)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if not args or args[0].startswith("-") or args[0] in self.list_commands(ctx):
            return super().resolve_command(ctx, args)
        word = args[0]
        if Path(word).exists() or word.endswith(MANIFEST_SUFFIXES):
            # The file's name stands where a command name would: error hints say `mcp-run FILE -h`.
            return word, importlib.import_module(FILE_MODULE).run_file, args
        commands = [self.get_command(ctx, name) for name in self.list_commands(ctx)]
        visible = [command.name for command in commands
                   if command is not None and command.name is not None and not command.hidden]
        close = difflib.get_close_matches(word, visible, n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'?" if close else f"commands: {', '.join(visible)}"
        raise click.UsageError(
            f"no such command '{word}'; {hint} (mcp-run FILE starts the agent of a manifest)", ctx
        )


def load_command_module(module: str) -> None:
    """Import a command module and check that it defined exactly the commands COMMAND_MODULES says."""
    if module in sys.modules:
        return
    before = set(main.commands)
    importlib.import_module(module)
    defined = set(main.commands) - before
    declared = set(COMMAND_MODULES[module])
    if defined != declared:
        raise CommandRegistryError(
            f"{module} defines the commands {sorted(defined)}, but COMMAND_MODULES lists {sorted(declared)}"
        )


@click.group(cls=_FileOrCommand, context_settings={"help_option_names": ["-h", "--help"]},
             subcommand_metavar="FILE [OPTIONS] | COMMAND [ARGS]...")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(package_name="mcp-run")
def main(debug: bool) -> None:
    """Run an agent declared in a YAML manifest, with tools from MCP servers.

    mcp-run FILE starts a chat with the agent of FILE; mcp-run FILE -p TEXT runs one turn
    (mcp-run FILE -h lists its options).
    """
    # A job started with `&` by a script inherits SIGINT ignored, and Python then installs no
    # handler: every command stops on `kill -INT` as on Ctrl-C (the chat and serve, which set their
    # own handlers, already did).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Warnings (a skipped server, a filter entry that matches nothing) are the runner talking to
    # the person at the terminal; with --debug they say where they come from.
    log_lines = logging.StreamHandler(sys.stderr)
    log_lines.setFormatter(VisibleLogLines("%(levelname)s %(name)s: %(message)s" if debug
                                           else "%(levelname)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, handlers=[log_lines])
    logging.addLevelName(logging.WARNING, "warning")
    logging.addLevelName(logging.ERROR, "error")
    # Servers' own log messages ("[server] level: message", already at or above each server's
    # logging.terminal) are shown dim, apart from mcp-run's diagnostics.
    server_logs = logging.getLogger("runner.servers.log")
    server_logs.propagate = False
    server_logs.setLevel(logging.DEBUG)
    if not server_logs.handlers:
        server_logs.addHandler(_ServerLogLines())


class _ServerLogLines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        stderr.print(record.getMessage(), style="dim", markup=False, highlight=False)


def summary(loaded: LoadedManifest, file: str) -> str:
    """``validate``'s line for a valid manifest, naming it as it was given (``file``)."""
    manifest = loaded.manifest
    servers = manifest.servers
    kinds = sorted({spec.transport for spec in servers.values()})
    return (
        f"{file}: '{manifest.name}' is valid — {counted(len(servers), 'server')}"
        f"{' (' + ', '.join(kinds) + ')' if kinds else ''}, "
        f"model {manifest.model.id}"
    )


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@reports_errors
def validate(file: str) -> None:
    """Check FILE, its templates, import paths and case files; print every problem with its location."""
    from dataclasses import replace

    from runner.agent.checks import checked_agent

    checked = checked_agent(file)
    if (checked.loaded.path.parent / "evals").is_dir():  # the case files next to it (`mcp-run test`)
        from runner.evals.cases import case_folder_problems

        if problems := case_folder_problems(checked.loaded.path, checked.loaded.manifest):
            raise ManifestError(problems)
    for warning in checked.warnings:  # things to put right before the run; the manifest is valid
        stderr.print(str(replace(warning, message=f"warning: {warning.message}")), style="yellow",
                     markup=False)
    from runner.store.state_folder import unusable_state_folder, user_state_folder

    if (problem := unusable_state_folder(checked.loaded)) is not None:
        fallback = user_state_folder(checked.loaded.path, environ=os.environ)
        stderr.print(f"warning: cannot use the state folder {checked.loaded.state_dir} ({problem}); "
                     f"runs will use {fallback}", style="yellow", markup=False)
    stdout.print(summary(checked.loaded, file), markup=False)


@main.command()
def schema() -> None:
    """Print the manifest's JSON Schema."""
    from runner.manifest import manifest_json_schema

    click.echo(json.dumps(manifest_json_schema(), indent=2))
