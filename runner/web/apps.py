"""MCP Apps in the page: tools whose metadata names a ``ui://`` page, the page loaded through the
fleet, and the security policy of the frame that shows it.

The extension is ``io.modelcontextprotocol/ui`` (SEP-1865, stable 2026-01-26). A tool names its
page in ``_meta.ui.resourceUri`` (or the deprecated flat ``_meta["ui/resourceUri"]``) and says who
may call it in ``_meta.ui.visibility`` (``model``, ``app``; both when omitted). The page is a
``resources/read`` of that URI on the tool's own server, of type ``text/html;profile=mcp-app``, as
text or base64; its ``_meta.ui.csp`` (on the content, else on the listed resource) declares the
only origins it may reach. Nothing else is allowed: by default an app reaches no network at all.

The page (``runner/web/static/apps-host.js``) shows an app in an ``<iframe sandbox="allow-scripts">``
(an opaque origin: no access to the page, its cookies, its storage or its API) whose document is
served with :meth:`AppPage.headers`: the policy as an HTTP header, which, unlike a ``<meta>`` tag in
a ``srcdoc`` frame, does not inherit the page's own policy and also sandboxes the document when it
is opened outside its frame. :class:`AppFrames` holds the pages being shown under unguessable keys.
An app's ``tools/call`` goes through :func:`call_for_app`: a tool of the same server, offered by
the manifest, visible to apps (:func:`app_call_target`), then the manifest's policy and approvals
and the runner's caller, its output turned back into the ``CallToolResult`` the app expects
(:func:`app_result`).
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp import types
from mcp.client.extension import ClientExtension, advertise

from runner.errors import AppResourceError, ToolError
from runner.events import ApprovalAsked
from runner.tools.arguments import format_problems
from runner.tools.content import ToolOutput
from runner.tools.visibility import tool_visibility

if TYPE_CHECKING:
    from runner.tools.caller import ToolCaller
    from runner.tools.catalog import ToolCatalog

# Asks the person about a call the manifest says to ask about; answers as the chat's approvals do:
# {"action": "approve"} (optionally with edited "args") or {"action": "deny", "reason": ...}.
Approve = Callable[[ApprovalAsked], Awaitable[Mapping[str, Any]]]

APP_MIME_TYPE = "text/html;profile=mcp-app"
UI_EXTENSION = "io.modelcontextprotocol/ui"
UI_SCHEME = "ui://"
MAX_APP_BYTES = 4 * 1024 * 1024  # a single-file bundle of a framework app is well under this
# The declared origins and the directives they open (the extension's McpUiResourceCsp).
CSP_FIELDS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
# An origin as a CSP source: a web scheme, a host (its first label may be ``*``), a port, a plain
# path. No quotes, spaces, commas or semicolons: a declared "domain" can never add a directive.
SOURCE = re.compile(
    r"(?:https?|wss?)://(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%/-]*)?"
)


@dataclass(frozen=True)
class AppTool:
    """A tool of the catalog with a page: ``name`` is the catalog's, ``tool`` the server's own."""

    name: str
    server: str
    tool: str
    resource_uri: str
    visibility: frozenset[str]


@dataclass(frozen=True)
class AppListing:
    """The catalog's tools with a page, by catalog name, and what was wrong with the others'
    metadata (those are shown as plain tools)."""

    tools: dict[str, AppTool]
    warnings: list[str]


@dataclass(frozen=True)
class AppCsp:
    """The origins an app declared it needs, each checked to be an origin and nothing more."""

    connect: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    frames: tuple[str, ...] = ()
    base_uris: tuple[str, ...] = ()

    def policy(self) -> str:
        """The frame's Content-Security-Policy: the extension's, narrowed. ``'self'`` appears
        nowhere (the document is served from the page's origin: ``'self'`` would be the page's
        API), undeclared kinds are ``'none'``, and ``sandbox`` keeps the document in an opaque
        origin even when it is opened outside its frame."""
        resources = " ".join(self.resources)
        return "; ".join(directive.strip() for directive in (
            "default-src 'none'",
            f"script-src 'unsafe-inline' {resources}",
            f"style-src 'unsafe-inline' {resources}",
            f"img-src data: {resources}",
            f"font-src {_sources(self.resources)}",
            f"media-src data: {resources}",
            f"connect-src {_sources(self.connect)}",
            f"frame-src {_sources(self.frames)}",
            "object-src 'none'",
            f"base-uri {_sources(self.base_uris)}",
            "form-action 'none'",
            "frame-ancestors 'self'",
            "sandbox allow-scripts",
        ))

    def declared(self) -> dict[str, list[str]]:
        """The approved domains as the extension names them (``hostCapabilities.sandbox.csp``)."""
        values = (self.connect, self.resources, self.frames, self.base_uris)
        return {field: list(domains) for field, domains in zip(CSP_FIELDS, values, strict=True) if domains}


@dataclass(frozen=True)
class AppPage:
    """An app's page, loaded and checked: its HTML, its declared origins and border preference."""

    app: AppTool
    html: str
    csp: AppCsp
    prefers_border: bool | None = None

    def headers(self) -> dict[str, str]:
        """The HTTP headers the page's server sends with ``html`` to the app's frame."""
        return {
            "content-type": "text/html; charset=utf-8",
            "content-security-policy": self.csp.policy(),
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
            "cache-control": "no-store",
        }


def apps_extension() -> ClientExtension:
    """The client capability that tells servers this host shows MCP Apps (``mcp-run web`` only)."""
    return advertise(UI_EXTENSION, {"mimeTypes": [APP_MIME_TYPE]})


def find_apps(catalog: ToolCatalog) -> AppListing:
    """The tools of ``catalog`` whose metadata names a ``ui://`` page, current key first."""
    tools: dict[str, AppTool] = {}
    warnings: list[str] = []
    for name, entry in catalog.entries.items():
        definition, server = entry.definition, entry.origin.server
        if definition is None or server is None:
            continue  # local and resource tools have no metadata
        meta = definition.meta or {}
        ui = meta.get("ui")
        if ui is not None and not isinstance(ui, Mapping):
            warnings.append(f"{server}: tool '{definition.name}': _meta.ui {ui!r:.80} is not an object; "
                            "shown without its page")
            continue
        uri = ui.get("resourceUri") if isinstance(ui, Mapping) else None
        key = "_meta.ui.resourceUri"
        if uri is None and "ui/resourceUri" in meta:
            uri, key = meta["ui/resourceUri"], '_meta["ui/resourceUri"]'
        if uri is None:
            continue
        if not isinstance(uri, str) or not uri.startswith(UI_SCHEME) or len(uri) == len(UI_SCHEME):
            warnings.append(f"{server}: tool '{definition.name}': {key} {uri!r} is not a ui:// URI; "
                            "shown without its page")
            continue
        tools[name] = AppTool(name, server, definition.name, uri, tool_visibility(definition))
    return AppListing(tools, warnings)


async def load_app(catalog: ToolCatalog, app: AppTool, *, max_bytes: int = MAX_APP_BYTES) -> AppPage:
    """Read ``app``'s page from its server and check it: its type, its size, its declared origins.

    Raises AppResourceError (naming the server and the URI) for a page that cannot be shown, and
    the ServerError of the read when the server cannot answer.
    """
    connection = catalog.connections[app.server]
    result = await connection.read_resource(app.resource_uri)
    matching = [contents for contents in result.contents if str(contents.uri) == app.resource_uri]
    if len(matching) != 1:
        raise AppResourceError(app.server, app.resource_uri,
                               f"the server answered {len(matching)} contents for it, not one")
    contents = matching[0]
    mime_type = (contents.mime_type or "").replace(" ", "").lower()
    if mime_type != APP_MIME_TYPE:
        raise AppResourceError(app.server, app.resource_uri,
                               f"its type is {contents.mime_type!r}, not {APP_MIME_TYPE!r}: not an app page")
    html = _html(app, contents, max_bytes)
    ui = _ui_meta(contents.meta) or _ui_meta(_listed_meta(connection.resources, app.resource_uri))
    border = ui.get("prefersBorder")
    return AppPage(app, html, _csp(app, ui.get("csp")), border if isinstance(border, bool) else None)


def app_call_target(catalog: ToolCatalog, app: AppTool, tool: str) -> str:
    """The catalog name of the tool ``tool`` that ``app``'s page asks to call, or ToolError.

    An app may call only tools of its own server (as that server names them) that the manifest
    offers and whose visibility includes ``app``.
    """
    for name, entry in catalog.entries.items():
        if entry.origin.server == app.server and entry.origin.name == tool and entry.definition is not None:
            if "app" not in tool_visibility(entry.definition):
                raise ToolError(f"{app.server}: tool '{tool}' is not visible to apps (_meta.ui.visibility)")
            return name
    raise ToolError(f"{app.server}: the app of '{app.tool}' asked for tool '{tool}', which the manifest "
                    f"does not offer from server '{app.server}'")


async def call_for_app(
    caller: ToolCaller, catalog: ToolCatalog, app: AppTool, tool: str, arguments: dict[str, Any], *,
    approve: Approve, call_id: str,
) -> dict[str, Any]:
    """An app's ``tools/call`` of ``tool`` made the way ``/call`` makes a call: a tool the app may
    call (:func:`app_call_target`), its arguments checked before anyone is asked, the manifest's
    policy and approvals (``approve`` is asked when they say so; ``call_id`` names the call there),
    then the caller. Returns the app's ``CallToolResult``; raises ToolError, whose text the app is
    told, for a refusal, a denial or a failed call."""
    name = app_call_target(catalog, app, tool)
    if problems := caller.argument_problems(name, arguments):
        raise ToolError(f"invalid arguments for {name}:\n{format_problems(problems)}")
    decision = caller.decide(name, arguments)  # a denial is raised by the call itself
    if decision is not None and decision.action == "ask":
        asked = ApprovalAsked(type="approval", tool=name, args=arguments, id=call_id)
        if decision.rule is not None:
            asked["policy"] = decision.reference()
        answer = await approve(asked)
        if answer.get("action") != "approve":
            raise ToolError(f"denied: {answer.get('reason') or 'the user declined the call'}")
        edited = answer.get("args", arguments)
        arguments = edited if isinstance(edited, dict) else arguments
    return app_result(await caller.call(name, arguments))


def app_result(output: ToolOutput) -> dict[str, Any]:
    """The ``CallToolResult`` (as JSON) an app gets for its ``tools/call``, from the output of the
    call the page made through the runner: text and media as MCP content blocks (media the chat
    model cannot take arrives as the runner's note saying so), the structured content, the error."""
    blocks = [{"type": "text", "text": output.content}] if isinstance(output.content, str) else [
        _mcp_block(block) for block in output.content]
    result: dict[str, Any] = {"content": blocks, "isError": output.is_error}
    if isinstance(output.artifact, dict):
        result["structuredContent"] = output.artifact
    return result


class AppFrames:
    """The app pages the page's server is showing, each under an unguessable key (the path of its
    frame's document); past ``limit`` the oldest is forgotten."""

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._pages: OrderedDict[str, AppPage] = OrderedDict()

    def add(self, page: AppPage) -> str:
        key = secrets.token_urlsafe(24)
        self._pages[key] = page
        while len(self._pages) > self.limit:
            self._pages.popitem(last=False)
        return key

    def __getitem__(self, key: str) -> AppPage:
        return self._pages[key]

    def __contains__(self, key: object) -> bool:
        return key in self._pages


def _html(app: AppTool, contents: types.TextResourceContents | types.BlobResourceContents,
          max_bytes: int) -> str:
    def too_big(size: int) -> AppResourceError:
        return AppResourceError(app.server, app.resource_uri,
                                f"its page is {size} bytes, over the limit of {max_bytes}")

    if isinstance(contents, types.TextResourceContents):
        size = len(contents.text.encode()) if len(contents.text) <= max_bytes else len(contents.text)
        if size > max_bytes:
            raise too_big(size)
        return contents.text
    if len(contents.blob) // 4 * 3 > max_bytes:  # bounded before decoding
        raise too_big(len(contents.blob) // 4 * 3)
    try:
        return base64.b64decode(contents.blob, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise AppResourceError(app.server, app.resource_uri,
                               f"its blob is not base64 of UTF-8 HTML ({exc})") from exc


def _mcp_block(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind in ("image", "audio") and isinstance(block.get("base64"), str):
        return {"type": kind, "data": block["base64"], "mimeType": block.get("mime_type", "")}
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    return {"type": "text", "text": f"[{kind} content: not passed to apps]"}


def _sources(domains: tuple[str, ...]) -> str:
    return " ".join(domains) or "'none'"


def _ui_meta(meta: Mapping[str, Any] | None) -> Mapping[str, Any]:
    ui = (meta or {}).get("ui")
    return ui if isinstance(ui, Mapping) else {}


def _listed_meta(resources: list[types.Resource], uri: str) -> Mapping[str, Any] | None:
    return next((resource.meta for resource in resources if str(resource.uri) == uri), None)


def _csp(app: AppTool, declared: object) -> AppCsp:
    if declared is None:
        return AppCsp()
    if not isinstance(declared, Mapping):
        raise AppResourceError(app.server, app.resource_uri, "_meta.ui.csp is not an object")
    fields: list[tuple[str, ...]] = []
    for field in CSP_FIELDS:
        domains = declared.get(field, [])
        if not isinstance(domains, list):
            raise AppResourceError(app.server, app.resource_uri, f"_meta.ui.csp.{field} is not a list")
        for index, domain in enumerate(domains):
            if not isinstance(domain, str) or not SOURCE.fullmatch(domain):
                raise AppResourceError(app.server, app.resource_uri,
                                       f"_meta.ui.csp.{field}[{index}] {domain!r} is not an origin "
                                       "(scheme http, https, ws or wss; a host; a port; a path)")
        fields.append(tuple(domains))
    return AppCsp(*fields)
