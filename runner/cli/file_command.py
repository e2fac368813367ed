"""``mcp-run FILE [OPTIONS]``: the command, light on purpose.

The manifest is read and validated before the agent's packages (the MCP SDK, LangChain,
LangGraph) are imported, so an invalid one is reported as quickly as ``mcp-run validate`` does;
the chat and the one-shot turn themselves live in :mod:`runner.cli.chat`.
"""

from __future__ import annotations

import click

from runner.cli import reports_errors


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
@click.option("--agent", "agent", metavar="NAME",
              help="Hand the conversation to agent NAME (main or one of agents:) from the first message.")
@reports_errors
def run_file(file: str, text: str | None, as_json: bool, thread_id: str | None, yes: bool,
             watch: bool, agent: str | None) -> None:
    """Chat with the agent of FILE, or run one turn with -p."""
    from runner.manifest.agents import switch_problem
    from runner.manifest.loading import load_manifest

    loaded = load_manifest(file)  # its located problems, before seconds of imports; the run checks it all
    if agent is not None and (problem := switch_problem(agent, loaded.manifest.agents)) is not None:
        raise click.BadParameter(f"{problem} (in {file})", param_hint="'--agent'")
    from runner.cli.chat import run_agent

    run_agent(file, text, as_json=as_json, thread_id=thread_id, yes=yes, watch=watch, agent=agent)
