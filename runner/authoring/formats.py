"""The MCP configuration files of other tools, read into one neutral shape.

    claude-desktop   claude_desktop_config.json   {"mcpServers": {name: {command, args, env}}}
    claude-code      .mcp.json                    mcpServers entries with type/url/headers; ${VAR}
    cursor           .cursor/mcp.json             mcpServers entries; envFile; ${env:VAR}
    vscode           .vscode/mcp.json             {"servers": …, "inputs": […]}; ${input:id}

The format is told from the content (``detect_format``). Each tool's variable syntax becomes the
manifest's ``${VAR}``: Claude Code already writes ``${VAR}`` and ``${VAR:-default}``, Cursor and
VS Code write ``${env:VAR}``, VS Code asks for ``${input:id}`` values (each becomes a variable), and
Claude Desktop expands nothing, so a literal ``${`` is escaped. What has no equivalent is a located
warning, never silently dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.authoring.jsonc import parse_jsonc
from runner.authoring.secrets import variable_name
from runner.errors import ManifestError, Problem
from runner.manifest.loading import Path_, SourceMap, format_path
from runner.redaction import secret_name

FORMATS = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "vscode": "VS Code",
}
SERVER_FIELDS = ("type", "command", "args", "env", "cwd", "url", "headers", "envFile", "disabled")
_NO_EQUIVALENT = {
    "autoApprove": "no equivalent: every tool may be called; use tools.approve to ask first",
    "alwaysAllow": "no equivalent: every tool may be called; use tools.approve to ask first",
    "timeout": "not imported: the unit differs between tools; set 'timeout' (e.g. 60s) by hand",
    "dev": "VS Code's development mode (watch, debug) has no equivalent; use 'mcp-run --watch'",
}
_CLAUDE_CODE_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}")
_EDITOR_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_EDITOR_HINTS = re.compile(r"\$\{(env|input|workspaceFolder|userHome|pathSeparator|/)")


@dataclass
class SourceServer:
    """One server entry as the other tool wrote it, with its strings in manifest syntax."""

    name: str
    path: Path_
    fields: dict[str, Any]
    disabled: bool = False


@dataclass
class ReadConfig:
    """What a configuration file holds: servers, variables it asks for, and warnings."""

    format: str
    file: str
    source: SourceMap
    servers: list[SourceServer] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)  # name -> why it is needed
    warnings: list[Problem] = field(default_factory=list)
    base_dir: Path = Path(".")

    def warn(self, path: Path_, message: str) -> None:
        self.warnings.append(self.source.problem(path, message))


def read_config(path: Path, *, format: str | None = None) -> ReadConfig:
    """Read the configuration at ``path``; located errors for unreadable or misshapen files."""
    display = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ManifestError([Problem(display, 1, 1, "", f"cannot read the file: {reason}")]) from exc
    document = parse_jsonc(text, file=display)
    data, source = document.data, document.source
    if not isinstance(data, dict):
        raise ManifestError([source.problem((), "expected a JSON object with 'mcpServers' or 'servers'")])
    chosen = format or detect_format(data, path.name)
    root, servers_key = _servers_location(data, chosen)
    servers = data.get(root, {}).get(servers_key) if root else data.get(servers_key)
    servers_path: Path_ = (root, servers_key) if root else (servers_key,)
    if not isinstance(servers, dict):
        raise ManifestError([source.problem(
            servers_path, f"expected '{format_path(servers_path)}' to be an object of servers "
            f"({FORMATS[chosen]} format)")])
    config = ReadConfig(chosen, display, source, base_dir=_workspace_folder(path))
    # A settings.json is mostly other settings: only keys beside the servers in its "mcp" section
    # are worth a warning; its inputs live in that section too.
    section = data[root] if root else data
    for key in section:
        if key not in (servers_key, "inputs" if chosen == "vscode" else servers_key):
            config.warn((*((root,) if root else ()), key), "not about MCP servers; left out")
    inputs_path: Path_ = (root, "inputs") if root else ("inputs",)
    inputs = _read_inputs(config, section.get("inputs", []) if chosen == "vscode" else [], inputs_path)
    for name, entry in servers.items():
        where = (*servers_path, name)
        if not isinstance(entry, dict):
            raise ManifestError([source.problem(where, "expected an object (command, args, env, …)")])
        config.servers.append(_read_server(config, name, where, entry, inputs))
    return config


def _text(value: Any) -> str:
    """A scalar as an environment value or header would carry it (JSON spelling for the rest)."""
    return value if isinstance(value, str) else "" if value is None else json.dumps(value)


# Top-level keys only Claude Desktop's configuration has, beside its servers.
_DESKTOP_KEYS = frozenset({"globalShortcut", "preferences", "isUsingBuiltInNodeForMcp"})
_FILE_NAMES = {"claude_desktop_config.json": "claude-desktop", ".mcp.json": "claude-code",
               ".claude.json": "claude-code"}


def detect_format(data: dict[str, Any], file_name: str | None = None) -> str:
    """The tool that wrote ``data``, told from its keys and variable syntax; when they cannot
    tell, from the file's name (``claude_desktop_config.json``, ``.mcp.json``)."""
    if "servers" in data or "inputs" in data or isinstance(data.get("mcp"), dict):
        return "vscode"
    entries = data.get("mcpServers")
    entries = [e for e in entries.values() if isinstance(e, dict)] if isinstance(entries, dict) else []
    text = repr(entries)
    if any("envFile" in e for e in entries) or _EDITOR_HINTS.search(text):
        return "cursor"
    if _DESKTOP_KEYS & set(data):
        return "claude-desktop"
    if file_name in _FILE_NAMES:
        return _FILE_NAMES[file_name]
    # Claude Desktop's own file gives remote servers through a program (mcp-remote); a 'type',
    # 'url' or 'headers' entry in a file of no telling name is most likely Claude Code's.
    if any("type" in e or "url" in e or "headers" in e for e in entries):
        return "claude-code"
    return "claude-desktop"


def _servers_location(data: dict[str, Any], chosen: str) -> tuple[str | None, str]:
    if chosen != "vscode":
        return None, "mcpServers"
    if "servers" not in data and isinstance(data.get("mcp"), dict):
        return "mcp", "servers"  # the "mcp" section of a VS Code settings.json
    return None, "servers"


def _workspace_folder(path: Path) -> Path:
    """``${workspaceFolder}`` of an editor config: the folder holding ``.vscode``/``.cursor``."""
    folder = path.resolve().parent
    return folder.parent if folder.name in (".vscode", ".cursor") else folder


def _read_inputs(config: ReadConfig, inputs: Any, where: Path_) -> dict[str, str]:
    """VS Code ``inputs`` (at ``where``): id -> the reference that replaces ``${input:id}``
    (``NAME:-default``)."""
    found: dict[str, str] = {}
    if not isinstance(inputs, list):
        raise ManifestError([config.source.problem(where, "expected a list of inputs")])
    for index, item in enumerate(inputs):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            config.warn((*where, index), "an input needs an 'id'; left out")
            continue
        name = variable_name(item["id"])
        default = item.get("default")
        usable = isinstance(default, str) and "}" not in default and not item.get("password")
        found[item["id"]] = f"{name}:-{default}" if usable else name
        what = "a password" if item.get("password") else "a value"
        description = f": {item['description']}" if isinstance(item.get("description"), str) else ""
        if usable:
            description += f" (default {default})"
        config.variables.setdefault(name, f"{what} VS Code asked for (input '{item['id']}'){description}")
        if item.get("type") not in ("promptString", "pickString"):
            config.warn((*where, index, "type"), "only prompted inputs have an equivalent; the "
                        "variable must be set by hand")
    return found


def _read_server(
    config: ReadConfig, name: str, where: Path_, entry: dict[str, Any], inputs: dict[str, str]
) -> SourceServer:
    fields: dict[str, Any] = {}
    for key, value in entry.items():
        path = (*where, key)
        if key not in SERVER_FIELDS:
            config.warn(path, _NO_EQUIVALENT.get(key, f"'{key}' has no equivalent in mcp-run; left out"))
            continue
        if key in ("args",) and not (isinstance(value, list) and all(isinstance(v, str | int | float)
                                                                      for v in value)):
            raise ManifestError([config.source.problem(path, "expected a list of strings")])
        if key in ("env", "headers"):
            if not isinstance(value, dict):
                raise ManifestError([config.source.problem(path, "expected an object of names and values")])
            for variable, item in value.items():
                if isinstance(item, dict | list):
                    raise ManifestError([config.source.problem((*path, variable), "expected a text value")])
            value = {variable: _text(item) for variable, item in value.items()}
        if key in ("command", "cwd", "url", "type", "envFile") and not isinstance(value, str):
            raise ManifestError([config.source.problem(path, "expected a string")])
        # An env file is read here, not by the server: its path is resolved now, not translated.
        fields[key] = value if key == "envFile" else _translate(config, value, path, inputs)
    disabled = fields.pop("disabled", False) is True
    if env_file := fields.pop("envFile", None):
        _read_env_file(config, fields, env_file, (*where, "envFile"))
    return SourceServer(name, where, fields, disabled)


def _translate(config: ReadConfig, value: Any, path: Path_, inputs: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {str(k): _translate(config, v, (*path, k), inputs) for k, v in value.items()}
    if isinstance(value, list):
        return [_translate(config, v, (*path, i), inputs) for i, v in enumerate(value)]
    if isinstance(value, bool) or value is None:
        return value
    text = value if isinstance(value, str) else str(value)
    if config.format == "claude-desktop":
        return text.replace("${", "$${")  # Claude Desktop expands nothing
    if config.format == "claude-code":
        return _claude_code_variables(config, text, path)
    return _editor_variables(config, text, path, inputs)


def _claude_code_variables(config: ReadConfig, text: str, path: Path_) -> str:
    """Claude Code's ``${VAR}`` and ``${VAR:-default}`` are the manifest's; any other '${' is escaped."""
    if "${" not in text:
        return text
    out, last = [], 0
    for match in _CLAUDE_CODE_VARIABLE.finditer(text):
        if not match.group(2):
            config.variables.setdefault(match.group(1), f"referenced at {format_path(path)}")
        out += [text[last : match.start()].replace("${", "$${"), match.group(0)]
        last = match.end()
    out.append(text[last:].replace("${", "$${"))
    return "".join(out)


def _editor_variables(config: ReadConfig, text: str, path: Path_, inputs: dict[str, str]) -> str:
    """Cursor and VS Code: ``${env:X}``, ``${input:id}``, ``${workspaceFolder}``, ``${userHome}``."""

    def replace(match: re.Match[str]) -> str:
        inner = match.group(1)
        kind, _, argument = inner.partition(":")
        if kind == "env" and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", argument):
            config.variables.setdefault(argument, f"referenced at {format_path(path)}")
            return "${" + argument + "}"
        if kind == "input" and argument:
            if argument not in inputs:
                config.warn(path, f"input '{argument}' is not declared in 'inputs'")
                inputs[argument] = variable_name(argument)
                config.variables.setdefault(inputs[argument], f"input '{argument}'")
            return "${" + inputs[argument] + "}"
        if inner == "workspaceFolder":
            config.warn(path, "${workspaceFolder} became '.', the manifest's folder: write the "
                        "manifest in the workspace folder or adjust the path")
            return "."
        if inner == "userHome":
            config.variables.setdefault("HOME", "your home folder (was ${userHome}); usually set")
            return "${HOME}"
        if inner in ("pathSeparator", "/"):
            return "/"
        config.warn(path, f"'${{{inner}}}' has no equivalent; kept as literal text")
        return "$${" + inner + "}"

    return _EDITOR_VARIABLE.sub(replace, text) if "${" in text else text


def _read_env_file(config: ReadConfig, fields: dict[str, Any], env_file: str, path: Path_) -> None:
    """Names from an env file become ``${NAME}`` references; its values are never read into text."""
    expanded = env_file.replace("${workspaceFolder}", str(config.base_dir))
    location = Path(expanded.replace("${userHome}", str(Path.home()))).expanduser()
    location = location if location.is_absolute() else config.base_dir / location
    try:
        lines = location.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        config.warn(path, f"env file '{env_file}' cannot be read; set its variables by hand")
        return
    env = fields.setdefault("env", {})
    names = []
    for line in lines:
        match = re.match(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=", line)
        if match and match.group(1) not in env:
            name = match.group(1)
            env[name] = "${" + name + "}"
            names.append(name)
            what = "a secret" if secret_name(name) else "a value"
            config.variables.setdefault(name, f"{what} from env file '{env_file}'")
    config.warn(path, "mcp-run does not read env files: its variables ("
                f"{', '.join(names) or 'none'}) became ${{NAME}} references; export them "
                "(e.g. set -a; . .env; set +a)")
