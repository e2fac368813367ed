"""What one version of the manifest builds over the running servers, and how a new version is
brought in: the servers reconciled with its specs, and the parts that changed reported.

:class:`runner.agent.runtime.Runtime` applies a checked manifest with these; they know nothing of the
running graph.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from runner.agent.checks import CheckedAgent
from runner.errors import ServerStartError
from runner.events import Event, EventSink, Reloaded
from runner.manifest import PYTHON_COMMANDS, Manifest, ModelSpec, ServerSpec, StdioServerSpec, restart_fields
from runner.manifest.loading import LoadedManifest
from runner.prompts import PromptCatalog
from runner.servers import ServerConnection, ServerFleet
from runner.tools.catalog import ToolCall, ToolCatalog
from runner.tools.content import ToolOutput
from runner.tools.search import ToolSearch

if TYPE_CHECKING:  # the model and the graph are imported when a model is used
    from langgraph.graph.state import CompiledStateGraph

    from runner.models import ModelChain
DEFAULT_SYSTEM_PROMPT = "You are {name}, an assistant that uses tools to help the user.{description}"


def launch_spec(spec: ServerSpec) -> ServerSpec:
    """``python`` in a stdio command means the interpreter running mcp-run (and its packages).

    Not in a container: there ``python`` is the image's own.
    """
    if isinstance(spec, StdioServerSpec) and spec.command in PYTHON_COMMANDS and spec.container is None:
        return spec.model_copy(update={"command": sys.executable})
    return spec


class GenerationAdapter:
    """What a caller changes in every generation the runtime builds, at start-up and at each
    reload: the agent as checked, the model chain, and every tool call the model makes.

    The evals run the agent this way (a memory checkpointer, their model recording or replaying,
    the case's template variables, recorded tool results). This base class changes nothing.
    """

    def agent(self, checked: CheckedAgent) -> CheckedAgent:
        """The agent as it is run. ``load_agent`` calls it once more on the first manifest, to
        open the checkpointer it names: it must depend on ``checked`` alone."""
        return checked

    def model(self, spec: ModelSpec, base_dir: Path) -> ModelChain:
        """The model chain of ``spec``; called when the model spec changed, not at every reload."""
        from runner.models import build_model_chain

        return build_model_chain(spec, base_dir=base_dir)

    async def call_tool(self, name: str, arguments: dict[str, Any], call: ToolCall) -> ToolOutput:
        """A call the model makes to the tool ``name``; ``call`` is the catalog's own."""
        return await call(name, arguments)


@dataclass
class Generation:
    """What one version of the manifest builds on top of the running servers."""

    checked: CheckedAgent
    catalog: ToolCatalog
    model: ModelChain | None  # None: started without a model (listing and calling only)
    prompt_catalog: PromptCatalog
    logins: Mapping[str, Path] = field(default_factory=dict)  # token file of each OAuth server, resolved
    graph: CompiledStateGraph | None = None
    tool_search: ToolSearch | None = None  # what each model step is offered (runner.tools.search)

    @property
    def loaded(self) -> LoadedManifest:
        return self.checked.loaded


@dataclass
class ReloadReport:
    """What :meth:`Runtime.apply` did, for the one-line summary and the JSON event stream."""

    seconds: float = 0.0
    started: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)  # of "prompts", "model", "agent", "tools"
    failed: dict[str, str] = field(default_factory=dict)  # required servers that did not start
    renamed: str = ""  # the agent's new name when `name:` changed

    def summary(self) -> str:
        parts = [f"renamed the agent to {self.renamed}"] if self.renamed else []
        parts += [f"{verb} {', '.join(keys)}" for verb, keys in (
            ("started", self.started), ("stopped", self.stopped), ("restarted", self.restarted),
            ("rebuilt", self.rebuilt)) if keys]
        parts += [f"{key} failed to start: {reason}" for key, reason in self.failed.items()]
        return f"reloaded in {self.seconds * 1000:.0f} ms: " + ("; ".join(parts) or "nothing changed")

    def event(self) -> Reloaded:
        return Reloaded(type="reload", ms=round(self.seconds * 1000, 1), started=self.started,
                        stopped=self.stopped, restarted=self.restarted, rebuilt=self.rebuilt,
                        failed=self.failed, summary=self.summary())


async def reconcile_servers(
    fleet: ServerFleet, specs: Mapping[str, ServerSpec], kept: list[str], report: ReloadReport,
    logged_in: Set[str],
) -> None:
    """Stop, update (or restart) and start ``fleet``'s servers to match ``specs``, all at once."""

    async def update(key: str) -> None:
        try:
            if await fleet.update(key, specs[key], restart=key in logged_in) == "restarted":
                report.restarted.append(key)
        except ServerStartError as exc:  # a required server: reported, the rest goes on
            report.restarted.append(key)
            report.failed[key] = str(exc)

    async def start(key: str) -> None:
        try:
            await fleet.add(key, specs[key])
        except ServerStartError as exc:
            report.failed[key] = str(exc)

    async with anyio.create_task_group() as group:
        for key in report.stopped:
            group.start_soon(fleet.remove, key)
        for key in kept:
            group.start_soon(update, key)
        for key in report.started:
            group.start_soon(start, key)
    report.restarted.sort()


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
    changed = {path.resolve() for path in changed_files}
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


def render_system_prompt(generation: Generation, connections: Mapping[str, ServerConnection]) -> str:
    """``generation``'s system prompt over the servers and tools live now."""
    manifest = generation.loaded.manifest
    template = generation.checked.system_template
    if template is None:
        description = f" {manifest.description}" if manifest.description else ""
        return DEFAULT_SYSTEM_PROMPT.format(name=manifest.name, description=description)
    from runner.prompts.system import ServerSummary, ToolSummary  # with Jinja: templates only

    servers = [ServerSummary(key, connection.status, connection.instructions)
               for key, connection in connections.items()]
    tools = [ToolSummary(entry.name, entry.description) for entry in generation.catalog.entries.values()]
    return template.render(servers, tools)


class StoppedTurnEvents:
    """Events of a turn's tool calls that come once the turn is stopped: its graph run's stream
    is no longer read then, but a task's ``cancelled`` status comes as the call is cancelled.

    :func:`runner.agent.turns.stream_turn` sets one in its graph run's context (:data:`turn_events`),
    sets ``stopped`` when the turn is stopped, and hands ``kept`` over once the run has closed.
    """

    def __init__(self) -> None:
        self.stopped = False
        self.kept: list[Event] = []

    def through(self, stream: EventSink) -> EventSink:
        """Write to ``stream`` while the turn runs, to ``kept`` once it is stopped."""

        def write(event: Event) -> None:
            if self.stopped:
                self.kept.append(event)
            else:
                stream(event)

        return write


turn_events: contextvars.ContextVar[StoppedTurnEvents | None] = contextvars.ContextVar(
    "turn_events", default=None
)


def stream_writer() -> EventSink | None:
    """The running graph's custom stream (progress events), or None outside a graph run.

    A tool invoked directly inside another runnable has a config but no graph runtime in it: the
    lookup then fails with KeyError rather than RuntimeError."""
    config = sys.modules.get("langgraph.config")
    if config is None:  # LangGraph was never imported, so no graph is running
        return None
    try:
        stream = config.get_stream_writer()
    except (RuntimeError, KeyError):
        return None
    stopped = turn_events.get()
    return stream if stopped is None else stopped.through(stream)
