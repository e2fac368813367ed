"""Another tool's MCP configuration -> manifest text, with the report a person needs.

The result is YAML text written here (not dumped from data) so it can carry comments and be
appended to an existing manifest without touching a byte of it (:func:`merge_into`). Secrets in
``env``, ``headers``, arguments and URLs are replaced by ``${VAR}`` references; the values stay in
memory only to tell two equal secrets from two different ones.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.authoring.formats import FORMATS, ReadConfig, SourceServer, read_config
from runner.authoring.secrets import secret_env, secret_header, variable_name
from runner.errors import ManifestError, Problem
from runner.manifest import ENV_NAME_PATTERN
from runner.manifest.expansion import required_variables as expansion_required
from runner.manifest.expansion import variable_references
from runner.manifest.loading import LoadedManifest, parse_manifest
from runner.redaction import AUTH_SCHEME, URL_PASSWORD, looks_like_credential, secret_name

SCHEMA_HEADER = "# yaml-language-server: $schema=agent.schema.json"
KEY_LENGTH = 32


@dataclass
class Imported:
    """The servers of one configuration as manifest text, and what the person must know."""

    format: str
    servers_text: str  # server entries, indented for a place under 'servers:'
    keys: dict[str, str]  # original name -> manifest key, for every server
    variables: dict[str, str]  # variable name -> why it must be set
    warnings: list[Problem] = field(default_factory=list)
    active: int = 0  # servers written as entries (disabled ones are written commented out)

    @property
    def renamed(self) -> dict[str, str]:
        return {name: key for name, key in self.keys.items() if name != key}


def import_config(
    path: str | Path, *, format: str | None = None, existing: ExistingServers | None = None
) -> Imported:
    """Convert the configuration at ``path``; with ``existing``, for a place in that manifest."""
    existing = existing or ExistingServers([], {})
    config = read_config(Path(path), format=format)
    keys = server_keys([server.name for server in config.servers], existing.keys)
    secrets = _Secrets(config)
    blocks, active = [], 0
    for server in config.servers:
        settings = _settings(config, server, keys[server.name], secrets)
        if settings is None:
            continue
        if (twin := existing.connections.get(connection(settings))) is not None:
            config.warn(server.path, f"already in the manifest as '{twin}': skipped")
            keys[server.name] = twin
            continue
        indent = existing.indent
        block = server_entry_text(keys[server.name], settings, indent)
        if server.disabled:
            config.warn(
                (*server.path, "disabled"), f"disabled: written commented out as '{keys[server.name]}'"
            )
            block = "".join(f"{' ' * indent}# {line[indent:]}\n" for line in block.splitlines())
        else:
            active += 1
        blocks.append(block)
    warnings = sorted(config.warnings, key=lambda p: (p.line, p.column))
    # Only the variables of the servers written now: a skipped twin's are the manifest's already.
    written = "".join(blocks)
    referenced = {ref.name for line in written.splitlines() for ref in variable_references(line)}
    variables = {name: config.variables.get(name, "referenced by an imported server")
                 for name in sorted(referenced)
                 if name in config.variables or name in required_variables(written)}
    return Imported(config.format, "".join(blocks), keys, variables, warnings, active)


def server_keys(names: Iterable[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """A valid, unique manifest key for each name (``My Server`` -> ``my-server``, then ``-2``)."""
    used = set(taken)
    keys: dict[str, str] = {}
    for name in names:
        base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        base = re.sub(r"^[^a-z]+", "", base) or "server"
        key, number = base[:KEY_LENGTH].rstrip("-"), 1
        while key in used:
            number += 1
            suffix = f"-{number}"
            key = base[: KEY_LENGTH - len(suffix)].rstrip("-") + suffix
        used.add(key)
        keys[name] = key
    return keys


def manifest_text(imported: Imported, *, name: str, source: str, model: str = "offline") -> str:
    """A whole manifest holding the imported servers."""
    lines = [
        SCHEMA_HEADER,
        f"# Imported from {source} ({FORMATS[imported.format]}) by mcp-run import. "
        "Editor help: mcp-run schema > agent.schema.json",
    ]
    if imported.variables:
        lines.append(f"# Set before running: {', '.join(sorted(imported.variables))}")
    lines += [
        "version: 1",
        f"name: {yaml_scalar(name)}",
        f"model: {yaml_scalar(model)}    # 'offline' calls tools on request; e.g. openai:gpt-4.1-mini",
        "servers:" + ("" if imported.active else " {}"),
    ]
    return "\n".join(lines) + "\n" + imported.servers_text


def merge_into(manifest: str, imported: Imported, *, file: str) -> str:
    """``manifest`` with the imported servers appended under its ``servers:``; nothing else changes."""
    located = _servers_block(manifest, file)
    if located is None:
        separator = "" if manifest.endswith("\n") or not manifest else "\n"
        opening = "servers:\n" if imported.active else "servers: {}\n"
        return manifest + separator + opening + imported.servers_text
    insert_at, node = located
    if node.flow_style and imported.active:  # 'servers: {}' becomes 'servers:' (comment kept)
        start, end = node.start_mark.index, node.end_mark.index
        manifest = manifest[:start].rstrip(" ") + manifest[end:]
    lines = manifest.splitlines(keepends=True)
    if insert_at > 0 and not lines[insert_at - 1].endswith("\n"):
        lines[insert_at - 1] += "\n"
    return "".join(lines[:insert_at]) + imported.servers_text + "".join(lines[insert_at:])


@dataclass(frozen=True)
class ExistingServers:
    """What a manifest already has under ``servers:``: keys, how each is reached, indentation."""

    keys: list[str]
    connections: dict[tuple[str, ...], str]  # connection -> key, to skip servers already there
    indent: int = 2


def existing_servers(manifest: str, *, file: str) -> ExistingServers:
    located = _servers_block(manifest, file)
    if located is None:
        return ExistingServers([], {})
    _, node = located
    keys = [key.value for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
    indent = node.value[0][0].start_mark.column if node.value else 2
    connections = _commented_out_servers(manifest)
    connections.update({connection(spec): key for key, spec in _entries_as_written(node)})
    return ExistingServers(keys, connections, indent)


def _entries_as_written(node: yaml.Node) -> list[tuple[str, dict[str, Any]]]:
    """The ``key: {settings}`` entries of a mapping node, each key as written: YAML would read
    ``on`` or ``no`` as a boolean, ``1`` as a number, and a report naming ``True`` finds nothing."""
    if not isinstance(node, yaml.MappingNode):
        return []
    entries = []
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.MappingNode):
            loader = yaml.SafeLoader("")
            try:
                entries.append((str(key.value), loader.construct_document(value)))
            finally:
                loader.dispose()
    return entries


def connection(settings: dict[str, Any]) -> tuple[str, ...]:
    """How a server is reached: its URL, or its command and arguments, as written but for the
    names of the variables its secrets became (an import numbers them by the key it gives the
    server, ``${SEARCH_2_API_KEY}`` on a second import of ``search``: the same server)."""
    if "url" in settings:
        return ("url", _SECRET_REFERENCE.sub("${}", str(settings["url"])))
    arguments = (_SECRET_REFERENCE.sub("${}", str(argument)) for argument in settings.get("args") or [])
    return ("command", str(settings.get("command")), *arguments)


_SECRET_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def _commented_out_servers(manifest: str) -> dict[tuple[str, ...], str]:
    """How the servers an import wrote commented out (disabled ones) are reached, by key: runs of
    comment lines that read, uncommented, as ``key: {command/url: …}``."""
    found: dict[tuple[str, ...], str] = {}
    runs: list[list[str]] = [[]]
    for line in manifest.splitlines():
        match = re.match(r"^(\s*)# ?(.*)$", line)
        if match is None:
            runs.append([])
        else:
            runs[-1].append(match.group(1) + match.group(2))
    for run in filter(None, runs):
        try:
            node = yaml.compose(textwrap.dedent("\n".join(run)), Loader=yaml.SafeLoader)
            entries = _entries_as_written(node) if node is not None else []
        except yaml.YAMLError:
            continue
        for key, spec in entries:
            if "command" in spec or "url" in spec:
                found[connection(spec)] = key
    return found


def validate_text(text: str, *, file: str) -> LoadedManifest:
    """Validate manifest text as the runner would; variables not set yet get a placeholder."""
    # A URL, so that 'url: ${BASE_URL}/mcp' validates too; the value is never shown.
    placeholders = {name: "http://variable.invalid" for name in required_variables(text)}
    return parse_manifest(text, file=file, environ={**placeholders, **os.environ})


def required_variables(text: str) -> list[str]:
    """Names of the ``${VAR}`` references without a default in ``text`` (line by line: one
    malformed reference hides only its own line's)."""
    return sorted({name for line in text.splitlines() for name in expansion_required(line)})


def _has_reference(value: str) -> bool:
    return bool(variable_references(value))


def _servers_block(manifest: str, file: str) -> tuple[int, yaml.MappingNode] | None:
    """(line index after the last server, the servers node), or None without a 'servers' key."""
    try:
        root = yaml.compose(manifest, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise ManifestError([Problem(file, line, column, "", f"YAML syntax: {exc}")]) from None
    if not isinstance(root, yaml.MappingNode):
        raise ManifestError([Problem(file, 1, 1, "", "the manifest must be a mapping of keys")])
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "servers":
            if isinstance(value, yaml.ScalarNode) and value.value in ("", "~", "null"):
                raise ManifestError([Problem(file, key.start_mark.line + 1, 1, "servers",
                                             "write 'servers:' with at least one entry or remove it")])
            empty_flow = isinstance(value, yaml.MappingNode) and value.flow_style and not value.value
            if not isinstance(value, yaml.MappingNode) or (value.flow_style and not empty_flow):
                line, column = value.start_mark.line + 1, value.start_mark.column + 1
                raise ManifestError([Problem(file, line, column, "servers",
                                             "can only add to 'servers' written as an indented "
                                             "block of entries")])
            return _last_line(value) + 1, value
    return None


def _last_line(node: yaml.Node) -> int:
    """The 0-based last line holding text of ``node`` (block ends point past it, scalars do not)."""
    if isinstance(node, yaml.ScalarNode) or getattr(node, "flow_style", False):
        mark = node.end_mark
        return mark.line if mark.column > 0 else mark.line - 1
    children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
    return max((_last_line(child) for child in children), default=node.start_mark.line)


class _Secrets:
    """Replaces secret values by variables: equal values share one, different ones never do."""

    def __init__(self, config: ReadConfig) -> None:
        self.config = config
        self.values: dict[str, str] = {}

    def variable(self, preferred: str, value: str, where: str) -> str:
        name, number = preferred, 1
        while name in self.values and self.values[name] != value or (
            name not in self.values and name in self.config.variables
        ):
            number += 1
            name = f"{preferred}_{number}"
        self.values[name] = value
        self.config.variables.setdefault(name, f"a secret from {where} (not copied)")
        return "${" + name + "}"


def _settings(config: ReadConfig, server: SourceServer, key: str, secrets: _Secrets) -> dict[str, Any] | None:
    fields = dict(server.fields)
    where = ".".join(map(str, server.path))
    kind = fields.pop("type", None)
    if not fields.get("command") and not fields.get("url"):
        config.warn(server.path, "neither 'command' nor 'url': left out")
        return None
    if fields.get("command") and fields.get("url"):
        config.warn(server.path, "both 'command' and 'url': left out (a server has one or the other)")
        return None
    if fields.get("url") and not re.match(r"^https?://[^\s/]+", fields["url"]) and "${" not in fields["url"]:
        config.warn((*server.path, "url"), "only http:// and https:// URLs are supported: left out")
        return None
    if kind not in (None, "stdio", "http", "sse", "streamable-http", "streamableHttp", "streamable_http"):
        config.warn((*server.path, "type"), f"unknown type '{kind}': left out")
        return None
    if "command" in fields:
        _unwrap_windows_shell(config, server, fields)
    settings: dict[str, Any] = {}
    if "url" in fields:
        settings["url"] = _secret_url(fields["url"], variable_name(key), f"{where}.url", secrets)
        if kind == "sse":
            settings["transport"] = "sse"
    else:
        settings["command"] = fields["command"]
        settings["args"] = _secret_args(fields.get("args", []), key, f"{where}.args", secrets)
    for name, value in fields.get("env", {}).items():
        if not re.match(ENV_NAME_PATTERN, name):
            config.warn((*server.path, "env", name), "not a variable name (letters, digits, '_'): left out")
            continue
        if not _has_reference(value) and secret_env(name, value):
            value = secrets.variable(variable_name(name), value, f"{where}.env.{name}")
        settings.setdefault("env", {})[name] = value
    for name, value in fields.get("headers", {}).items():
        settings.setdefault("headers", {})[name] = _secret_header(name, str(value), key, where, secrets)
    if "cwd" in fields and "url" not in fields:
        # The manifest's validation refuses a working directory that does not exist, so one that
        # does not exist beside the configuration is reported and left out, never written.
        if (config.base_dir / fields["cwd"]).is_dir():
            settings["cwd"] = fields["cwd"]
        else:
            config.warn(
                (*server.path, "cwd"), f"working directory '{fields['cwd']}' does not exist: left out"
            )
    elif "cwd" in fields:
        settings["cwd"] = fields["cwd"]
    for ignored in ("env", "cwd") if "url" in fields else ("headers",):
        if ignored in fields:
            config.warn((*server.path, ignored), f"'{ignored}' does not apply to this transport; left out")
            settings.pop(ignored, None)
    return {k: v for k, v in settings.items() if v != []}


def _unwrap_windows_shell(config: ReadConfig, server: SourceServer, fields: dict[str, Any]) -> None:
    command, args = fields["command"], list(fields.get("args", []))
    if command.lower() in ("cmd", "cmd.exe") and args and args[0].lower() == "/c" and len(args) > 1:
        program = args[1].split()[0] if args[1].split() else args[1]  # never the rest: it may hold a key
        config.warn((*server.path, "command"), f"Windows 'cmd /c' wrapper removed: runs '{program}'")
        fields["command"], fields["args"] = args[1], args[2:]
        if len(args) == 2 and " " in args[1] and '"' not in args[1]:  # cmd /c "npx -y pkg"
            fields["command"], *fields["args"] = args[1].split()
    elif re.match(r"^[A-Za-z]:\\|\\", command) or command.lower().endswith((".exe", ".cmd", ".bat")):
        config.warn((*server.path, "command"), "a Windows program path: it runs only on Windows")


def _secret_args(args: list[str], key: str, where: str, secrets: _Secrets) -> list[str]:
    result: list[str] = []
    for index, arg in enumerate(args):
        flag = args[index - 1] if index else ""
        name, equals, value = arg.partition("=")
        if _has_reference(arg):
            result.append(arg)
        elif flag.startswith("-") and "=" not in flag and secret_name(flag) and not arg.startswith("-"):
            result.append(secrets.variable(variable_name(key, flag), arg, f"{where}[{index}]"))
        elif equals and secret_name(name) and value:
            preferred = variable_name(name) if not name.startswith("-") else variable_name(key, name)
            result.append(f"{name}=" + secrets.variable(preferred, value, f"{where}[{index}]"))
        elif URL_PASSWORD.search(arg):
            result.append(_secret_url(arg, variable_name(key), f"{where}[{index}]", secrets))
        elif looks_like_credential(arg):
            result.append(secrets.variable(variable_name(key, "secret"), arg, f"{where}[{index}]"))
        else:
            result.append(arg)
    return result


def _secret_url(url: str, prefix: str, where: str, secrets: _Secrets) -> str:
    url = URL_PASSWORD.sub(
        lambda m: m.group("head") + secrets.variable(f"{prefix}_PASSWORD", m.group("password"), where), url
    )

    def query(match: re.Match[str]) -> str:
        name, value = match.group(2), match.group(3)
        if _has_reference(value) or not (secret_name(name) or looks_like_credential(value)):
            return match.group(0)
        return match.group(1) + name + "=" + secrets.variable(variable_name(prefix, name), value, where)

    return re.sub(r"([?&])([^=&#]+)=([^&#]*)", query, url)


def _secret_header(name: str, value: str, key: str, where: str, secrets: _Secrets) -> str:
    if _has_reference(value) or not secret_header(name, value):
        return value
    if "$${" in value and not (secret_name(name) or looks_like_credential(value)):
        return value  # an editor variable without equivalent, kept as text: not a credential
    scheme = AUTH_SCHEME.match(value)
    if scheme and name.lower() == "authorization":
        credential = secrets.variable(variable_name(key, "token"), scheme.group("credential"),
                                      f"{where}.headers.{name}")
        return f"{scheme.group('scheme')} {credential}"
    return secrets.variable(variable_name(key, name), value, f"{where}.headers.{name}")


def server_entry_text(key: str, settings: dict[str, Any], indent: int) -> str:
    pad = " " * indent
    lines = [f"{pad}{key}:"]
    for name, value in settings.items():
        if isinstance(value, dict):
            lines.append(f"{pad}  {name}:")
            lines += [f"{pad}    {yaml_scalar(k)}: {yaml_scalar(v)}" for k, v in value.items()]
        elif isinstance(value, list):
            lines.append(f"{pad}  {name}: {yaml_flow(value)}")
        else:
            lines.append(f"{pad}  {name}: {yaml_scalar(value)}")
    return "\n".join(lines) + "\n"


def yaml_scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def yaml_flow(values: list[Any]) -> str:
    return yaml.safe_dump(values, default_flow_style=True, width=10**9, allow_unicode=True).strip()
