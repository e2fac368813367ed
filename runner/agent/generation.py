"""What one version of the manifest builds over the running servers: a :class:`Generation` (the
checked agent, its tool catalog, model, prompt catalog and graph) and its system prompt.

:class:`runner.agent.runtime.Runtime` builds one at start-up and at each reload
(:mod:`runner.agent.reconcile` brings the servers to the manifest first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runner.agent.checks import CheckedAgent
from runner.manifest import ModelSpec
from runner.manifest.loading import LoadedManifest
from runner.prompts import PromptCatalog
from runner.servers import ServerConnection
from runner.tools.catalog import ToolCatalog
from runner.tools.search import ToolSearch

if TYPE_CHECKING:  # the model and the graph are imported when a model is used
    from langchain_core.tools import BaseTool
    from langgraph.graph.state import CompiledStateGraph

    from runner.agent.context import ContextWindow
    from runner.agent.team import Team
    from runner.models import ModelChain

DEFAULT_SYSTEM_PROMPT = "You are {name}, an assistant that uses tools to help the user.{description}"
DEFAULT_AGENT_PROMPT = "You are {name}, one of the agents of {team}. {description}"


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
    # The models of the agents of 'agents:' that have their own (kept across reloads when unchanged).
    agent_models: tuple[tuple[ModelSpec, ModelChain], ...] = ()
    # The agents' models that could not be made (their agents' calls fail), and why: warned once.
    unusable_models: tuple[tuple[ModelSpec, str], ...] = ()
    context: ContextWindow | None = None  # what each model request carries (runner.agent.context)
    team: Team | None = None  # the agents of 'agents:', built (None: there are none, or no model)

    @property
    def loaded(self) -> LoadedManifest:
        return self.checked.loaded


def render_agent_prompt(generation: Generation, name: str, connections: Mapping[str, ServerConnection],
                        tools: Sequence[BaseTool]) -> str:
    """The system prompt of agent ``name`` of the ``agents:`` section, over the servers live now
    and the tools it is given."""
    manifest = generation.loaded.manifest
    template = generation.checked.agent_templates.get(name)
    if template is None:
        description = manifest.agents[name].description or ""
        return DEFAULT_AGENT_PROMPT.format(name=name, team=manifest.name, description=description)
    from runner.prompts.system import ServerSummary, ToolSummary  # with Jinja: templates only

    servers = [ServerSummary(key, connection.status, connection.instructions)
               for key, connection in connections.items()]
    return template.render(servers, [ToolSummary(tool.name, tool.description) for tool in tools])


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


