"""A new version of the manifest brought in over the running servers: the servers reconciled with
its specs, and what the new generation rebuilds reported (:class:`ReloadReport`).

:meth:`runner.agent.runtime.Runtime.apply` uses these; they know nothing of the running graph.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from runner.agent.checks import CheckedAgent
from runner.agent.generation import Generation
from runner.agent.watching import resolved
from runner.errors import ServerStartError
from runner.events import Reloaded
from runner.manifest import PYTHON_COMMANDS, Manifest, ServerSpec, StdioServerSpec, restart_fields
from runner.servers import ServerFleet


def launch_spec(spec: ServerSpec) -> ServerSpec:
    """``python`` in a stdio command means the interpreter running mcp-run (and its packages).

    Not in a container: there ``python`` is the image's own.
    """
    if isinstance(spec, StdioServerSpec) and spec.command in PYTHON_COMMANDS and spec.container is None:
        return spec.model_copy(update={"command": sys.executable})
    return spec


@dataclass(frozen=True)
class ReloadReport:
    """What :meth:`Runtime.apply` did, for the one-line summary and the JSON event stream."""

    seconds: float = 0.0
    started: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)  # of "prompts", "model", "agent", "tools"
    failed: dict[str, str] = field(default_factory=dict)  # servers that were to start and did not
    renamed: str = ""  # the agent's new name when `name:` changed
    # The agents of 'agents:' an edit touched: "added", "changed", "removed" -> names (only those with any).
    agents: dict[str, list[str]] = field(default_factory=dict)

    def summary(self) -> str:
        parts = [f"renamed the agent to {self.renamed}"] if self.renamed else []
        parts += [f"{verb} {', '.join(keys)}" for verb, keys in (
            ("started", self.started), ("stopped", self.stopped), ("restarted", self.restarted),
            ("rebuilt", self.rebuilt)) if keys]
        parts += [f"{how} {'agent' if len(names) == 1 else 'agents'} {', '.join(names)}"
                  for how, names in self.agents.items()]
        parts += [f"{key} failed to start: {reason.removeprefix(f'{key}: ')}"
                  for key, reason in self.failed.items()]
        return f"reloaded in {self.seconds * 1000:.0f} ms: " + ("; ".join(parts) or "nothing changed")

    def event(self) -> Reloaded:
        event = Reloaded(type="reload", ms=round(self.seconds * 1000, 1), started=self.started,
                         stopped=self.stopped, restarted=self.restarted, rebuilt=self.rebuilt,
                         failed=self.failed, summary=self.summary())
        if self.agents:
            event["agents"] = self.agents
        return event


async def reconcile_servers(
    fleet: ServerFleet, specs: Mapping[str, ServerSpec], kept: list[str], retried: Set[str], *,
    started: list[str], stopped: list[str],
) -> tuple[list[str], dict[str, str]]:
    """Stop, update (or restart) and start ``fleet``'s servers to match ``specs``, all at once;
    the servers in ``retried`` restart even when their spec is unchanged (a failed server, or one
    that waited for a login now stored).

    Returns the servers restarted (sorted) and those that were to start or restart and did not
    (required or optional), with why.
    """
    restarted: list[str] = []
    failed: dict[str, str] = {}

    async def update(key: str) -> None:
        try:
            if await fleet.update(key, specs[key], restart=key in retried) == "restarted":
                restarted.append(key)
        except ServerStartError as exc:  # a required server: reported, the rest goes on
            failed[key] = str(exc)

    async def start(key: str) -> None:
        try:
            await fleet.add(key, specs[key])
        except ServerStartError as exc:
            failed[key] = str(exc)

    async with anyio.create_task_group() as group:
        for key in stopped:
            group.start_soon(fleet.remove, key)
        for key in kept:
            group.start_soon(update, key)
        for key in started:
            group.start_soon(start, key)
    failed.update(start_failures(fleet, [*started, *restarted]))  # optional ones: skipped, kept failed
    return sorted(key for key in restarted if key not in failed), failed


def start_failures(fleet: ServerFleet, keys: Iterable[str]) -> dict[str, str]:
    """Why each of ``keys`` that the fleet keeps as failed (an optional server) did not start."""
    failures: dict[str, str] = {}
    for key in keys:
        connection = fleet.connections.get(key)
        if connection is not None and connection.status == "failed":
            failures[key] = str(connection.error) if connection.error is not None else f"{key}: failed"
    return failures


def live_settings(manifest: Manifest) -> list[tuple[str, dict[str, Any]]]:
    """Every server's settings that apply without a restart (filters, timeouts, fallbacks, ...)."""
    return [
        (key, {name: value for name, value in spec.model_dump().items()
               if name not in restart_fields(type(spec))})
        for key, spec in sorted(manifest.servers.items())
    ]


def _prompt_filters(manifest: Manifest) -> dict[str, Any]:
    """Which of each server's prompts the agent offers as prompt commands."""
    return {key: spec.prompts for key, spec in manifest.servers.items()}


def rebuilt_parts(
    previous: Generation | None, checked: CheckedAgent, changed_files: set[Path], *, with_model: bool
) -> list[str]:
    """What the new generation builds differently from ``previous``: only what changed."""
    after = checked.loaded.manifest
    changed = {resolved(path) for path in changed_files}
    if previous is None:
        return ["prompts", *(["model"] if with_model else []), "agent", "tools"]
    before = previous.loaded.manifest
    parts = []
    if (before.prompts != after.prompts or _prompt_filters(before) != _prompt_filters(after)
            or changed & (checked.templates | previous.checked.templates)):
        parts.append("prompts")
    if with_model and before.model != after.model:
        parts.append("model")
    if before.agent != after.agent or before.description != after.description:  # the system prompt's
        parts.append("agent")
    if (live_settings(before) != live_settings(after) or before.local_tools != after.local_tools
            or changed & (checked.modules | previous.checked.modules)):
        parts.append("tools")
    return parts




def agent_changes(previous: Generation | None, checked: CheckedAgent, changed_files: set[Path]
                  ) -> dict[str, list[str]]:
    """The agents of ``agents:`` added, changed (their entry, the manifest an agent from a file
    comes from, or a file they are built from) and removed since ``previous``; only the kinds
    with any. The others keep their models (and so the state of a scripted one)."""
    if previous is None:
        return {}
    before, after = previous.checked.agent_definitions, checked.agent_definitions
    changed = {resolved(path) for path in changed_files}

    def edited(name: str) -> bool:
        files = previous.checked.agent_files.get(name, frozenset())
        files |= checked.agent_files.get(name, frozenset())
        return before[name] != after[name] or bool(changed & files)

    found = {"added": sorted(set(after) - set(before)),
             "changed": sorted(name for name in set(before) & set(after) if edited(name)),
             "removed": sorted(set(before) - set(after))}
    return {how: names for how, names in found.items() if names}
