"""Servers with many tools that read like real ones: each is one domain (``billing``, ``calendar``,
...) with ``count`` tools named ``<verb>_<thing>`` and described in words, for tool search.

The ``payments`` domain also has ``convert_currency`` (the one tool that converts money between
currencies), which answers with the converted amount. Tools are listed from prebuilt definitions
(registering thousands of functions one by one takes seconds).

    python tests/mcp_servers/toolbox.py --transport http --port 8000      # one domain, 500 tools
    wide_app(servers=20, tools=500)          # 20 domains on one ASGI app: /s00/mcp ... /s19/mcp
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `servers` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from starlette.types import ASGIApp

DOMAINS = (
    "billing", "calendar", "crm", "docs", "email", "files", "git", "hr", "inventory", "logs",
    "maps", "metrics", "notes", "payments", "search", "shipping", "support", "tasks", "travel",
    "weather",
)
VERBS = ("get", "list", "create", "update", "delete", "archive", "export", "restore", "tag", "share")
THINGS = (
    "account", "address", "alert", "attachment", "audit", "batch", "budget", "category", "channel",
    "comment", "contact", "contract", "dashboard", "device", "draft", "entry", "event", "feed",
    "folder", "group", "invoice", "item", "job", "label", "layout", "ledger", "license", "member",
    "message", "milestone", "note", "order", "owner", "page", "permission", "policy", "project",
    "queue", "record", "region", "report", "role", "rule", "schedule", "snapshot", "team",
    "template", "ticket", "token", "webhook",
)
PHRASES = {
    "get": "Fetch one {domain} {thing} by its id.",
    "list": "List the {domain} {thing}s, newest first, one page at a time.",
    "create": "Create a new {domain} {thing} from the given fields.",
    "update": "Change fields of an existing {domain} {thing}.",
    "delete": "Remove a {domain} {thing} for good.",
    "archive": "Move a {domain} {thing} to the archive, where it can be restored later.",
    "export": "Write the {domain} {thing}s out as a CSV file.",
    "restore": "Bring an archived {domain} {thing} back.",
    "tag": "Attach a label to a {domain} {thing} so it can be grouped.",
    "share": "Give another person access to a {domain} {thing}.",
}
NEEDLE = "convert_currency"
NEEDLE_DOMAIN = "payments"
RATES = {"EUR": 1.0, "USD": 1.25, "GBP": 0.85, "JPY": 160.0}


def tool_names(count: int) -> list[str]:
    """The first ``count`` generated names (at most verbs x things, 500)."""
    names = [f"{verb}_{thing}" for thing in THINGS for verb in VERBS]
    if count > len(names):
        raise ValueError(f"at most {len(names)} tools per domain")
    return names[:count]


def definitions(domain: str, count: int) -> list[types.Tool]:
    tools = []
    for name in tool_names(count):
        verb, thing = name.split("_", 1)
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": f"Id of the {thing}."},
                "fields": {"type": "object", "description": "Values to set, by field name."},
            },
            "required": ["id"] if verb not in ("list", "export", "create") else [],
        }
        tools.append(types.Tool(name=name, description=PHRASES[verb].format(domain=domain, thing=thing),
                                input_schema=schema))
    if domain == NEEDLE_DOMAIN:
        tools.append(types.Tool(
            name=NEEDLE,
            description="Convert an amount of money from one currency to another at today's exchange rate.",
            input_schema={
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "source": {"type": "string", "enum": sorted(RATES)},
                    "target": {"type": "string", "enum": sorted(RATES)},
                },
                "required": ["amount", "source", "target"],
            },
        ))
    return tools


class Toolbox(MCPServer):
    """One domain's tools; every call answers with its name and arguments (the needle converts)."""

    def __init__(self, domain: str, count: int) -> None:
        super().__init__(domain, log_level="WARNING")
        self._tools = definitions(domain, count)
        self._schemas = {tool.name: tool.input_schema for tool in self._tools}

    async def list_tools(self) -> list[types.Tool]:
        return list(self._tools)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        if name == NEEDLE and name in self._schemas:
            value = arguments["amount"] / RATES[arguments["source"]] * RATES[arguments["target"]]
            text = f"{arguments['amount']} {arguments['source']} = {value:.2f} {arguments['target']}"
        elif name in self._schemas:
            text = f"{self.name}.{name} {json.dumps(arguments, sort_keys=True)}"
        else:
            return await super().call_tool(name, arguments, context)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        return self._schemas.get(name) or super()._tool_input_schema(name)


def build(domain: str = NEEDLE_DOMAIN, count: int = 500) -> MCPServer:
    return Toolbox(domain, count)


def mount_path(index: int) -> str:
    return f"/s{index:02d}/mcp"


def wide_app(servers: int, tools: int, *, domains: Sequence[str] = DOMAINS) -> ASGIApp:
    """The first ``servers`` of ``domains`` on one app, each at ``mount_path(i)``."""
    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:  # the bench package lives beside runner/, not in the installed distribution
        sys.path.insert(0, root)
    from bench.server import mounted

    return mounted([
        build(domains[index], tools).streamable_http_app(streamable_http_path=mount_path(index))
        for index in range(servers)
    ])


if __name__ == "__main__":
    from mcp_servers._serve import main

    main(build)
