"""The command line: the only package that prints for people and knows exit codes.

    mcp-run FILE [-p TEXT] [--json] [--thread ID] [--yes] [--watch]   chat, or one turn with -p
    mcp-run validate FILE           check the manifest, its templates and import paths
    mcp-run schema                  print the manifest's JSON Schema
    mcp-run tools FILE [--json]     the tools the model sees
    mcp-run call FILE NAME JSON     call one tool the way the agent does
    mcp-run prompts FILE            the prompt commands
    mcp-run prompt FILE NAME k=v…   render a prompt's messages
    mcp-run test FILE [CASES…]      run the agent's cases (evals/), live, recorded or replayed

Exit codes: 0 success, 1 runtime failure (a server, the model, a tool), 2 invalid input
(manifest, arguments), 130 interrupted.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click
from rich.console import Console

from runner.checks import check_agent
from runner.errors import ManifestError, RunnerError
from runner.loading import LoadedManifest
from runner.manifest import manifest_json_schema

EXIT_OK, EXIT_FAILURE, EXIT_INVALID, EXIT_INTERRUPTED = 0, 1, 2, 130

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(command: F) -> F:
    """Turn runner errors into located messages and exit codes; tracebacks only with --debug."""

    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        debug = click.get_current_context().find_root().params.get("debug", False)
        try:
            return command(*args, **kwargs)
        except ManifestError as exc:
            if debug:
                raise
            for problem in exc.problems:
                stderr.print(str(problem), markup=False)
            count = len(exc.problems)
            stderr.print(f"{count} problem{'s' if count != 1 else ''} found", style="red")
            sys.exit(EXIT_INVALID)
        except RunnerError as exc:
            if debug:
                raise
            stderr.print(f"error: {exc}", style="red", markup=False)
            sys.exit(EXIT_FAILURE)
        except KeyboardInterrupt:
            stderr.print("interrupted", style="yellow")
            sys.exit(EXIT_INTERRUPTED)

    return run  # type: ignore[return-value]


# Commands that need the servers, LangChain and LangGraph live in modules imported on first use,
# so that `validate` and `schema` answer quickly.
_LAZY_COMMANDS = {
    "run": "runner.cli.chat",
    **dict.fromkeys(("tools", "call", "prompts", "prompt", "watch"), "runner.cli.inspect"),
    "test": "runner.cli.evals",
}


class _FileOrCommand(click.Group):
    """``mcp-run FILE …`` runs the agent; ``mcp-run COMMAND …`` runs a sub-command."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(_LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _LAZY_COMMANDS:
            importlib.import_module(_LAZY_COMMANDS[cmd_name])  # registers its commands on main
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.list_commands(ctx) and not args[0].startswith("-"):
            return "run", self.get_command(ctx, "run"), args
        return super().resolve_command(ctx, args)


@click.group(cls=_FileOrCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(package_name="mcp-run")
def main(debug: bool) -> None:
    """Run an agent declared in a YAML manifest, with tools from MCP servers.

    mcp-run FILE starts a chat with the agent of FILE; mcp-run FILE -p TEXT runs one turn.
    """
    # Warnings (a skipped server, a filter entry that matches nothing) are the runner talking to
    # the person at the terminal; with --debug they say where they come from.
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s" if debug else "%(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    logging.addLevelName(logging.WARNING, "warning")
    logging.addLevelName(logging.ERROR, "error")


def summary(loaded: LoadedManifest) -> str:
    manifest = loaded.manifest
    servers = manifest.servers
    kinds = sorted({spec.transport for spec in servers.values()})
    return (
        f"{loaded.path.name}: '{manifest.name}' is valid — {len(servers)} server"
        f"{'s' if len(servers) != 1 else ''}{' (' + ', '.join(kinds) + ')' if kinds else ''}, "
        f"model {manifest.model.id}"
    )


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@reports_errors
def validate(file: str) -> None:
    """Check FILE, its templates and import paths; print every problem with its location."""
    stdout.print(summary(check_agent(file)), markup=False)


@main.command()
def schema() -> None:
    """Print the manifest's JSON Schema."""
    click.echo(json.dumps(manifest_json_schema(), indent=2))
