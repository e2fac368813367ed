"""Tool search for large catalogs: past a threshold the model is offered ``search_tools`` instead
of every tool, plus the tools the manifest pins and the tools it has found so far in the thread.

``agent.tool_search`` decides when: ``on``, ``off``, or ``auto`` (the default), which searches once
the catalog has more tools than ``max_tools`` or than the provider accepts (OpenAI: 128), or
once their definitions pass ``max_bytes`` of JSON; never for the built-in ``offline`` model, which
calls the tools the user names. Decided again at every model step, so a server that adds tools
mid-thread can turn search on.

The graph keeps the found tools in its state (``found_tools``, merged by :func:`remember_found`),
so they stay bound for the rest of the thread, across checkpoints and resumed threads. Found tools
that disappear from the catalog are simply no longer offered. A call to a tool the model has not
found (it knew the name) runs like any other: search narrows what is offered, never what may be
called. While search is off, ``search_tools`` is an unknown tool like any other name. Local tools
(``local_tools``) are always offered. A catalog tool of its own named ``search_tools`` keeps search
off, so that it stays callable.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from runner.errors import UnusableSchemaError
from runner.manifest import OFFLINE_ID, ToolSearchSpec
from runner.tools.catalog import CatalogEntry, ToolCatalog
from runner.tools.filters import matches_any
from runner.tools.provider_schemas import tool_limit
from runner.tools.ranking import Document, ToolIndex

if TYPE_CHECKING:  # LangChain is imported when a model is offered tools: a listing needs none
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import BaseTool

logger = logging.getLogger(__name__)

SEARCH_TOOL = "search_tools"
FOUND_KEY = "found_tools"  # the graph state's key for the names found in a thread
MAX_RESULTS = 50
_DESCRIPTION_CHARS = 160


def remember_found(current: list[str] | None, new: list[str] | None) -> list[str]:
    """The state reducer of ``found_tools``: names in the order last found, each once."""
    latest = list(dict.fromkeys(new or []))
    return [name for name in current or [] if name not in latest] + latest


def one_line(text: str, limit: int = _DESCRIPTION_CHARS) -> str:
    """The first line of a description, cut to ``limit`` characters."""
    line = next((line.strip() for line in text.strip().splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def definition_bytes(tools: Sequence[BaseTool]) -> int:
    """Bytes of the tools' definitions as a model request carries them (OpenAI's JSON form)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return sum(len(json.dumps(convert_to_openai_tool(tool), separators=(",", ":"))) for tool in tools)


def catalog_definition_bytes(catalog: ToolCatalog) -> int:
    """``definition_bytes`` of the catalog's tools, without making the LangChain tools of server
    tools (a listing of a real model's manifest then imports no LangChain). A server tool whose
    schema is unusable is withdrawn, as ``catalog.tools`` withdraws it."""
    total = 0
    for entry in list(catalog.entries.values()):
        try:
            schema = catalog.offered_schema(entry)
        except UnusableSchemaError:
            catalog.tools_named([entry.name])  # withdraws it, with its warning
            continue
        if schema is None:  # local and resource tools are made with the catalog anyway
            total += definition_bytes([entry.tool])
        else:
            function = openai_function(entry.name, entry.description, schema)
            total += len(json.dumps({"type": "function", "function": function}, separators=(",", ":")))
    return total


def openai_function(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """What LangChain's ``convert_to_openai_tool`` makes of a tool with a JSON-schema argument
    dict: references inlined, definitions and the schema's own title and description dropped,
    every other ``title`` removed but a property's (tests compare the two)."""
    if _has_reference(schema):
        from langchain_core.utils.json_schema import dereference_refs

        schema = dereference_refs(schema)
    parameters = {key: value for key, value in schema.items()
                  if key not in ("definitions", "$defs", "title", "description")}
    return {"name": name, "description": description or schema.get("description", ""),
            "parameters": _without_titles(parameters)}


def _without_titles(schema: dict[str, Any], parent: str = "") -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and not (isinstance(value, dict) and parent == "properties"):
            continue  # a title, not a property named "title"
        kept[key] = _without_titles(value, key) if isinstance(value, dict) else value
    return kept


def _has_reference(value: Any) -> bool:
    if isinstance(value, dict):
        return "$ref" in value or any(_has_reference(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_reference(item) for item in value)
    return False


class ToolSearch:
    """Which tools a model step is offered, and the ``search_tools`` answers.

    ``catalog`` is read at every step (a reload swaps it, a list_changed rebuilds it); the index
    and the threshold decision are rebuilt only when its entries changed.
    """

    def __init__(self, catalog: Callable[[], ToolCatalog], spec: ToolSearchSpec,
                 beside: Sequence[BaseTool] = (), hidden_servers: frozenset[str] = frozenset()) -> None:
        self._catalog = catalog
        self.spec = spec
        self._beside = list(beside)  # not the catalog's (the agents the model may call): always offered
        self._hidden = hidden_servers  # servers whose tools it is not given: neither offered nor found
        self._entries: dict[str, CatalogEntry] | None = None
        self._visible: dict[str, CatalogEntry] = {}  # the entries not of hidden servers
        self._index: ToolIndex | None = None
        self._active = False
        self._tool: BaseTool | None = None
        self._always: list[str] = []  # pinned and local tools, offered at every step

    # -- what is offered --------------------------------------------------------------------

    def active(self) -> bool:
        """Whether the model is offered ``search_tools`` rather than every tool, as of now."""
        self._refresh()
        return self._active

    def offered(self, found: Sequence[str]) -> list[BaseTool]:
        """The tools a model step binds, given the names found so far in the thread."""
        catalog = self._catalog()
        if not self.active():
            tools = catalog.tools_named(list(self._visible)) if self._hidden else catalog.tools
            return [*tools, *self._beside]
        entries = self._visible
        always = self._always
        pinned = set(always)
        recent = [name for name in found if name in entries and name not in pinned]
        limit = tool_limit(catalog.provider)
        if limit is not None:  # the provider's cap: the tools found longest ago give way
            room = max(limit - 1 - len(always), 0)
            recent = recent[len(recent) - room:] if room else []
        return [self.search_tool(), *catalog.tools_named((*always, *recent)), *self._beside]

    def answers(self, name: str) -> bool:
        """Whether a call to ``name`` is a search this object answers: only while search is on
        (off, it is an unknown tool, or the catalog's own tool of that name)."""
        return name == SEARCH_TOOL and self.active()

    def bound_names(self, found: Sequence[str]) -> set[str]:
        """The names of the catalog's tools a model step binds (for listings)."""
        return {tool.name for tool in self.offered(found)} - {SEARCH_TOOL}

    def search_tool(self) -> BaseTool:
        """The ``search_tools`` tool as the model sees it (the graph answers its calls)."""
        self._refresh()
        if self._tool is None:
            from langchain_core.tools import StructuredTool

            self._tool = StructuredTool(
                name=SEARCH_TOOL,
                description=(
                    f"Search the {len(self._visible)} tools available by what they do (keywords "
                    "or a tool name). Answers with the best matches; the tools found can be called "
                    "from the next step on. Search again with other words if none fits."
                ),
                args_schema={
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Keywords, or a tool name."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS,
                                  "description": f"How many tools at most (default {self.spec.results})."},
                    },
                    "required": ["query"],
                },
                coroutine=self._run_directly,
            )
        return self._tool

    # -- answers ----------------------------------------------------------------------------

    def search(self, query: str, limit: int | None = None) -> list[Document]:
        """The catalog's tools that best match ``query``, best first."""
        self._refresh()
        if self._index is None:  # built at the first search after a change, not at every change
            self._index = ToolIndex([
                Document(name, entry.description, (entry.origin.name,) if entry.origin.server else ())
                for name, entry in self._visible.items()
            ])
        return self._index.search(query, min(limit or self.spec.results, MAX_RESULTS))

    def answer(self, call: dict[str, Any]) -> tuple[ToolMessage, list[str]]:
        """The result of a ``search_tools`` call, and the names it found (to remember)."""
        args = call.get("args") or {}
        query, limit = args.get("query"), args.get("limit")
        if not isinstance(query, str) or not query.strip():
            return self._message(call, "search_tools needs a 'query': keywords or a tool name.", "error"), []
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            return self._message(call, "'limit' must be a positive whole number.", "error"), []
        found = self.search(query, limit)
        if not found:
            text = f"No tool matches '{query}'. Try other or fewer words."
            return self._message(call, text, "success"), []
        lines = [f"- {document.name}: {one_line(document.description)}" for document in found]
        tools = "1 tool; call it" if len(found) == 1 else f"{len(found)} tools; call them"
        text = f"Found {tools} from your next step:\n" + "\n".join(lines)
        return self._message(call, text, "success"), [document.name for document in found]

    async def _run_directly(self, query: str, limit: int | None = None) -> str:
        # Outside the graph's search node (a direct invocation) the answer is the same text, but
        # nothing is remembered.
        call = {"id": "direct", "name": SEARCH_TOOL, "args": {"query": query, "limit": limit}}
        message, _ = self.answer(call)
        return str(message.content)

    @staticmethod
    def _message(call: dict[str, Any], text: str, status: str) -> ToolMessage:
        from langchain_core.messages import ToolMessage

        return ToolMessage(content=text, tool_call_id=call["id"], name=call.get("name", SEARCH_TOOL),
                           status=status)

    # -- the decision -----------------------------------------------------------------------

    def _refresh(self) -> None:
        catalog = self._catalog()
        if catalog.entries is self._entries:
            return
        entries = self._entries = catalog.entries
        self._visible = {name: entry for name, entry in entries.items()
                         if entry.origin.server not in self._hidden}
        self._index = None
        self._tool = None  # its description counts the tools
        self._active = self._decide(catalog)
        pinned = [name for name, entry in self._visible.items() if self._pinned(catalog, entry)]
        self._always = pinned if self._active else []

    def _decide(self, catalog: ToolCatalog) -> bool:
        mode = self.spec.mode
        if SEARCH_TOOL in catalog.entries:
            if mode != "off":
                logger.warning("a tool is named '%s': tool search is off so that it stays callable",
                               SEARCH_TOOL)
            return False
        if mode != "auto":
            return mode == "on"
        if catalog.manifest.model.id == OFFLINE_ID:
            return False  # it calls tools by the name the user types: it must be offered them all
        count = len(catalog.entries)
        limit = tool_limit(catalog.provider)
        if count > self.spec.max_tools or (limit is not None and count > limit):
            return True
        return catalog_definition_bytes(catalog) > self.spec.max_bytes

    @staticmethod
    def _pinned(catalog: ToolCatalog, entry: CatalogEntry) -> bool:
        server = entry.origin.server
        if server is None:
            return True  # local tools: named one by one in the manifest
        spec = catalog.manifest.servers.get(server)
        return spec is not None and matches_any(entry.origin.name, spec.tools.pin)
