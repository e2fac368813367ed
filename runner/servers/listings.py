"""Tool listings that survive a few broken entries.

The SDK validates a ``tools/list`` answer as a whole: one tool without an ``inputSchema``, or with
a name that is not a string, and the whole page is refused - the server would offer nothing, and
every later ``tools/call`` would fail too, since the SDK re-lists to find output schemas. So the
link sends each ``tools/list`` answer through :class:`ToolListingFilter` first: entries that the
protocol's own model refuses, or whose name is empty, are dropped with a warning (once per
session and tool), and the rest reaches the SDK intact.

A re-list mostly repeats definitions the session already took: :class:`ToolPages` sends
``tools/list`` as the SDK's ``ClientSession.list_tools`` does, but validates and absorbs only the
definitions that are new or changed, and hands back the earlier ``Tool`` objects for the others.
"""

from __future__ import annotations

import logging
import marshal
from dataclasses import dataclass, replace
from typing import Any
from weakref import WeakKeyDictionary

import mcp_types as types
from mcp import ClientSession
from mcp.shared.message import SessionMessage
from mcp_types import PROTOCOL_VERSION_META_KEY, JSONRPCError, JSONRPCRequest, JSONRPCResponse
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from runner import sdk
from runner.servers.lean_calls import check_result, result_surface

logger = logging.getLogger(__name__)

NAME_PREVIEW_CHARS = 80
LIST_METHOD = "tools/list"
MAX_PAGE_PRINTS = 1000  # a paginated listing's pages; forgotten all at once beyond this


class ToolListingFilter:
    """Watches one session's messages; removes unusable tools from ``tools/list`` answers."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._handshake_version: str | None = None
        self._initialize_ids: set[Any] = set()
        self._pending: dict[Any, str] = {}  # tools/list request id -> protocol version
        self._reported: set[str] = set()
        # tool name -> fingerprint of its last definition that passed (not the definition: a
        # server's whole listing would be held twice, beside the SDK's models of it)
        self._accepted: dict[str, int] = {}
        self._accepted_pages: set[int] = set()  # fingerprints of whole answers that passed
        self._accepted_version: str | None = None  # ... at this protocol version

    def outbound(self, message: SessionMessage) -> None:
        request = message.message
        if not isinstance(request, JSONRPCRequest):
            return
        if request.method == "initialize":
            self._initialize_ids.add(request.id)
        elif request.method == LIST_METHOD:
            meta = (request.params or {}).get("_meta") or {}
            version = meta.get(PROTOCOL_VERSION_META_KEY) or self._handshake_version
            self._pending[request.id] = version or LATEST_HANDSHAKE_VERSION

    def inbound(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        if not isinstance(item, SessionMessage):
            return item
        message = item.message
        if isinstance(message, JSONRPCError):
            self._pending.pop(message.id, None)
            self._initialize_ids.discard(message.id)
            return item
        if not isinstance(message, JSONRPCResponse):
            return item
        if message.id in self._initialize_ids:
            self._initialize_ids.discard(message.id)
            version = message.result.get("protocolVersion")
            self._handshake_version = version if isinstance(version, str) else None
            return item
        version = self._pending.pop(message.id, None)
        tools = message.result.get("tools")
        if version is None or version not in KNOWN_PROTOCOL_VERSIONS or not isinstance(tools, list):
            return item  # not a listing, or one the SDK will judge as a whole
        named = all(isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool["name"] != ""
                    for tool in tools)
        if version != self._accepted_version:
            self._accepted, self._accepted_pages, self._accepted_version = {}, set(), version
        page = _fingerprint(message.result)
        if page is not None and page in self._accepted_pages:
            return item  # the very answer that passed before (the usual re-list): nothing to check
        # A re-list mostly repeats tools already checked: fingerprinting a definition costs a
        # third of validating it again, and the memo holds a number, not the definition.
        prints = [_fingerprint(tool) for tool in tools] if named else []
        fresh = [tool for tool, printed in zip(tools, prints, strict=False)  # no prints unless named
                 if printed is None or self._accepted.get(tool["name"]) != printed]
        if named and _problem({**message.result, "tools": fresh}, version) is None:
            self._accepted.update(
                (tool["name"], printed)
                for tool, printed in zip(tools, prints, strict=True) if printed is not None
            )
            if page is not None:
                if len(self._accepted_pages) >= MAX_PAGE_PRINTS:
                    self._accepted_pages.clear()
                self._accepted_pages.add(page)
            return item  # all is well
        if _problem({**message.result, "tools": []}, version):
            return item  # what is wrong is not in the tools: the SDK will say
        kept = [tool for tool in tools if self._usable(message.result, tool, version)]
        answer = message.model_copy(update={"result": {**message.result, "tools": kept}})
        return SessionMessage(answer, metadata=item.metadata)

    def _usable(self, result: dict[str, Any], tool: Any, version: str) -> bool:
        reason = _problem({**result, "tools": [tool]}, version)
        if reason is None and tool["name"] == "":
            reason = "its name is empty"
        if reason is None:
            return True
        name = tool.get("name") if isinstance(tool, dict) else None
        shown = repr(name)[:NAME_PREVIEW_CHARS] if name is not None else "without a name"
        if f"{shown}: {reason}" not in self._reported:
            self._reported.add(f"{shown}: {reason}")
            logger.warning("server %s: tool %s skipped: %s", self.key, shown, reason)
        return False




def _fingerprint(tool: dict[str, Any]) -> int | None:
    """A 64-bit hash of a parsed JSON value's exact form (keys in order, ``1`` apart from
    ``1.0``): a definition that only looks new is validated again. None for a value JSON never holds."""
    try:
        return hash(marshal.dumps(tool))
    except ValueError:
        return None


def _problem(result: dict[str, Any], version: str) -> str | None:
    """Why the SDK would refuse ``result`` as a ``tools/list`` answer at ``version``, or None."""
    try:
        surface = result_surface(LIST_METHOD, version)  # known: the filter judges known versions only
        assert surface is not None
        surface.validate_python(result, by_name=False)
        types.ListToolsResult.model_validate(result, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][2:]) if first["loc"][:1] == ("tools",) else ""
        more = exc.error_count() - 1
        return f"{where + ': ' if where else ''}{first['msg']}" + (f" (and {more} more)" if more else "")
    return None


@dataclass(frozen=True, slots=True)
class _Taken:
    """A definition the session took: its fingerprint, its model, and (2026) its header map."""

    printed: int
    tool: types.Tool
    header_map: Any


_MISSING = object()
_pages: WeakKeyDictionary[ClientSession, ToolPages] = WeakKeyDictionary()


class ToolPages:
    """One session's ``tools/list``: what ``ClientSession.list_tools`` returns and leaves in the
    session (the output schemas ``call_tool`` checks results against; in 2026 the ``x-mcp-header``
    maps, and tools dropped for a bad one), at the cost of what changed.

    A definition that is exactly the one the session took last time, and whose session state is
    still the one it left (no other listing replaced it), is neither validated nor absorbed again:
    its earlier ``Tool`` is reused. New and changed definitions and the envelope are validated and
    absorbed as the SDK does; an answer that fails is validated again whole, so the error is the
    SDK's own. The SDK's response cache (``Client(cache=...)``) is bypassed: mcp-run's clients
    have none, the catalogue is the cache.
    """

    def __init__(self, session: ClientSession) -> None:
        self._session = session
        self._version: str | None = None
        self._taken: dict[str, _Taken] = {}

    @staticmethod
    def of(session: ClientSession) -> ToolPages:
        """The session's pages (one memory per session, gone with it)."""
        pages = _pages.get(session)
        if pages is None:
            pages = _pages[session] = ToolPages(session)
        return pages

    async def fetch(self, cursor: str | None = None) -> types.ListToolsResult:
        """One page, as ``Client.list_tools(cursor=cursor)`` answers it."""
        session = self._session
        request = types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor))
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        raw = await sdk.send_raw(session, data, timeout=None)  # send_request would validate it whole
        return self._take(raw, first_page=cursor is None)

    def _take(self, raw: dict[str, Any], *, first_page: bool) -> types.ListToolsResult:
        session = self._session
        sdk.clamp_inbound_ttl(raw)
        version = session.protocol_version or LATEST_HANDSHAKE_VERSION
        modern = version in MODERN_PROTOCOL_VERSIONS
        if version != self._version:
            self._taken, self._version = {}, version
        definitions = raw.get("tools")
        prints: list[int | None] = []
        earlier: list[types.Tool | None] = []
        if isinstance(definitions, list) and _distinct_names(definitions):
            prints = [_fingerprint(definition) for definition in definitions]
            earlier = [self._still_taken(definition["name"], printed, modern)
                       for definition, printed in zip(definitions, prints, strict=True)]
        try:
            if earlier and isinstance(definitions, list):
                fresh = [definition for definition, was in zip(definitions, earlier, strict=True)
                         if was is None]
                result = _validated({**raw, "tools": fresh}, version)
            else:
                result = _validated(raw, version)
        except ValidationError:
            if not earlier:
                raise
            result, prints, earlier = _validated(raw, version), [], []  # the SDK's error, about the whole
        validated = list(result.tools)
        if validated:
            sdk.absorb_tool_listing(session, result, complete=False)  # pruned below when complete
        kept = {id(tool) for tool in result.tools}
        remembered = iter(prints) if prints else None
        newly = iter(validated)
        listed: list[types.Tool] = []
        for was in earlier or [None] * len(validated):
            printed = next(remembered) if remembered is not None else None
            tool = was if was is not None else next(newly)
            if was is None and id(tool) not in kept:
                continue  # dropped by the SDK (2026: a bad x-mcp-header)
            listed.append(tool)
            if was is None and printed is not None:
                self._remember(tool, printed, modern)
        names = {tool.name for tool in listed}
        if first_page and result.next_cursor is None:  # the whole listing: forget what left it
            if not _holds_only(session, names):
                sdk.absorb_tool_listing(session, types.ListToolsResult(tools=list(listed)), complete=True)
                for tool in listed:  # absorbed again: new header maps
                    if (taken := self._taken.get(tool.name)) is not None and taken.tool is tool:
                        header_map = sdk.header_maps(session).get(tool.name, _MISSING)
                        self._taken[tool.name] = replace(taken, header_map=header_map)
            if len(self._taken) > len(names):
                self._taken = {name: taken for name, taken in self._taken.items() if name in names}
        return result.model_copy(update={"tools": listed})

    def _still_taken(self, name: str, printed: int | None, modern: bool) -> types.Tool | None:
        """The earlier model of this exact definition, if the session still holds what it left."""
        taken = self._taken.get(name)
        if taken is None or taken.printed != printed:
            return None
        session = self._session
        if sdk.tool_output_schemas(session).get(name, _MISSING) is not taken.tool.output_schema:
            return None  # another listing (call_tool's, when a name was unknown) replaced it
        if modern and sdk.header_maps(session).get(name, _MISSING) is not taken.header_map:
            return None
        return taken.tool

    def _remember(self, tool: types.Tool, printed: int, modern: bool) -> None:
        header_map = sdk.header_maps(self._session).get(tool.name, _MISSING) if modern else None
        self._taken[tool.name] = _Taken(printed, tool, header_map)


def _distinct_names(definitions: list[Any]) -> bool:
    names = {definition.get("name") if isinstance(definition, dict) else None for definition in definitions}
    return len(names) == len(definitions) and all(isinstance(name, str) for name in names)


def _holds_only(session: ClientSession, names: set[str]) -> bool:
    """Whether the session's per-tool state is about ``names`` alone (nothing to prune)."""
    return (sdk.tool_output_schemas(session).keys() <= names and sdk.header_maps(session).keys() <= names
            and sdk.tool_output_validators(session).keys() <= names)


def _validated(raw: dict[str, Any], version: str) -> types.ListToolsResult:
    """``raw`` as ``ClientSession.send_request`` validates and parses a ``tools/list`` answer.

    Validated, not also serialised as ``validate_server_result`` does: its dump stops at pydantic's
    serialisation depth (an input schema nested some 130 levels), and would lose the whole listing
    where the tools layer skips the one tool whose schema nests too deep."""
    check_result(LIST_METHOD, version, raw)
    if not (foreign := sdk.later_revision_fields(LIST_METHOD, version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return types.ListToolsResult.model_validate(raw, by_name=False)
