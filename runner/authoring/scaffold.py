"""``mcp-run init``: the files of a starter agent folder, written all or nothing.

The starter runs as written: the ``offline`` model needs no key and no network, and with no
server it still answers (it explains itself). Servers come from ``--server NAME=COMMAND`` or from
an imported configuration; secrets of an import stay variables, as in ``mcp-run import``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from runner.authoring.importing import SCHEMA_HEADER, Imported, server_entry_text, yaml_scalar
from runner.errors import ManifestError, Problem
from runner.manifest import SERVER_KEY_PATTERN, SERVER_KEY_RULE, manifest_json_schema

STATE_FOLDER = ".mcp-run/"
MANIFEST = "agent.yaml"
SYSTEM_TEMPLATE = "prompts/system.md.j2"
SCHEMA_FILE = "agent.schema.json"

_SYSTEM_TEMPLATE_TEXT = """\
{# The system prompt, a Jinja2 template. It sees vars, servers, tools, now and agent. #}
You are {{ agent.name }}.
{% if agent.description %}{{ agent.description | trim }}
{% endif %}
The current time is {{ now.strftime("%Y-%m-%d %H:%M %Z") | trim }}.

Use the tools below when they answer better than memory can. When a tool fails, say so plainly
instead of guessing what it would have returned.

## Tools
{% for tool in tools %}
- `{{ tool.name }}`{% if tool.description %}: {{ (tool.description | trim).split("\\n") | first | truncate(160) }}{% endif %}

{% else %}
No tools are available: answer from what you know, and say which tool you would need.
{% endfor %}
"""  # noqa: E501 - written out as is: one Jinja line per tool bullet

_NO_SERVERS = """\
# servers:                           # each key is a namespace: tools become KEY__TOOL
#   files:
#     command: npx
#     args: [-y, "@modelcontextprotocol/server-filesystem", "."]
#   remote:
#     url: https://example.invalid/mcp
#     headers: {Authorization: "Bearer ${REMOTE_TOKEN}"}   # a variable, never the token itself
# Add servers: write them under 'servers:' as above, or import an MCP config (Claude Desktop,
# VS Code, Cursor, Claude Code) with `mcp-run import FILE -o agent.yaml --merge`.
"""


@dataclass(frozen=True)
class CommandServer:
    """A server given as ``NAME=COMMAND`` on the command line."""

    key: str
    command: str
    args: list[str]


def parse_server_option(option: str) -> CommandServer:
    """``notes=python notes.py`` -> key, command and args (split as a POSIX shell would)."""
    key, equals, command_line = option.partition("=")
    key = key.strip()
    if not equals or not command_line.strip():
        raise ValueError(f"'{option}': expected NAME=COMMAND, e.g. time='uvx mcp-server-time'")
    if not re.match(SERVER_KEY_PATTERN, key):
        raise ValueError(f"'{key}': {SERVER_KEY_RULE}")
    try:
        words = shlex.split(command_line)
    except ValueError as exc:
        raise ValueError(f"'{option}': {exc}") from None
    return CommandServer(key, words[0], words[1:])


def manifest_for(
    *, name: str, model: str, servers: list[CommandServer], imported: Imported | None
) -> str:
    """The starter manifest's text."""
    lines = [
        SCHEMA_HEADER,
        f"# The agent '{name}'. Run it:  mcp-run {MANIFEST}   (one turn:  mcp-run {MANIFEST} -p 'hello')",
        "# Check it:  mcp-run validate agent.yaml   See effective settings:  mcp-run config agent.yaml",
        "version: 1",
        f"name: {yaml_scalar(name)}",
        "description: A starter agent made by mcp-run init.",
    ]
    if model in ("offline", "scripted"):
        lines.append(
            f"model: {yaml_scalar(model)}"
            "    # built in, no network; e.g. openai:gpt-4.1-mini for a real model"
        )
    else:
        lines.append(f"model: {yaml_scalar(model)}    # the provider's API key comes from its usual variable")
    lines += [
        "defaults:                          # every server inherits these unless it overrides them",
        "  timeout: 30s                     # one request",
        "  startup_timeout: 20s             # start and handshake",
    ]
    body = "".join(server_entry_text(s.key, {"command": s.command, "args": s.args} if s.args
                                else {"command": s.command}, 2) for s in servers)
    body += imported.servers_text if imported else ""
    active = len(servers) + (imported.active if imported else 0)
    if active:
        lines.append("servers:                           # each key is a namespace: tools become KEY__TOOL")
        text = "\n".join(lines) + "\n" + body
    else:
        text = "\n".join(lines) + "\n" + (f"servers: {{}}\n{body}" if body else _NO_SERVERS)
    return text + (
        "prompts:\n"
        f"  system: {SYSTEM_TEMPLATE}\n"
        "agent:\n"
        "  max_steps: 10                    # model calls allowed in one turn\n"
    )


def starter_files(manifest: str) -> dict[str, str]:
    """Every file of the starter folder but ``.gitignore`` (which is added to, never replaced)."""
    return {
        MANIFEST: manifest,
        SYSTEM_TEMPLATE: _SYSTEM_TEMPLATE_TEXT,
        SCHEMA_FILE: json.dumps(manifest_json_schema(), indent=2) + "\n",
    }


def write_starter(directory: Path, files: dict[str, str], *, force: bool) -> list[str]:
    """Write ``files`` under ``directory``; refuse (writing nothing) if one exists unless ``force``."""
    existing = [relative for relative in files if (directory / relative).exists()]
    if existing and not force:
        raise ManifestError([
            Problem(str(directory / relative), 1, 1, "", "already exists; --force replaces it")
            for relative in existing
        ])
    written = []
    for relative, text in files.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(relative)
    ignore = directory / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    if STATE_FOLDER not in lines and STATE_FOLDER.rstrip("/") not in lines:
        prefix = "\n" if lines and not ignore.read_text(encoding="utf-8").endswith("\n") else ""
        with ignore.open("a", encoding="utf-8") as stream:
            stream.write(f"{prefix}# mcp-run's state: conversations, server logs\n{STATE_FOLDER}\n")
        written.append(".gitignore")
    return written


def command_servers(options: tuple[str, ...]) -> list[CommandServer]:
    servers = [parse_server_option(option) for option in options]
    keys = [server.key for server in servers]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise ValueError(f"server given more than once: {', '.join(duplicates)}")
    return servers
