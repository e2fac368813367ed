"""The tools the model sees: MCP tools of every exposed server, resource tools and local tools.

A :class:`ToolCatalog` is rebuilt whenever the manifest or a server's tool list changes; each build
filters, names and converts the tools, and checks the names for collisions across all sources. The
catalog builds and lists; calls go through exactly one path, a
:class:`runner.tools.caller.ToolCaller`: argument validation against the tool's original schema,
the server call with its timeout, fallbacks on transient failures, and conversion of the result.
"""

from __future__ import annotations

import gc
import inspect
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp import types

from runner.errors import BuildError, ToolError, UnusableSchemaError
from runner.manifest import Manifest, ServerBase, did_you_mean
from runner.manifest.agents import handoff_tool_names
from runner.manifest.loading import SourceMap, format_path
from runner.servers.tasks import offered_to_agent
from runner.tools.caller import READ_RESOURCE, RESOURCE_TOOLS, Connection, FallbackEvent, ToolCall, ToolCaller
from runner.tools.filters import (
    apply_filter_function,
    filter_problems,
    load_import_path,
    select_names,
)
from runner.tools.naming import NameTable, Origin, generate_name
from runner.tools.policy import Policy
from runner.tools.provider_schemas import provider_for_model, schema_for_provider
from runner.tools.schemas import listing_problem
from runner.tools.visibility import offered_to_model

if TYPE_CHECKING:  # LangChain is imported when a tool is first made: listing and calling need none
    from langchain_core.tools import BaseTool

logger = logging.getLogger(__name__)

@dataclass(slots=True)
class CatalogEntry:
    """One tool of the catalog: its generated name, where it comes from and the LangChain tool.

    A server tool's LangChain tool (and the provider's form of its schema) is made on first use,
    when a model is offered the tool or something asks for ``tool``: a build of thousands of tools
    converts nothing, and calls (``ToolCaller.run_tool_call``) never need it. Entries are many, so
    they are small: slots, and the catalog that makes the tool instead of a closure per entry.
    """

    name: str
    origin: Origin
    description: str
    built: BaseTool | None  # the LangChain tool, once made
    definition: types.Tool | None = None  # the MCP definition (None for local and resource tools)
    maker: ToolCatalog | None = field(default=None, repr=False)  # makes ``built`` from ``definition``

    @property
    def tool(self) -> BaseTool:
        """The LangChain tool; raises UnusableSchemaError when the schema cannot be converted."""
        if self.built is None:
            assert self.maker is not None and self.definition is not None
            self.built = self.maker.mcp_tool(self.name, self.description, self.definition)
        return self.built


class ToolCatalog:
    """Builds and lists the tools of one manifest over a set of server connections.

    ``call`` is what the model's calls to the catalog's LangChain tools run (a
    :class:`runner.tools.caller.ToolCaller`'s ``model_call``); by default a caller of this catalog
    alone, which declines servers' questions and reports no progress. ``schema_cache``: the converted
    schemas of the catalog this one replaces; ``warned``: the warnings it gave (not repeated);
    ``source``: where the manifest's values are, to locate warnings.
    """

    def __init__(
        self, manifest: Manifest, connections: Mapping[str, Connection], base_dir: Path, *,
        call: ToolCall | None = None,
        schema_cache: dict[tuple[str, int], tuple[types.Tool, dict[str, Any]]] | None = None,
        warned: Collection[str] = (), source: SourceMap | None = None,
    ) -> None:
        self.manifest = manifest
        self.connections = connections
        self.base_dir = base_dir
        self.source = source
        self.provider = provider_for_model(manifest.model.id)
        self.policy = Policy(manifest)  # the manifest's policy rules, then its tools.approve entries
        # Converted schemas by definition; the catalog of the next reload may take this one's over.
        self.schema_cache = schema_cache if schema_cache is not None else {}
        self.entries: dict[str, CatalogEntry] = {}
        self.warnings = list(warned)
        self._call = call if call is not None else ToolCaller(lambda: self).model_call
        self._withdrawn: set[str] = set(warned)
        self._names: tuple[list[tuple[str | None, str]], NameTable] | None = None
        self._local = [self._local_tool(path) for path in manifest.local_tools]
        self._filters = {
            key: load_import_path(spec.tools.filter, base_dir=base_dir)
            for key, spec in manifest.servers.items()
            if spec.tools.filter
        }
        # Each server's ``on_fallback``: asked before its call is retried on its fallback.
        self.fallback_hooks: dict[str, Callable[[FallbackEvent], Any]] = {
            key: load_import_path(spec.on_fallback, base_dir=base_dir)
            for key, spec in manifest.servers.items()
            if spec.on_fallback
        }
        self.rebuild()

    @property
    def tools(self) -> list[BaseTool]:
        """The LangChain tools the model is offered; a server tool whose schema turns out
        unusable when its tool is first made is withdrawn, with a warning."""
        return self.tools_named(list(self.entries))

    def tools_named(self, names: Iterable[str]) -> list[BaseTool]:
        """The LangChain tools of ``names`` that are in the catalog (unusable ones withdrawn)."""
        tools = []
        for name in names:
            entry = self.entries.get(name)
            if entry is None or (entry.definition is not None and not offered_to_model(entry.definition)):
                continue  # an MCP App's tool for its page alone is not the model's
            try:
                tools.append(entry.tool)
            except UnusableSchemaError as exc:
                self._withdraw(entry, exc)
        return tools

    def _withdraw(self, entry: CatalogEntry, problem: UnusableSchemaError) -> None:
        warning = f"{entry.origin.server}: tool '{entry.origin.name}' skipped: {problem}"
        if warning not in self.warnings:
            if warning not in self._withdrawn:  # said once, not again after every rebuild
                logger.warning("%s", warning)
            self._withdrawn.add(warning)
            self.warnings.append(warning)
        self.entries.pop(entry.name, None)

    def withdraw_unusable(self) -> None:
        """Convert every server tool's schema (without making its tool) and withdraw, with a
        warning, the tools whose schema turns out unusable, as ``tools`` does when they are made."""
        for entry in list(self.entries.values()):
            try:
                self.offered_schema(entry)
            except UnusableSchemaError as exc:
                self._withdraw(entry, exc)

    def offered_schema(self, entry: CatalogEntry) -> dict[str, Any] | None:
        """The argument schema the model is offered for a server tool, made without its LangChain
        tool; None for a local or resource tool. Raises UnusableSchemaError like ``tool``."""
        if entry.built is not None or entry.definition is None:
            return None
        return self._schema_for(entry.definition)

    def needs_approval(self, name: str) -> bool:
        """Whether some call of tool ``name`` is put to the user first (a policy ``ask`` rule or
        a ``tools.approve`` entry matches it, at least for some arguments)."""
        entry = self.entries.get(name)
        if entry is None:
            return False
        return self.policy.may_ask(name, entry.origin)

    def rebuild(self) -> list[str]:
        """Rebuild every entry from the connections as they are now; returns new warnings."""
        # Thousands of new objects would trigger full garbage collections over every listing the
        # servers sent (three quarters of a 10,000-tool build); the build makes no garbage worth
        # collecting meanwhile, and it runs without awaiting, so nothing else runs with it paused.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._rebuild()
        finally:
            if collecting:
                gc.enable()

    def _rebuild(self) -> list[str]:
        warnings: list[str] = []
        self._used_schemas: set[tuple[str, int]] = set()
        offered: dict[str, list[types.Tool]] = {}
        for key, spec in self.manifest.servers.items():
            connection = self.connections.get(key)
            if not spec.expose:
                continue
            if connection is None or connection.status == "failed":
                # Down: what its fallback offers stands in, under this server's names and filters,
                # and calls go to the fallback (see _call_with_fallbacks).
                stand_in = self._live(spec.fallback)
                if stand_in is not None:
                    offered[key] = self._selected(key, spec, stand_in.tools, warnings)
                continue
            offered[key] = self._selected(key, spec, connection.tools, warnings)
        origins: list[tuple[str | None, str]] = [
            (key, tool.name) for key, tools in offered.items() for tool in tools
        ]
        origins += [
            (key, name) for key, spec in self.manifest.servers.items()
            if spec.resources and spec.expose and key in offered for name in RESOURCE_TOOLS
        ]
        origins += [(None, tool.name) for tool in self._local]
        table = self._name_table(origins)
        entries: dict[str, CatalogEntry] = {}
        for key, tools in offered.items():
            for definition in tools:
                name = table.name_for(key, definition.name)
                previous = self.entries.get(name)
                if previous is not None and previous.definition is definition:
                    entries[name] = previous  # unchanged tool (the catalogue kept its object)
                    self._used_schemas.add((definition.name, id(definition)))
                    continue
                entry = self._mcp_entry(name, table.origin(name), definition, warnings)
                if entry is not None:
                    entries[name] = entry
            if self.manifest.servers[key].resources:
                for resource_tool in RESOURCE_TOOLS:
                    name = table.name_for(key, resource_tool)
                    entries[name] = self._resource_entry(name, key, resource_tool)
        for local in self._local:
            name = table.name_for(None, local.name)
            entries[name] = CatalogEntry(name, Origin(None, local.name), local.description,
                                         local.model_copy(update={"name": name}))
        warnings += self._fallback_warnings(offered)
        warnings += self._policy_warnings(entries)
        warnings += self._agent_tool_warnings(entries)
        for origin in table.unused_renames():
            warnings.append(f"{origin.server}: tools.rename names '{origin.name}', which is not offered")
        self.entries = entries
        # Keep only the schemas of definitions still offered, so relists do not grow the cache.
        self.schema_cache = {key: self.schema_cache[key] for key in self._used_schemas
                             if key in self.schema_cache}  # a reused entry may not have converted yet
        for warning in warnings:
            if warning not in self.warnings:
                logger.warning("%s", warning)
        self.warnings = warnings
        return warnings

    def _policy_warnings(self, entries: Mapping[str, CatalogEntry]) -> list[str]:
        """``policy`` rules whose tool glob matches no tool, once every exposed server is running
        (while one is down, its tools are not known, and a rule may be meant for them)."""
        if any(self._live(key) is None for key, spec in self.manifest.servers.items() if spec.expose):
            return []
        warnings = []
        # The agents of 'agents:' are tools too (of the agents that call them).
        # So are the handoff tools (handoff_to_NAME, handoff_back) of the models that hand off.
        handoffs = handoff_tool_names(self.manifest.agents, self.manifest.agent.handoffs)
        for index in self.policy.unmatched([*entries, *self.manifest.agents, *handoffs]):
            glob = self.manifest.policy[index].tool
            message = f"'{glob}' matches no tool the servers offer{did_you_mean(glob, entries)}"
            where = ("policy", index, "tool")
            warnings.append(str(self.source.problem(where, message)) if self.source is not None
                            else f"{format_path(where)}: {message}")
        return warnings

    def _agent_tool_warnings(self, entries: Mapping[str, CatalogEntry]) -> list[str]:
        """``agents.<name>.tools`` entries that give the agent no tool (a misspelt tool name), said
        as the servers' ``tools.only`` entries that match nothing are, once every exposed server
        is running (while one is down, its tools are not known)."""
        if any(self._live(key) is None for key, spec in self.manifest.servers.items() if spec.expose):
            return []
        warnings = []
        for agent, spec in self.manifest.agents.items():
            for index, entry in enumerate(getattr(spec, "tools", None) or ()):
                if entry in self.manifest.servers or any(
                        fnmatchcase(name, entry) or entry == item.origin.server
                        for name, item in entries.items()):
                    continue  # a server key gives all its tools, even none; a name or glob matched
                message = f"'{entry}' matches no tool{did_you_mean(entry, entries)}"
                where = ("agents", agent, "tools", index)
                warnings.append(str(self.source.problem(where, message)) if self.source is not None
                                else f"{format_path(where)}: {message}")
        return warnings

    def _name_table(self, origins: list[tuple[str | None, str]]) -> NameTable:
        """The names of ``origins``; the last build's table when they are the same (a re-list that
        changed nothing), since separator and renames are the manifest's, fixed for this catalog."""
        if self._names is not None and self._names[0] == origins:
            return self._names[1]
        renames: dict[str | None, Mapping[str, str]] = {
            key: spec.tools.rename for key, spec in self.manifest.servers.items()
        }
        table = NameTable(origins, separator=self.manifest.agent.tool_separator, renames=renames)
        self._names = (origins, table)  # kept only once built: a collision raises above
        return table

    def _selected(
        self, key: str, spec: ServerBase, tools: list[types.Tool], warnings: list[str]
    ) -> list[types.Tool]:
        names = [tool.name for tool in tools]
        for path, message in filter_problems(spec.tools, names):
            where = ("servers", key, "tools", *path)  # file:line:col: path: as for manifest problems
            located = self.source.problem(where, message, at_key=isinstance(path[-1], str)) \
                if self.source is not None else f"{format_path(where)}: {message}"
            warnings.append(str(located))
        keep = set(select_names(names, spec.tools))
        selected = []
        for tool in tools:
            if tool.name not in keep:
                continue
            if not offered_to_agent(tool, spec.tasks):
                warnings.append(f"{key}: tool '{tool.name}' skipped: it only runs as a task (tasks: never)")
                continue
            selected.append(tool)
        if key in self._filters:
            assert spec.tools.filter is not None
            selected = apply_filter_function(selected, self._filters[key], import_path=spec.tools.filter)
        return selected

    def _mcp_entry(
        self, name: str, origin: Origin, definition: types.Tool, warnings: list[str]
    ) -> CatalogEntry | None:
        key = (definition.name, id(definition))
        cached = self.schema_cache.get(key)
        if cached is not None and cached[0] is definition:
            self._used_schemas.add(key)  # converted for the catalog this one replaces: keep it
        elif (problem := listing_problem(definition.input_schema)) is not None:
            # Checked when listed, not when the tool is made: `call` validates arguments without
            # making it. A converted definition was checked when first listed.
            warnings.append(f"{origin.server}: tool '{definition.name}' skipped: {problem}")
            return None
        description = definition.description or definition.title or f"{definition.name} from {origin.server}"
        return CatalogEntry(name, origin, description, None, definition, self)  # the table's origin: shared

    def mcp_tool(self, name: str, description: str, definition: types.Tool) -> BaseTool:
        """The LangChain tool of a server tool (its entry's ``tool``); raises UnusableSchemaError."""
        return self._tool(name, description, self._schema_for(definition))

    def _resource_entry(self, name: str, server: str, which: str) -> CatalogEntry:
        if which == READ_RESOURCE:
            description = f"Read a resource of the '{server}' server by its URI."
            schema = {"type": "object", "properties": {"uri": {"type": "string",
                      "description": "The resource URI, as listed."}}, "required": ["uri"]}
        else:
            description = f"List the resources (and URI templates) the '{server}' server offers."
            schema = {"type": "object", "properties": {}}
        return CatalogEntry(name, Origin(server, which), description, self._tool(name, description, schema))

    def _tool(self, name: str, description: str, schema: dict[str, Any]) -> BaseTool:
        """The LangChain tool the model calls: every call goes through ``call`` (the caller's)."""

        async def run(**arguments: Any) -> tuple[Any, Any]:
            output = await self._call(name, arguments)
            return output.content, output.artifact

        return _mcp_tool_class()(name=name, description=description, args_schema=schema, coroutine=run,
                                 response_format="content_and_artifact")

    def _local_tool(self, import_path: str) -> BaseTool:
        from langchain_core.tools import BaseTool, StructuredTool

        function = load_import_path(import_path, base_dir=self.base_dir)
        if isinstance(function, BaseTool):
            return function
        name = generate_name(None, getattr(function, "__name__", "tool"))
        description = inspect.getdoc(function) or f"{name} (local tool {import_path})"
        if inspect.iscoroutinefunction(function):
            return StructuredTool.from_function(coroutine=_as_tool_error(function), name=name,
                                                description=description, args_schema=None,
                                                infer_schema=True)
        return StructuredTool.from_function(func=_as_tool_error(function), name=name,
                                            description=description, infer_schema=True)

    def _live(self, key: str | None) -> Connection | None:
        connection = self.connections.get(key) if key is not None else None
        if connection is None or connection.status == "failed":
            return None
        return connection

    def _fallback_warnings(self, offered: Mapping[str, list[types.Tool]]) -> list[str]:
        warnings = []
        for key, tools in offered.items():
            if self._live(key) is None:
                continue  # its tools are the fallback's own
            fallback = self.manifest.servers[key].fallback
            connection = self.connections.get(fallback) if fallback else None
            if fallback is None or connection is None or connection.status == "failed":
                continue
            theirs = {tool.name: tool for tool in connection.tools}
            for tool in tools:
                other = theirs.get(tool.name)
                if other is None:
                    warnings.append(f"{key}: fallback '{fallback}' has no tool '{tool.name}'")
                elif not _compatible(tool.input_schema, other.input_schema):
                    warnings.append(
                        f"{key}: fallback '{fallback}' has tool '{tool.name}' with an incompatible schema"
                    )
        return warnings

    def _schema_for(self, definition: types.Tool) -> dict[str, Any]:
        """The provider's form of a tool's schema, converted once per distinct definition."""
        key = (definition.name, id(definition))
        cached = self.schema_cache.get(key)
        if cached is None or cached[0] is not definition:
            cached = (definition, schema_for_provider(definition.input_schema, self.provider))
            self.schema_cache[key] = cached
        self._used_schemas.add(key)  # only once converted: an unusable schema is not cached
        return cached[1]

@cache
def _mcp_tool_class() -> type[BaseTool]:
    """The tool class of server tools, made on first use (LangChain is imported with it)."""
    from langchain_core.tools import StructuredTool
    from pydantic import ConfigDict

    class _McpTool(StructuredTool):
        """A StructuredTool whose raw JSON-Schema arguments pass through untouched."""

        model_config = ConfigDict(arbitrary_types_allowed=True)

        # Deliberately unannotated: on every call LangChain reads the type hints of ``_arun`` looking
        # for a RunnableConfig parameter, which costs a third of its per-call overhead with hints.
        async def _arun(self, *args, **kwargs):
            assert self.coroutine is not None
            return await self.coroutine(*args, **kwargs)

    return _McpTool


def _as_tool_error(function: Callable[..., Any]) -> Callable[..., Any]:
    """Exceptions from a user's local tool are reported to the model, not raised at the user."""
    import functools

    if inspect.iscoroutinefunction(function):
        @functools.wraps(function)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await function(*args, **kwargs)
            except (ToolError, BuildError):
                raise
            except Exception as exc:  # user code: its failure is the tool's answer
                raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        return run_async

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (ToolError, BuildError):
            raise
        except Exception as exc:  # user code: its failure is the tool's answer
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
    return run


def _compatible(primary: dict[str, Any], fallback: dict[str, Any]) -> bool:
    """The fallback accepts what the primary accepts: it knows every property the primary has
    and requires nothing more."""
    ours = set((primary.get("properties") or {}).keys())
    theirs = set((fallback.get("properties") or {}).keys())
    required = set(fallback.get("required") or [])
    return ours <= theirs and required <= set(primary.get("required") or [])
