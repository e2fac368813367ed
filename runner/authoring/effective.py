"""``mcp-run config``: the manifest as the runner sees it, and where every value comes from.

Each value is the manifest's own (``server`` or ``manifest``, with ``file:line:col``; a value that
came through a YAML merge key points at the anchor it came from), inherited from ``defaults``, or
``built-in``. Variables are shown by name as written (``Bearer ${GITHUB_TOKEN}``), with whether
they are set; their values are never shown, and neither are literal secrets in ``env``/``headers``.

The manifest is checked as ``validate`` checks it, and refused with the same located problems
(but for values an unset variable stands in). An agent from another file (``file:``) is shown with
what it takes from that file, and that file's servers with the others, located in that file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from runner.authoring.importing import yaml_flow, yaml_scalar
from runner.authoring.secrets import secret_env, secret_header
from runner.errors import ManifestError, Problem
from runner.manifest import FileAgentSpec, ModelAgentSpec, ServerSettings
from runner.manifest.context import WINDOW_SHARE
from runner.manifest.expansion import UNSET_VARIABLE, expand_variables, variable_references
from runner.manifest.loading import MAX_DEPTH, MAX_NODES, Path_, format_path, load_manifest, read_document
from runner.redaction import looks_like_credential, redact_urls

if TYPE_CHECKING:
    from runner.agent.checks import CheckedAgent

HIDDEN = "(hidden)"
_DURATIONS = frozenset({"timeout", "startup_timeout", "interval", "stale_after", "backoff",
                        "max_backoff", "debounce", "initial_delay", "max_delay", "max_duration"})
_SECRET_MAPS = ("env", "headers")
_CONNECTION = ("transport", "command", "args", "env", "env_passthrough", "cwd", "url", "headers")


@dataclass(frozen=True)
class Provenance:
    origin: str  # server | defaults | manifest | built-in
    at: str | None = None  # file:line:col of the value that was used
    merged: bool = False  # came into the server through a YAML merge key (<<: *anchor)
    note: str | None = None  # what a built-in value means here (context.max_tokens unset)

    def describe(self) -> str:
        text = self.origin + (" via <<" if self.merged else "")
        text = f"{text} {self.at}" if self.at else text
        return f"{text}: {self.note}" if self.note else text


@dataclass(frozen=True)
class VariableUse:
    name: str
    set: bool
    has_default: bool
    used_at: tuple[str, ...]


@dataclass
class EffectiveManifest:
    file: str
    data: dict[str, Any]  # effective values; variables as written, secrets hidden
    sources: dict[Path_, Provenance] = field(default_factory=dict)
    variables: list[VariableUse] = field(default_factory=list)

    def only_server(self, key: str) -> EffectiveManifest:
        """The same explanation restricted to one server (``key`` must be one of the servers)."""
        inside = ("servers", key)
        prefix = format_path(inside)
        return EffectiveManifest(
            self.file,
            {"servers": {key: self.data["servers"][key]}},
            {path: p for path, p in self.sources.items() if path[:2] == inside},
            [use for use in self.variables
             if any(u == prefix or u.startswith((prefix + ".", prefix + "[")) for u in use.used_at)],
        )


def effective_manifest(path: str | Path, *, environ: Mapping[str, str] | None = None) -> EffectiveManifest:
    """Load ``path`` and explain it; unset variables do not stop it (they are reported as unset)."""
    environ = os.environ if environ is None else environ
    path = Path(path)
    raw = _RawDocument(read_document(path, "the manifest").decode("utf-8", errors="replace"))
    uses: dict[str, list[str]] = {}
    required: set[str] = set()
    for where, text in raw.templates.items():
        for reference in variable_references(text):  # nested defaults' variables too
            used_at = uses.setdefault(reference.name, [])
            if format_path(where) not in used_at:
                used_at.append(format_path(where))
            if reference.default is None and not reference.nested:
                required.add(reference.name)
    # An unset variable without a default stands for itself, so the manifest still loads.
    placeholders = {name: "${" + name + "}" for name in required if name not in environ}
    unset_at = {where for name in placeholders for where in uses[name]}
    checked = _checked(path, {**placeholders, **environ}, unset_at)
    loaded = load_manifest(path, environ={**placeholders, **environ})
    data = loaded.manifest.model_dump(mode="json", by_alias=True)
    data["servers"] = {key: _connection_first(server) for key, server in data["servers"].items()}
    sources: dict[Path_, Provenance] = {}
    explained = _explain(data, (), loaded.source, raw, sources)
    if loaded.manifest.context.max_tokens is None:
        where = ("context", "max_tokens")
        sources[where] = replace(sources[where], note=_window_note(loaded.manifest.model.id))
    variables = [VariableUse(name, name in environ, name not in required, tuple(paths))
                 for name, paths in sorted(uses.items())]
    for name, spec in loaded.manifest.agents.items():
        if isinstance(spec, FileAgentSpec) and checked is not None:
            other = effective_manifest(os.path.normpath(Path(loaded.source.file).parent / spec.file),
                                       environ=environ)
            variables = _add_included(loaded.source.file, explained, sources, variables, name, other,
                                      checked)
    return EffectiveManifest(loaded.source.file, explained, sources, variables)


def _checked(path: Path, environ: Mapping[str, str], unset_at: set[str]) -> CheckedAgent | None:
    """The manifest checked as ``validate`` checks it: its problems are raised (ManifestError), but
    for unset variables (config shows them as unset; one another file uses stands for itself too)
    and the problems of values an unset variable stands in (``unset_at``). None when only such
    problems were found."""
    from runner.agent.checks import checked_agent  # Jinja, and LangChain for a provider's model id

    def placeholder(problem: Problem) -> bool:
        return problem.message.startswith(UNSET_VARIABLE) or problem.file == str(path) and any(
            problem.path == where or problem.path.startswith((f"{where}.", f"{where}["))
            for where in unset_at)

    while True:
        try:
            return checked_agent(path, environ=environ, turns=False)
        except ManifestError as exc:
            if problems := [problem for problem in exc.problems if not placeholder(problem)]:
                raise ManifestError(problems) from None
            unset = {problem.message.removeprefix(UNSET_VARIABLE).split(" ", 1)[0]
                     for problem in exc.problems if problem.message.startswith(UNSET_VARIABLE)}
            if not unset - set(environ):
                return None
            environ = {**{name: "${" + name + "}" for name in unset}, **environ}


def _add_included(file: str, data: dict[str, Any], sources: dict[Path_, Provenance],
                  variables: list[VariableUse], name: str, other: EffectiveManifest,
                  checked: CheckedAgent) -> list[VariableUse]:
    """Into the effective manifest of ``file`` (``data``, ``sources``): the agent ``name``
    (``file:``) with what it takes from its file (``other``), its description, model, prompt,
    max_steps, tools and agents; and that file's servers and agents, which join this manifest's,
    each with its place in that file. The variables of both files are returned."""
    entry: dict[str, Any] = data["agents"][name]
    at = ("agents", name)

    def take(key: str, where: Path_, *, only_written: bool = False) -> None:
        value: Any = other.data
        for part in where:
            value = value[part]
        inside = {path: source for path, source in other.sources.items() if path[:len(where)] == where}
        if only_written and all(source.origin == "built-in" for source in inside.values()):
            return  # not written there: the including manifest's applies
        entry[key] = value
        sources.update({(*at, key, *path[len(where):]): source for path, source in inside.items()})

    if sources.get((*at, "description"), Provenance("built-in")).origin == "built-in":
        take("description", ("description",))
    take("model", ("model",), only_written=True)
    take("prompt", ("prompts", "system"), only_written=True)
    take("max_steps", ("agent", "max_steps"))
    take("agents", ("agent", "agents"))
    merged = checked.loaded.manifest.agents.get(name)
    if isinstance(merged, ModelAgentSpec):  # the other file's servers this agent is given
        entry["tools"] = list(merged.tools)
        sources[(*at, "tools")] = Provenance("manifest", other.file, note="that file's servers")
    for part in ("servers", "agents"):
        for key, value in other.data.get(part, {}).items():
            if key in data[part]:
                continue  # the same definition in both files (a different one is refused)
            data[part][key] = value
            sources.pop((part,), None)  # an empty section was a value of its own
            sources.update({path: source for path, source in other.sources.items()
                            if path[:2] == (part, key)})
            if part == "servers" and value.get("transport") == "stdio" and value.get("cwd") is None:
                value["cwd"] = os.path.relpath(Path(other.file).parent, Path(file).parent)
                sources[(part, key, "cwd")] = Provenance(
                    "built-in", note=f"the folder of {other.file}, where a server it defines runs")
    known = {use.name: use for use in variables}
    for use in other.variables:  # where the other file uses it, in this view or in that file
        used_at = tuple(where if where.startswith(("servers.", "agents.")) else f"{other.file}: {where}"
                        for where in use.used_at)
        before = known.get(use.name)
        known[use.name] = replace(before, used_at=before.used_at + used_at) if before else \
            replace(use, used_at=used_at)
    return sorted(known.values(), key=lambda use: use.name)


def _window_note(model_id: str) -> str:
    """What an unset ``context.max_tokens`` means for the manifest's model."""
    from runner.models.registry import profile_window

    window = profile_window(model_id)
    if window is None:
        return f"no limit ('{model_id}' has no input window in LangChain's model profiles)"
    return (f"{int(window * WINDOW_SHARE)} tokens, {WINDOW_SHARE:.0%} of the {window}-token input "
            f"window LangChain's model profile gives '{model_id}'")


def _connection_first(server: dict[str, Any]) -> dict[str, Any]:
    """How the server is reached reads best before the settings it shares with every server."""
    first = [key for key in _CONNECTION if key in server]
    return {key: server[key] for key in first} | {k: v for k, v in server.items() if k not in first}


class _RawDocument:
    """The manifest's strings before expansion, and the paths that came through merge keys."""

    def __init__(self, text: str) -> None:
        self.templates: dict[Path_, str] = {}
        self.merged: set[Path_] = set()
        self.visited = 0
        try:
            loader = yaml.SafeLoader(text)
            try:
                node = loader.get_single_node()
                if isinstance(node, yaml.MappingNode):
                    self._walk(loader, node, (), top=True)
            finally:
                loader.dispose()
        except (yaml.YAMLError, RecursionError):
            pass  # loading the manifest reports the problem with its location

    def _walk(self, loader: yaml.SafeLoader, node: yaml.Node, path: Path_, top: bool = False) -> None:
        self.visited += 1
        if self.visited > MAX_NODES or len(path) > MAX_DEPTH:
            return  # past the loader's limits (alias bombs): loading reports it
        if isinstance(node, yaml.ScalarNode):
            if node.tag == "tag:yaml.org,2002:str" and "$" in node.value:
                self.templates[path] = node.value
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._walk(loader, item, (*path, index))
        elif isinstance(node, yaml.MappingNode):
            own = {id(key) for key, _ in node.value}
            loader.flatten_mapping(node)
            for key, value in node.value:
                name = str(key.value)
                if top and name.startswith("x-"):
                    continue
                if id(key) not in own:
                    self.merged.add((*path, name))
                self._walk(loader, value, (*path, name))


def _explain(
    value: Any, path: Path_, source: Any, raw: _RawDocument, sources: dict[Path_, Provenance]
) -> Any:
    if isinstance(value, dict) and value and not _is_secret_map(path):
        return {key: _explain(item, (*path, key), source, raw, sources) for key, item in value.items()}
    sources[path] = _provenance(path, source, raw)
    if isinstance(value, dict):
        for key in value:
            sources[(*path, key)] = _provenance((*path, key), source, raw)
        return {key: _shown((*path, key), item, raw) for key, item in value.items()}
    if isinstance(value, list):
        return [_shown((*path, index), item, raw) for index, item in enumerate(value)]
    return _shown(path, value, raw)


def _is_secret_map(path: Path_) -> bool:
    return len(path) == 3 and path[0] == "servers" and path[2] in _SECRET_MAPS


def _shown(path: Path_, value: Any, raw: _RawDocument) -> Any:
    """The value as shown: variables and ``$${`` escapes as written, literal secrets hidden."""
    template = raw.templates.get(path)
    if template is not None and "${" not in template:
        template = None  # a '$' but no reference nor escape: the effective value says it
    if len(path) == 4 and path[0] == "servers" and path[2] in _SECRET_MAPS:
        secret = secret_env if path[2] == "env" else secret_header
        references = variable_references(template) if template is not None else []
        if template is None or not references:
            return HIDDEN if secret(str(path[3]), str(value)) else (template or value)
        return _without_secret_defaults(template, references, lambda text: secret(str(path[3]), text))
    url_like = path[:1] == ("servers",) and path[2:3] in (("args",), ("url",))
    if template is not None:  # a literal password beside a reference is hidden all the same
        return redact_urls(template, mask=HIDDEN) if url_like else template
    if url_like and isinstance(value, str):
        shown = redact_urls(value, mask=HIDDEN)
        if shown != value:
            return shown
        if path[2] == "args" and looks_like_credential(value):
            return HIDDEN
    return value


def _without_secret_defaults(template: str, references: list[Any], secret: Any) -> str:
    """``template`` as written, but a default that would give a secret value reads ``…``."""
    parts, index = [], 0
    for reference in references:
        if reference.nested or reference.start < index:
            continue  # shown, or hidden, with the reference around it
        parts.append(template[index:reference.start])
        default = reference.default
        if default is not None and secret(expand_variables(default, {})[0]):
            default = "…"
        parts.append("${" + reference.name + (f":-{default}" if default is not None else "") + "}")
        index = reference.end
    return "".join(parts) + template[index:]


def _provenance(path: Path_, source: Any, raw: _RawDocument) -> Provenance:
    def at(where: Path_) -> str:
        line, column = source.values[where]
        return f"{source.file}:{line}:{column}"

    written = path if path in source.values else _spelled_as_type(path)
    if path == ("model", "id") and written not in source.values:
        written = ("model",)  # 'model: ID' is the short form of 'model: {id: ID}'

    if path[:1] == ("servers",) and len(path) >= 3:
        if written in source.values:
            merged = any(path[:end] in raw.merged for end in range(3, len(path) + 1))
            return Provenance("server", at(written), merged)
        if path[2] in ServerSettings.model_fields and path[:3] not in source.values:
            inherited = ("defaults", *path[2:])
            return Provenance("defaults", at(inherited)) if inherited in source.values else \
                Provenance("built-in")
        return Provenance("built-in")
    if written in source.values:
        return Provenance("manifest", at(written))
    return Provenance("built-in")


def _spelled_as_type(path: Path_) -> Path_:
    """'type' is the Claude Code / VS Code spelling of a server's 'transport'."""
    return (*path[:2], "type") if len(path) == 3 and path[0] == "servers" and path[2] == "transport" else path


def render_text(effective: EffectiveManifest) -> str:
    """The effective manifest as YAML, each value followed by a comment saying where it came from."""
    lines = [f"# {effective.file}: effective settings (# where each value comes from)"]
    _render(effective.data, (), 0, effective.sources, lines)
    if effective.variables:
        lines.append("# variables (values are never shown):")
        for use in effective.variables:
            state = "set" if use.set else ("unset, default used" if use.has_default else "UNSET")
            lines.append(f"#   {use.name}: {state} — {', '.join(use.used_at)}")
    return "\n".join(lines) + "\n"


def _render(value: dict[str, Any], path: Path_, depth: int, sources: dict[Path_, Provenance],
            lines: list[str]) -> None:
    pad = "  " * depth
    for key, item in value.items():
        here = (*path, key)
        if here not in sources:
            lines.append(f"{pad}{yaml_scalar(key)}:")
            _render(item, here, depth + 1, sources, lines)
            continue
        comment = f"  # {sources[here].describe()}"
        if isinstance(item, dict) and item:
            lines.append(f"{pad}{yaml_scalar(key)}:{comment}")
            lines += [f"{pad}  {yaml_scalar(k)}: {yaml_scalar(v)}"
                      + (f"  # {sources[(*here, k)].describe()}" if (*here, k) in sources else "")
                      for k, v in item.items()]
        else:
            lines.append(f"{pad}{yaml_scalar(key)}: {_display(key, item)}{comment}")


def _display(key: str, value: Any) -> str:
    if isinstance(value, list):
        return yaml_flow(value)
    if key in _DURATIONS and isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value * 1000:g}ms" if value < 1 else f"{value:g}s"
    return yaml_scalar(value)


def as_json(effective: EffectiveManifest) -> dict[str, Any]:
    return {
        "file": effective.file,
        "manifest": effective.data,
        "sources": {format_path(path): {"from": p.origin, "at": p.at, "merged": p.merged,
                                        **({"note": p.note} if p.note else {})}
                    for path, p in effective.sources.items()},
        "variables": [{"name": u.name, "set": u.set, "has_default": u.has_default,
                       "used_at": list(u.used_at)} for u in effective.variables],
    }
