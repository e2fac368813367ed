"""Agents from other manifest files: ``agents: {research: {file: research.yaml}}``.

The other file is a manifest of its own, checked as ``mcp-run validate`` checks any (its problems
are located in it, with its path and lines), then merged into the including one:

- the agent is a model agent with that manifest's model (none written: the including one's),
  system prompt (compiled against its own folder and ``prompts.vars``), ``agent.max_steps``,
  ``agent.agents`` and its servers' tools (with their own ``tools.approve``);
- its servers join the one fleet. A server key both files define with the same definition is one
  server, started once; the same key with another definition is a problem naming both places.
  A server only the other file defines is given to that agent, not to the main one;
- its own ``agents:`` join the one set of agents by name, under the same rule as servers.

Paths the other file writes (a server's ``cwd``, a scripted model's ``script``, sandbox and
container paths, ``roots``) stay relative to its own folder; a stdio server without ``cwd`` runs in
that folder. What belongs to the process that runs the agent (``checkpointer``, ``watch``,
``telemetry``, ``limits``, ``context``, ``prompts.mcp``, ``agent.tool_search``) is the including
manifest's: written in the other file, it is ignored with a warning. What would change what the
agent may do or answer and cannot be carried over (``policy``, ``local_tools``, ``output``, another
``agent.tool_separator``) is a problem.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import ManifestError, Problem
from runner.manifest import (
    FileAgentSpec,
    Manifest,
    ModelAgentSpec,
    ModelSpec,
    RouterSpec,
    ServerSpec,
    StdioServerSpec,
)
from runner.manifest.loading import LoadedManifest

if TYPE_CHECKING:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import BaseTool

    from runner.agent.checks import CheckedAgent
    from runner.prompts.system import SystemTemplate
    from runner.tools.catalog import ToolCatalog

# Keys of the other file that belong to the process running the agent: ignored, with a warning.
IGNORED = (("checkpointer",), ("watch",), ("telemetry",), ("limits",), ("context",),
           ("prompts", "mcp"), ("agent", "tool_search"))
Checker = Callable[[Path, tuple[Path, ...]], "CheckedAgent"]


@dataclass(frozen=True)
class Merged:
    """The including manifest with its ``file:`` agents resolved, and what came with them."""

    manifest: Manifest
    templates: dict[str, SystemTemplate] = field(default_factory=dict)  # agent name -> its prompt
    files: frozenset[Path] = frozenset()  # every file the included agents are built from
    hidden_servers: frozenset[str] = frozenset()  # servers the main agent is not given
    # ("servers" or "agents", name) -> (file, line) where it is defined
    origins: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    warnings: list[Problem] = field(default_factory=list)
    # What defines each agent, to tell which ones an edit changed: its entry, or for an agent from
    # a file that whole manifest; and the files it is built from besides the including manifest.
    definitions: dict[str, Any] = field(default_factory=dict)
    agent_files: dict[str, frozenset[Path]] = field(default_factory=dict)


def check_included(loaded: LoadedManifest, check: Checker, including: tuple[Path, ...]
                   ) -> tuple[dict[str, CheckedAgent], list[Problem]]:
    """Each ``file:`` agent's manifest, checked by ``check``; the problems of those that are
    missing, include one another in a cycle, or are invalid (located in their own file)."""
    checked: dict[str, CheckedAgent] = {}
    problems: list[Problem] = []
    chain = including or (loaded.path.resolve(),)
    for name, spec in sorted(loaded.manifest.agents.items()):
        if not isinstance(spec, FileAgentSpec):
            continue
        where = ("agents", name, "file")
        target = loaded.base_dir / spec.file
        shown = Path(os.path.normpath(Path(loaded.source.file).parent / spec.file))
        if target.resolve() in chain:
            cycle = " -> ".join(_shown(path, chain[0]) for path in [*chain, target.resolve()])
            problems.append(loaded.source.problem(where, f"manifests include each other in a cycle: {cycle}"))
            continue
        if not target.is_file():
            what = "is not a file" if target.exists() else "does not exist"
            problems.append(loaded.source.problem(
                where, f"manifest '{spec.file}' {what} (relative to the manifest's folder)"))
            continue
        try:
            checked[name] = check(shown, (*chain, target.resolve()))
        except ManifestError as exc:
            problems += exc.problems
    return checked, problems


def _shown(path: Path, top: Path) -> str:
    return os.path.relpath(path, top.parent)


def merge_included(loaded: LoadedManifest, included: Mapping[str, CheckedAgent],
                   own_origins: Mapping[tuple[str, str], tuple[str, int]]) -> tuple[Merged, list[Problem]]:
    """``loaded``'s manifest with each ``file:`` agent replaced by the agent its file declares,
    its servers and agents added; the problems of what cannot be merged."""
    manifest = loaded.manifest
    servers: dict[str, ServerSpec] = dict(manifest.servers)
    agents: dict[str, Any] = {name: spec for name, spec in manifest.agents.items()
                              if not isinstance(spec, FileAgentSpec)}
    origins = dict(own_origins)
    folders = {("servers", key): loaded.base_dir for key in servers}
    templates: dict[str, SystemTemplate] = {}
    compared = {name: _comparable(spec, loaded.base_dir) for name, spec in agents.items()}
    definitions: dict[str, Any] = dict(agents)
    agent_files: dict[str, frozenset[Path]] = {}
    hidden: set[str] = set()
    files: frozenset[Path] = frozenset()
    problems: list[Problem] = []
    warnings: list[Problem] = []
    for name, sub in sorted(included.items()):
        spec = manifest.agents[name]
        assert isinstance(spec, FileAgentSpec)
        other, source, folder = sub.loaded.manifest, sub.loaded.source, sub.loaded.base_dir
        files |= sub.files
        warnings += sub.warnings + [source.problem(path, f"'{'.'.join(path)}' is the including "
                                                        "manifest's; ignored in an agent from a file")
                                    for path in IGNORED if path in source.keys]
        problems += _refused(sub, manifest)
        for key, server in sorted(other.servers.items()):
            mine = rebased_server(server, folder)
            if key in servers:
                if rebased_server(servers[key], folders[("servers", key)]) != mine:
                    there = _shown_at(origins[("servers", key)])
                    problems.append(source.problem(("servers", key), (
                        f"server '{key}' is also defined at {there}, differently: "
                        "a key names one server; use the same definition in both files or another key")))
                continue
            servers[key], folders[("servers", key)] = mine, folder
            origins[("servers", key)] = sub.origins.get(("servers", key)) or _at(sub.loaded, ("servers", key))
            hidden.add(key)
        hidden |= sub.hidden_servers
        inherited = other.model if ("model",) in source.values else None
        description = spec.description or other.description
        if description is None:
            problems.append(loaded.source.problem(("agents", name), (
                f"the agent from '{spec.file}' needs a description (what it is for, shown to the "
                "models that may call it): write 'description' here or in that file")))
            continue
        agents[name] = ModelAgentSpec(
            description=description,
            model=_rebased_model(inherited, folder) if inherited is not None else None,
            tools=[key for key, server in other.servers.items()
                   if key not in sub.hidden_servers and server.expose],
            max_steps=other.agent.max_steps if ("agent", "max_steps") in source.values else None,
            agents=list(other.agent.agents),
        )
        definitions[name], agent_files[name] = other, sub.files
        if sub.system_template is not None:
            templates[name] = sub.system_template
        for inner, agent in sorted(other.agents.items()):
            mine_agent = _rebased_agent(agent, folder, inherited)
            key2 = ("agents", inner)
            # A name of this file's own 'file:' agents is taken even before that one is merged.
            from_file = isinstance(manifest.agents.get(inner), FileAgentSpec)
            if inner in agents or from_file:
                if from_file or compared[inner] != _comparable(mine_agent, folder):
                    here = origins.get(key2) or _at(loaded, key2)
                    problems.append(source.problem(key2, (
                        f"agent '{inner}' is also defined at {_shown_at(here)}, differently: a name is one "
                        "agent; use the same definition in both files or another name")))
                continue
            agents[inner], compared[inner] = _without_prompt(mine_agent), _comparable(mine_agent, folder)
            origins[key2] = sub.origins.get(key2) or _at(sub.loaded, key2)
            definitions[inner] = sub.agent_definitions.get(inner, mine_agent)
            agent_files[inner] = sub.agent_files.get(inner, frozenset())
            if inner in sub.agent_templates:
                templates[inner] = sub.agent_templates[inner]
    merged = manifest.model_copy(update={"servers": servers, "agents": agents})
    hidden -= set(manifest.servers)  # what the including file defines, its main agent is given
    return Merged(merged, templates, files, frozenset(hidden), origins, warnings, definitions,
                  agent_files), problems


def own_origins(loaded: LoadedManifest) -> dict[tuple[str, str], tuple[str, int]]:
    """Where ``loaded`` defines each of its servers and agents (file, line)."""
    manifest = loaded.manifest
    return {(part, name): _at(loaded, (part, name))
            for part, names in (("servers", manifest.servers), ("agents", manifest.agents)) for name in names}


def _at(loaded: LoadedManifest, path: tuple[str, str]) -> tuple[str, int]:
    line, _ = loaded.source.locate(path, at_key=True)
    return loaded.source.file, line


def _shown_at(origin: tuple[str, int]) -> str:
    return f"{origin[0]}:{origin[1]}"


def _refused(sub: CheckedAgent, including: Manifest) -> list[Problem]:
    """What the other file sets that an agent from a file cannot carry over."""
    other, source = sub.loaded.manifest, sub.loaded.source
    problems = []
    if other.policy:
        problems.append(source.problem(("policy",), "an agent from a file follows the including "
                                                    "manifest's policy: move these rules there"))
    if other.local_tools:
        problems.append(source.problem(("local_tools",), (
            "an agent from a file cannot bring local tools: declare them in the including manifest "
            "and give them to an agent there")))
    if other.output is not None:
        problems.append(source.problem(("output",), "an agent's answer to its caller is text: "
                                                    "'output' is only for the main agent"))
    if other.agent.tool_separator != including.agent.tool_separator:
        problems.append(source.problem(("agent", "tool_separator"), (
            f"'{other.agent.tool_separator}' differs from the including manifest's "
            f"'{including.agent.tool_separator}': the tools of one fleet have one separator")))
    return problems


def _absolute(folder: Path, path: str) -> str:
    return os.path.normpath(path if Path(path).is_absolute() else folder / path)


def rebased_server(spec: ServerSpec, folder: Path) -> ServerSpec:
    """``spec`` with the paths it writes relative to ``folder`` made absolute (a stdio server
    without ``cwd`` runs in ``folder``): the same server wherever its definition is read."""
    update: dict[str, Any] = {}
    if spec.roots is not None:
        update["roots"] = [_absolute(folder, root) for root in spec.roots]
    if isinstance(spec, StdioServerSpec):
        update["cwd"] = _absolute(folder, spec.cwd) if spec.cwd else str(folder)
        if spec.sandbox is not None:
            update["sandbox"] = spec.sandbox.model_copy(
                update={"writable": [_absolute(folder, entry) for entry in spec.sandbox.writable]})
        if spec.container is not None:
            mounts = [mount.model_copy(update={"source": _absolute(folder, mount.source)})
                      for mount in spec.container.mounts]
            update["container"] = spec.container.model_copy(update={"mounts": mounts})
    return spec.model_copy(update=update)


def _rebased_model(spec: ModelSpec, folder: Path) -> ModelSpec:
    return spec.model_copy(update={"script": _absolute(folder, spec.script)}) if spec.script else spec


def _rebased_agent(spec: Any, folder: Path, inherited: ModelSpec | None) -> Any:
    """An agent of the other file as the including manifest must read it: its model's script
    from its folder, its prompt file too, and the other file's model where it names none."""
    if not isinstance(spec, ModelAgentSpec | RouterSpec):
        return spec
    model = spec.model if spec.model is not None else inherited
    update: dict[str, Any] = {"model": _rebased_model(model, folder) if model is not None else None}
    return spec.model_copy(update=update)


def _comparable(spec: Any, folder: Path) -> Any:
    """``spec`` with its model script and prompt file as absolute paths, to compare definitions."""
    if isinstance(spec, ModelAgentSpec):
        prompt = spec.prompt
        if prompt is not None and "\n" not in prompt and (folder / prompt).is_file():
            prompt = str((folder / prompt).resolve())
        model = _rebased_model(spec.model, folder) if spec.model is not None else None
        return spec.model_copy(update={"prompt": prompt, "model": model})
    if isinstance(spec, RouterSpec) and spec.model is not None:
        return spec.model_copy(update={"model": _rebased_model(spec.model, folder)})
    return spec


def _without_prompt(spec: Any) -> Any:
    # The prompt was compiled against the other file's folder and vars: the template is kept.
    return spec.model_copy(update={"prompt": None}) if isinstance(spec, ModelAgentSpec) else spec


# --------------------------------------------------------------------------- the main agent's share


def main_tools(catalog: ToolCatalog, hidden: frozenset[str]) -> list[BaseTool]:
    """The catalog's tools the main agent is given: not those of servers only ``file:`` agents bring."""
    tools = catalog.tools
    return [tool for tool in tools if _server_of(catalog, tool.name) not in hidden] if hidden else tools


def main_direct_call(call: Callable[[dict[str, Any]], Awaitable[ToolMessage | None]], catalog: ToolCatalog,
                     hidden: frozenset[str]) -> Callable[[dict[str, Any]], Awaitable[ToolMessage | None]]:
    """The main agent's direct tool call: a tool of a server only ``file:`` agents bring is not
    run for it (None: the tool node answers that no such tool is offered)."""
    if not hidden:
        return call

    async def direct_call(request: dict[str, Any]) -> ToolMessage | None:
        if _server_of(catalog, request["name"]) in hidden:
            return None
        return await call(request)

    return direct_call


def _server_of(catalog: ToolCatalog, name: str) -> str | None:
    entry = catalog.entries.get(name)
    return entry.origin.server if entry is not None else None
