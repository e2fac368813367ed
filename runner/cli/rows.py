"""What the commands and the chat show of a running agent, as JSON-ready rows: its tools, its
prompt commands and a tool's output (cut to the server's ``max_output_chars``, all of it)."""

from __future__ import annotations

import json
import shlex
from typing import Any, Literal, cast

from runner.agent.runtime import Runtime
from runner.events import AgentRow, PromptRow
from runner.manifest import MAIN_AGENT, Manifest
from runner.manifest.agents import agent_kind, called_agents
from runner.tools.arguments import problem_lines
from runner.tools.content import ToolOutput, guard_text


def main_tool_names(runtime: Runtime) -> list[str]:
    """The names of the catalog's tools the main agent can call, sorted: not those of servers only
    agents from other files bring (``ready``'s ``tools``, ``/tools``, ``mcp-run tools``, reloads)."""
    hidden = runtime.generation.checked.hidden_servers
    return sorted(name for name, entry in runtime.catalog.entries.items()
                  if entry.origin.server not in hidden)


def tool_rows(runtime: Runtime, *, schemas: bool = True) -> list[dict[str, Any]]:
    """One row per tool; ``schemas=False`` leaves out ``input_schema`` (the server's, which
    arguments are checked against) and ``provider_schema`` (the form the model is offered, adapted
    to its provider, which makes each LangChain tool). A server tool whose schema does not convert
    is left out with a warning, as the model's list leaves it out; so are the tools of servers only
    agents from other files bring (the main agent cannot call them)."""
    rows = []
    runtime.catalog.withdraw_unusable()
    hidden = runtime.generation.checked.hidden_servers  # the main agent cannot call their tools
    for entry in runtime.catalog.entries.values():
        if entry.origin.server in hidden:
            continue
        row: dict[str, Any] = {
            "name": entry.name,
            "server": entry.origin.server,
            "original": entry.origin.name,
            "description": entry.description,
            "approval": runtime.catalog.needs_approval(entry.name),
            "kind": "tool",
        }
        if schemas:
            schema = entry.tool.tool_call_schema
            # Our tools' schemas are dicts or pydantic 2 models; LangChain's type admits pydantic 1 too.
            offered = schema if isinstance(schema, dict) else schema.model_json_schema()  # type: ignore[union-attr]
            # A server tool's own schema: the one `call` checks arguments against and errors name.
            row["input_schema"] = entry.definition.input_schema if entry.definition is not None else offered
            row["provider_schema"] = offered
        rows.append(row)
    return [*rows, *beside_rows(runtime, schemas=schemas)]


def beside_rows(runtime: Runtime, *, schemas: bool = True) -> list[dict[str, Any]]:
    """The main agent's model is offered these beside the catalog's tools: a tool per agent it
    may call (``agent.agents``, kind ``agent``) and its handoff tools (kind ``handoff``). Known from
    the manifest, so a listing without a model (``mcp-run tools``) shows them too."""
    manifest = runtime.manifest
    if not manifest.agents:  # none: and the listing of a manifest without agents imports no LangChain
        return []
    from runner.agent.handoffs import main_handoff_tools
    from runner.agent.team import AgentTask, agent_tool_description

    rows: list[dict[str, Any]] = []
    beside = [(name, "agent", agent_tool_description(name, manifest.agents[name]),
               AgentTask.model_json_schema()) for name in manifest.agent.agents]
    beside += [(tool.name, "handoff", tool.description, tool.tool_call_schema.model_json_schema())  # type: ignore[union-attr]
               for tool in main_handoff_tools(manifest)]
    for name, kind, description, schema in beside:
        row: dict[str, Any] = {"name": name, "server": None, "original": name, "description": description,
                               "approval": runtime.catalog.policy.may_ask(name, (None, name)), "kind": kind}
        if schemas:
            row["input_schema"] = row["provider_schema"] = schema
        rows.append(row)
    return rows


def offered_at_start(runtime: Runtime) -> set[str] | None:
    """The tools a new thread's first model step is offered when tool search is on (pinned and
    local ones); None when every tool is offered."""
    search = runtime.generation.tool_search
    return search.bound_names([]) if search is not None and search.active() else None


async def offered_tools(runtime: Runtime) -> set[str] | None:
    """The tools the model is offered at its next step in the current thread when tool search is
    on (pinned and found ones); None when it is offered every tool."""
    search = runtime.generation.tool_search
    if search is None or not search.active():
        return None
    found: list[str] = []
    if runtime.generation.graph is not None:
        snapshot = await runtime.graph.aget_state(runtime.config())
        found = snapshot.values.get("found_tools", [])
    return search.bound_names(found)


def prompt_rows(runtime: Runtime) -> list[PromptRow]:
    return [
        PromptRow(
            command=f"/{command.name}",
            server=command.server,
            original=command.prompt.name,
            arguments=command.usage.removeprefix(f"/{command.name}").strip(),
            description=command.description,
        )
        for command in runtime.prompt_catalog
    ]


def agent_rows(manifest: Manifest) -> list[AgentRow]:
    """``main``, then each agent of ``agents:``: its kind, description and who may call it."""
    callers: dict[str, list[str]] = {name: [] for name in manifest.agents}
    for name in manifest.agent.agents:
        callers.setdefault(name, []).append(MAIN_AGENT)
    for caller, spec in sorted(manifest.agents.items()):
        for callee in dict.fromkeys(callee for _, callee in called_agents(spec)):
            callers.setdefault(callee, []).append(caller)
    rows = [AgentRow(name=MAIN_AGENT, kind="model", description=manifest.description or "", callers=[])]
    for name, spec in sorted(manifest.agents.items()):
        kind = cast(Literal["model", "chain", "parallel", "router", "loop"], agent_kind(spec))
        rows.append(AgentRow(name=name, kind=kind, description=spec.description or "",
                             callers=callers[name]))
    return rows


def first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def output_limit(runtime: Runtime, tool: str) -> int:
    entry = runtime.catalog.entries.get(tool)
    server = runtime.manifest.servers.get(entry.origin.server or "") if entry is not None else None
    limit = server.max_output_chars if server is not None else None
    return limit or runtime.manifest.defaults.max_output_chars


def output_text(output: ToolOutput, limit: int) -> tuple[str, str | None]:
    """The output's text (media as ``[image image/png]`` markers) and its structured content as
    indented JSON (or None), each cut to ``limit`` characters."""
    content = output.content
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for block in content:
            if isinstance(block, str) or block.get("type") == "text":
                parts.append(block if isinstance(block, str) else block.get("text", ""))
            else:
                parts.append(f"[{block.get('type')} {block.get('mime_type', '')}]".replace(" ]", "]"))
        text = "\n".join(parts)
    structured = None
    if output.artifact is not None:
        structured = guard_text(json.dumps(output.artifact, indent=2, default=str), limit)
    return guard_text(text, limit), structured


def refused_arguments(name: str, problems: list[str], manifest: str) -> str:
    """Why ``mcp-run call`` and the chat's ``/call`` refuse arguments for ``name``, for a person
    (``manifest``: the manifest's path, as the command that shows the schema takes it)."""
    return (f"invalid arguments for {name} (see its input_schema in "
            f"`mcp-run tools {shlex.quote(manifest)} --json`):\n" + problem_lines(problems))
