"""Tool listings that survive a few broken entries.

The SDK validates a ``tools/list`` answer as a whole: one tool without an ``inputSchema``, or with
a name that is not a string, and the whole page is refused - the server would offer nothing, and
every later ``tools/call`` would fail too, since the SDK re-lists to find output schemas. So the
link sends each ``tools/list`` answer through :class:`ToolListingFilter` first: entries that the
protocol's own model refuses, or whose name is empty, are dropped with a warning (once per
session and tool), and the rest reaches the SDK intact.
"""

from __future__ import annotations

import logging
import marshal
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage
from mcp_types import PROTOCOL_VERSION_META_KEY, JSONRPCError, JSONRPCRequest, JSONRPCResponse
from mcp_types.methods import SERVER_RESULTS
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import TypeAdapter, ValidationError

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
        fresh = [tool for tool, printed in zip(tools, prints)
                 if printed is None or self._accepted.get(tool["name"]) != printed]
        if named and _problem({**message.result, "tools": fresh}, version) is None:
            self._accepted.update(
                (tool["name"], printed) for tool, printed in zip(tools, prints) if printed is not None
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


_surfaces: dict[str, TypeAdapter[Any]] = {}


def _fingerprint(tool: dict[str, Any]) -> int | None:
    """A 64-bit hash of a parsed JSON value's exact form (keys in order, ``1`` apart from
    ``1.0``): a definition that only looks new is validated again. None for a value JSON never holds."""
    try:
        return hash(marshal.dumps(tool))
    except ValueError:
        return None


def _surface(version: str) -> TypeAdapter[Any]:
    """The version's ``tools/list`` result model, as the SDK validates it (``validate_server_result``
    also serialises what it validated, which a check does not need: a third of its cost)."""
    adapter = _surfaces.get(version)
    if adapter is None:
        adapter = _surfaces[version] = TypeAdapter(SERVER_RESULTS[(LIST_METHOD, version)])
    return adapter


def _problem(result: dict[str, Any], version: str) -> str | None:
    """Why the SDK would refuse ``result`` as a ``tools/list`` answer at ``version``, or None."""
    try:
        _surface(version).validate_python(result, by_name=False)
        types.ListToolsResult.model_validate(result, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][2:]) if first["loc"][:1] == ("tools",) else ""
        more = exc.error_count() - 1
        return f"{where + ': ' if where else ''}{first['msg']}" + (f" (and {more} more)" if more else "")
    return None
