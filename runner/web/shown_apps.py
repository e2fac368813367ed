"""MCP Apps in ``mcp-run web``'s page: which tools have an app (:func:`runner.web.apps.find_apps`,
at start and after each reload or list change), an app's page loaded for the card of a call of
such a tool and served to its frame under an unguessable key, and the app's own tool calls made
through the manifest's policy and approvals, the approval asked in the page.

An app's ``tools/call`` reaches ``POST /api/app-call`` (token and Origin checked like the rest of
the API; the app's frame, an opaque origin, has neither: the page's bridge makes the request). A
call the manifest says to ask about is answered as the servers panel's "try it" is: the first
request returns the ``approval`` to ask; the page asks in the call's card and sends the
request again with the person's ``answer``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.agent.runtime import Runtime
from runner.errors import ServerError
from runner.events import ApprovalAsked
from runner.web.answers import checked_approval
from runner.web.apps import AppFrames, AppListing, AppPage, call_for_app, find_apps, load_app
from runner.web.security import APP_FRAME_PATH


class ApprovalToAsk(Exception):
    """An app's call waits for the person: ``asked`` is the approval the page asks."""

    def __init__(self, asked: ApprovalAsked) -> None:
        super().__init__(f"{asked['tool']} needs an approval")
        self.asked = asked


class ShownApps:
    """The apps of ``runtime``'s tools and the pages the page is showing (one per process)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.frames = AppFrames()
        self.listing: AppListing = find_apps(runtime.catalog)
        self.unshown: dict[str, str] = {}  # tool -> why its app's page could not be shown, last time

    def refresh(self) -> None:
        """The tools with an app again, after a reload or a change of a server's tools."""
        self.listing = find_apps(self.runtime.catalog)
        self.unshown.clear()

    @property
    def warnings(self) -> list[str]:
        """What is wrong with the tools' app metadata, and the app pages that could not be shown."""
        unshown = (f"tool '{tool}': its app's page cannot be shown: {why}"
                   for tool, why in self.unshown.items())
        return [*self.listing.warnings, *unshown]

    async def card_app(self, name: str, detail: Mapping[str, Any], status: str) -> dict[str, Any] | None:
        """What the card of a call of tool ``name`` mounts (its app's frame and what the app is
        given), ``{"error": ...}`` when its page cannot be shown, None for a tool without an app."""
        app = self.listing.tools.get(name)
        if app is None:
            return None
        try:
            page = await load_app(self.runtime.catalog, app)
        except ServerError as exc:  # AppResourceError too: the page cannot be shown, the card says why
            self.unshown[name] = str(exc)  # and so does the servers panel
            return {"error": str(exc)}
        self.unshown.pop(name, None)
        key = self.frames.add(page)
        entry = self.runtime.catalog.entries.get(name)
        tool = (entry.definition.model_dump(mode="json", by_alias=True, exclude_none=True)
                if entry is not None and entry.definition is not None else None)
        return {"key": key, "src": APP_FRAME_PATH + key, "csp": page.csp.declared(), "toolName": app.tool,
                "tool": tool, "prefersBorder": page.prefers_border,
                "toolResult": detail_result(detail, status)}

    def page(self, key: str) -> AppPage | None:
        return self.frames[key] if key in self.frames else None

    async def call(self, key: str, tool: str, arguments: dict[str, Any], answer: Any) -> dict[str, Any]:
        """The app shown under ``key`` calls ``tool``: its ``CallToolResult``; ApprovalToAsk when
        the manifest says to ask and ``answer`` is None; ToolError for a refusal, a denial or a
        failed call; AnswerError for an answer that does not fit the approval; KeyError for an
        unknown key."""
        page = self.frames[key]

        async def ask_in_page(asked: ApprovalAsked) -> Mapping[str, Any]:
            if answer is None:
                raise ApprovalToAsk(asked)
            decision = checked_approval(self.runtime, asked, answer)
            if decision["action"] == "edit":
                return {"action": "approve", "args": decision["args"]}
            if decision["action"] == "deny":
                return {"action": "deny", "reason": decision.get("reason") or "denied by the user"}
            return {"action": "approve"}

        return await call_for_app(self.runtime.caller, self.runtime.catalog, page.app, tool, arguments,
                                  approve=ask_in_page, call_id=f"app-{key[:8]}")


def detail_result(detail: Mapping[str, Any], status: str) -> dict[str, Any]:
    """The ``CallToolResult`` an app is given for the call its card shows, from the card's detail
    (:func:`runner.web.threads.content_detail`): text and media blocks, structured content."""
    blocks: list[dict[str, Any]] = []
    for block in detail.get("blocks", []):
        if block["type"] == "text":
            blocks.append({"type": "text", "text": block["text"]})
        elif isinstance(block.get("base64"), str):
            blocks.append({"type": block["type"], "data": block["base64"], "mimeType": block["mime_type"]})
    result: dict[str, Any] = {"content": blocks, "isError": status == "error"}
    if isinstance(detail.get("structured"), dict):
        result["structuredContent"] = detail["structured"]
    return result

