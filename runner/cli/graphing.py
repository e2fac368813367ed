"""``mcp-run graph FILE``: the agents and workflows of a manifest as a Mermaid diagram."""

from __future__ import annotations

from collections.abc import Sequence

import click

from runner.cli import main, reports_errors
from runner.manifest import (
    MAIN_AGENT,
    ChainSpec,
    FileAgentSpec,
    LoopSpec,
    Manifest,
    ModelAgentSpec,
    ParallelSpec,
    RouterSpec,
)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@reports_errors
def graph(file: str) -> None:
    """Print the agents and workflows of FILE as a Mermaid flowchart (paste it into any Mermaid viewer)."""
    from runner.manifest.loading import load_manifest

    manifest = load_manifest(file).manifest
    if any(isinstance(spec, FileAgentSpec) for spec in manifest.agents.values()):
        from runner.agent.checks import checked_agent  # agents from other files: checked, merged in

        checked = checked_agent(file, turns=False)
        click.echo(agents_mermaid(checked.loaded.manifest, hidden=checked.hidden_servers))
        return
    click.echo(agents_mermaid(manifest))


def agents_mermaid(manifest: Manifest, *, hidden: frozenset[str] = frozenset()) -> str:
    """A Mermaid flowchart: each agent (a box; workflows hexagons), who calls whom, and the
    servers each model agent is given (the main agent: all but ``hidden``, those only agents
    from other files use). Names are the manifest's keys (safe as Mermaid ids); the labels say
    only the name and kind, so no free text reaches the diagram."""
    lines = ["flowchart TD", f'  {_id(MAIN_AGENT)}["{MAIN_AGENT}: {_label(manifest.name)}"]']
    for name in manifest.agent.agents:
        lines.append(f"  {_id(MAIN_AGENT)} -->|calls| {_id(name)}")
    lines += _handoffs(MAIN_AGENT, manifest.agent.handoffs)
    lines += _tools(MAIN_AGENT, sorted(set(manifest.servers) - hidden))
    for name, spec in sorted(manifest.agents.items()):
        if isinstance(spec, ModelAgentSpec):
            lines.append(f'  {_id(name)}["{name}"]')
            lines += [f"  {_id(name)} -->|calls| {_id(callee)}" for callee in spec.agents]
            lines += _handoffs(name, spec.handoffs)
            servers = sorted({entry.split(manifest.agent.tool_separator, 1)[0] for entry in spec.tools}
                             & set(manifest.servers))
            lines += _tools(name, servers)
        elif isinstance(spec, ChainSpec):
            lines.append(f'  {_id(name)}{{{{"{name}: chain"}}}}')
            lines += [f"  {_id(name)} -->|{index + 1}| {_id(step)}" for index, step in enumerate(spec.chain)]
        elif isinstance(spec, ParallelSpec):
            lines.append(f'  {_id(name)}{{{{"{name}: parallel"}}}}')
            lines += [f"  {_id(name)} -->|each| {_id(member)}" for member in spec.parallel]
            if spec.join is not None:
                lines.append(f"  {_id(name)} -->|join| {_id(spec.join)}")
        elif isinstance(spec, RouterSpec):
            lines.append(f'  {_id(name)}{{{{"{name}: router"}}}}')
            lines += [f"  {_id(name)} -->|route| {_id(member)}" for member in spec.router
                      if member != spec.fallback]
            if spec.fallback is not None:
                lines.append(f"  {_id(name)} -.->|fallback| {_id(spec.fallback)}")
        elif isinstance(spec, LoopSpec):
            lines.append(f'  {_id(name)}{{{{"{name}: loop ≤ {spec.loop.max_rounds}"}}}}')
            lines.append(f"  {_id(name)} -->|write| {_id(spec.loop.generator)}")
            lines.append(f"  {_id(name)} -->|judge| {_id(spec.loop.evaluator)}")
    return "\n".join(lines)


def _handoffs(agent: str, targets: Sequence[str]) -> list[str]:
    """A thick arrow to each agent ``agent`` may hand the conversation to (it answers from then on)."""
    return [f"  {_id(agent)} ==>|hands off| {_id(target)}" for target in targets]


def _tools(agent: str, servers: list[str]) -> list[str]:
    return [f'  {_id(agent)} -.- server_{key.replace("-", "_")}[("{key}")]' for key in servers]


def _id(name: str) -> str:
    # Agent names are [a-z][a-z0-9_-]*; Mermaid ids are safest without '-', and 'end' is a keyword.
    return f"agent_{name.replace('-', '_')}"


def _label(text: str) -> str:
    """The manifest's name inside a quoted label: quotes and angle brackets would end or format it."""
    return "".join(c if c.isalnum() or c in " ._-" else "_" for c in text)
