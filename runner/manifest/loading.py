"""Manifest file -> YAML nodes with positions -> ${ENV} expansion -> validated Manifest.

Every problem is reported with ``file:line:col`` and its dotted path, all of them at once. The
YAML is composed into nodes (not constructed directly) so that each key and value keeps its mark,
duplicate keys can be refused, and alias bombs or absurd nesting stop with a clean error.
"""

from __future__ import annotations

import copy
import os
import re
import stat
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from runner.errors import ManifestError, Problem
from runner.manifest import (
    HttpServerSpec,
    Manifest,
    StdioServerSpec,
    did_you_mean,
    reference_problems,
)
from runner.manifest.agents import AGENT_KIND_TAGS
from runner.manifest.expansion import expand_variables
from runner.manifest.servers import _transport_tag
from runner.manifest.wording import in_manifest_words

MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 100_000

Path_ = tuple[str | int, ...]

@dataclass(frozen=True)
class SourceMap:
    """Where each path of the document starts: values and (for mapping entries) keys."""

    file: str
    values: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path_, tuple[int, int]] = field(default_factory=dict)

    def problem(self, path: Path_, message: str, *, at_key: bool = False) -> Problem:
        line, column = self.locate(path, at_key=at_key)
        return Problem(self.file, line, column, format_path(path), message)

    def locate(self, path: Path_, *, at_key: bool = False) -> tuple[int, int]:
        """The position of ``path``, or of its nearest ancestor that exists in the document."""
        table = self.keys if at_key and path in self.keys else self.values
        for end in range(len(path), -1, -1):
            if path[:end] in table:
                return table[path[:end]]
            table = self.values
        return (1, 1)


@dataclass(frozen=True)
class LoadedManifest:
    """A validated manifest and where it came from."""

    manifest: Manifest
    path: Path
    source: SourceMap

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def state_dir(self) -> Path:
        return self.base_dir / ".mcp-run"


def format_path(path: Iterable[str | int], *, root: str = "") -> str:
    """``("items", 0, "name")`` -> ``items[0].name``, as in code; the empty path is ``root``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or root


def load_manifest(path: str | Path, *, environ: Mapping[str, str] | None = None) -> LoadedManifest:
    """Read, parse, expand and validate the manifest at ``path``."""
    path = Path(path)
    return parse_manifest(read_document(path, "the manifest"), file=str(path), path=path, environ=environ)


def load_manifest_partly(path: str | Path, *, environ: Mapping[str, str] | None = None
                         ) -> tuple[LoadedManifest | None, list[Problem]]:
    """:func:`load_manifest` that does not stop at the first stage that fails: every problem it
    finds, and the manifest as far as it is valid (see :func:`parse_manifest_partly`)."""
    path = Path(path)
    try:
        raw = read_document(path, "the manifest")
    except ManifestError as exc:
        return None, exc.problems
    return parse_manifest_partly(raw, file=str(path), path=path, environ=environ)


def read_document(path: Path, what: str) -> bytes:
    """The bytes of ``path``, or a ManifestError located at its start naming ``what`` it is. No
    more than the size limit and one byte is read, and only from a regular file (a symlink's
    target): ``/dev/zero`` would fill the memory, and a FIFO with no writer would wait for ever."""
    def fail(message: str) -> ManifestError:
        return ManifestError([Problem(str(path), 1, 1, "", f"cannot read {what}: {message}")])

    try:
        # Non-blocking, so that opening a FIFO returns at once (a regular file ignores the flag).
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise fail(exc.strerror or type(exc).__name__) from exc
    try:
        # Checked before os.fdopen, which refuses a folder with an IsADirectoryError of its own.
        kind = os.fstat(descriptor).st_mode
    except OSError as exc:
        os.close(descriptor)
        raise fail(exc.strerror or type(exc).__name__) from exc
    if not stat.S_ISREG(kind):
        os.close(descriptor)
        raise fail(f"it is {_file_kind(kind)}, not a regular file")
    with os.fdopen(descriptor, "rb") as document:
        try:
            raw = document.read(MAX_BYTES + 1)
        except OSError as exc:
            raise fail(exc.strerror or type(exc).__name__) from exc
    if len(raw) > MAX_BYTES:
        raise ManifestError([Problem(str(path), 1, 1, "", f"{what} is larger than the limit of "
                                                           f"{MAX_BYTES:,} bytes")])
    return raw


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a file")


def parse_manifest(
    raw: bytes | str,
    *,
    file: str = "agent.yaml",
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> LoadedManifest:
    """Validate manifest text; ``environ`` (default ``os.environ``) feeds ``${VAR}`` expansion."""
    loaded, problems = parse_manifest_partly(raw, file=file, path=path, environ=environ)
    if problems or loaded is None:
        raise ManifestError(problems)
    return loaded


def parse_manifest_partly(
    raw: bytes | str,
    *,
    file: str = "agent.yaml",
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[LoadedManifest | None, list[Problem]]:
    """Every problem of the manifest text, and the manifest as far as it is valid, so that the
    checks which follow can run on the valid parts in the same run: a server or agent whose own
    entry is invalid is left out (what names it is not checked against it), another invalid
    value is left out (its default applies), an invalid list is left out whole. None when the
    text cannot be read as a manifest at all, or what is left is still invalid."""
    source = SourceMap(file)
    problems: list[Problem] = []
    try:
        data = _read_document(raw, source, os.environ if environ is None else environ, problems)
    except ManifestError as exc:
        return None, exc.problems
    unchecked: dict[str, set[str]] = {"servers": set(), "agents": set()}
    try:
        manifest: Manifest | None = Manifest.model_validate(data, context={"defer_references": True})
    except ValidationError as exc:
        # A value already reported (say, an unset variable) is not reported again as invalid.
        reported = {p.path for p in problems}
        located = [problem for error in exc.errors() for problem in (
            _located(error, data, source), *_kindless_server_problems(error, data, source))]
        problems += [p for p in located if p.path not in reported]
        manifest = _valid_part(data, exc, unchecked)
    resolved = (path or Path(file)).resolve()
    if manifest is None:
        return None, problems
    cross_checks = reference_problems(manifest, unchecked_servers=unchecked["servers"],
                                      unchecked_agents=unchecked["agents"])
    cross_checks += folder_problems(manifest, resolved.parent)
    problems += [source.problem(where, message) for where, message in cross_checks]
    return LoadedManifest(manifest, resolved, source), problems


_STAND_INS = {"version": 1, "name": "manifest"}  # required keys: a stand-in keeps the rest checkable
_SALVAGE_ROUNDS = 8


def _valid_part(data: dict[str, Any], error: ValidationError, unchecked: dict[str, set[str]]
                ) -> Manifest | None:
    """The manifest of ``data`` without the parts ``error`` (and the validations that follow) find
    invalid; the servers and agents left out are added to ``unchecked``."""
    data = copy.deepcopy(data)
    errors = error.errors()
    for _ in range(_SALVAGE_ROUNDS):
        # Outer parts first: a part inside one already left out is gone with it.
        removed: list[Path_] = []
        for path in sorted({_document_path(details["loc"], data)[0] for details in errors}, key=len):
            if any(path[:len(gone)] == gone for gone in removed):
                continue
            gone = _leave_out(data, path, unchecked)
            if gone is None:
                return None
            removed.append(gone)
        try:
            return Manifest.model_validate(data, context={"defer_references": True})
        except ValidationError as exc:
            errors = exc.errors()
    return None


def _leave_out(data: dict[str, Any], path: Path_, unchecked: dict[str, set[str]]) -> Path_ | None:
    """Take the invalid part at ``path`` out of ``data``: the path of what was taken out, or None
    when nothing sensible can be."""
    if not path:
        return None  # the whole document: nothing is left to check
    head, section = str(path[0]), data.get(str(path[0]))
    if head in unchecked and len(path) >= 2 and isinstance(section, dict) and path[1] in section:
        del section[path[1]]
        unchecked[head].add(str(path[1]))
        return path[:2]
    # The longest part of the path that leads through mappings to a key that is there: a value
    # left out (its default applies; a missing required key leaves its parent out next round),
    # or the list holding an invalid item (leaving out one item would move the others' places).
    end, cursor = 1, section
    while end < len(path) and isinstance(cursor, dict) and isinstance(path[end], str) \
            and path[end] in cursor:
        cursor, end = cursor[path[end]], end + 1
    if end == 1:
        if head in _STAND_INS:
            data[head] = _STAND_INS[head]
        else:
            data.pop(head, None)
        return path[:1]
    parent: Any = data
    for part in path[:end - 1]:
        parent = parent[part]
    del parent[path[end - 1]]
    return path[:end]


def folder_problems(manifest: Manifest, base_dir: Path) -> list[tuple[Path_, str]]:
    """Working directories, sandbox writable paths and container mounts that do not exist: no server
    could start with them."""
    problems: list[tuple[Path_, str]] = []
    for key, spec in sorted(manifest.servers.items()):
        if isinstance(spec, StdioServerSpec) and spec.cwd is not None:
            folder = base_dir / spec.cwd
            if not folder.is_dir():
                what = "is not a folder" if folder.exists() else "does not exist"
                relative = "" if Path(spec.cwd).is_absolute() else " (relative to the manifest's folder)"
                problems.append((("servers", key, "cwd"), f"working directory '{spec.cwd}' {what}{relative}"))
        if isinstance(spec, StdioServerSpec) and spec.sandbox is not None:
            for index, entry in enumerate(spec.sandbox.writable):
                if not (base_dir / entry).exists():
                    problems.append((("servers", key, "sandbox", "writable", index),
                                     f"'{entry}' does not exist (relative to the manifest's folder)"))
        if isinstance(spec, StdioServerSpec) and spec.container is not None:
            for index, mount in enumerate(spec.container.mounts):
                if not (base_dir / mount.source).exists():
                    problems.append((("servers", key, "container", "mounts", index),
                                     f"'{mount.source}' does not exist (relative to the manifest's folder)"))
    return problems


def _read_document(
    raw: bytes | str, source: SourceMap, environ: Mapping[str, str], problems: list[Problem]
) -> Any:
    def fail(message: str, line: int = 1, column: int = 1) -> ManifestError:
        return ManifestError([Problem(source.file, line, column, "", message)])

    if len(raw) > MAX_BYTES:
        raise fail(f"the manifest is {len(raw):,} bytes; the limit is {MAX_BYTES:,}")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise fail(f"the manifest is not UTF-8 text (byte {exc.start})") from None
    if "\x00" in raw:
        raise fail("the manifest contains NUL bytes; is it a binary file?")
    try:
        loader = yaml.SafeLoader(raw)
    except yaml.reader.ReaderError as exc:
        line = raw.count("\n", 0, exc.position) + 1
        column = exc.position - (raw.rfind("\n", 0, exc.position) + 1) + 1
        raise fail(f"character #x{exc.character:04x} is not allowed in YAML", line, column) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise fail("the manifest is empty; it needs at least 'version: 1' and 'name'")
        data = _Converter(loader, source, environ, problems).convert(node, ())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise fail(f"YAML syntax: {exc.problem or exc.context}", line, column) from None
    except yaml.YAMLError as exc:
        raise fail(f"YAML syntax: {exc}") from None
    except RecursionError:
        raise fail(f"the manifest is nested too deeply (limit {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise fail(f"the manifest must be a mapping of keys (version, name, servers, …), not {kind}",
                   node.start_mark.line + 1, node.start_mark.column + 1)
    # Top-level 'x-…' keys hold YAML anchors for reuse, as in compose files; they mean nothing.
    return {key: value for key, value in data.items() if not key.startswith("x-")}


class _Converter:
    """YAML nodes -> plain data, recording marks, expanding ${VAR}, refusing duplicate keys."""

    def __init__(
        self, loader: yaml.SafeLoader, source: SourceMap, environ: Mapping[str, str],
        problems: list[Problem],
    ) -> None:
        self.loader, self.source, self.environ, self.problems = loader, source, environ, problems
        self.visited = 0

    def convert(self, node: yaml.Node, path: Path_) -> Any:
        self.visited += 1
        mark = (node.start_mark.line + 1, node.start_mark.column + 1)
        if self.visited > MAX_NODES:
            raise ManifestError([Problem(self.source.file, *mark, format_path(path),
                                         f"the manifest has more than {MAX_NODES:,} values "
                                         "(aliases included)")])
        if len(path) > MAX_DEPTH:
            raise ManifestError([Problem(self.source.file, *mark, format_path(path),
                                         f"nested too deeply (limit {MAX_DEPTH} levels)")])
        self.source.values.setdefault(path, mark)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, (*path, i)) for i, item in enumerate(node.value)]
        try:
            value = self.loader.construct_object(node, deep=True)
        except ValueError:  # Python refuses to read it: an integer past its digit limit, 2024-13-45
            return self._unreadable(node, path, mark)
        if isinstance(value, str):
            return self._expand(value, path, mark)
        if isinstance(value, bytes | set) or not isinstance(value, str | int | float | bool | type(None)):
            # Dates, binary and sets have no meaning in a manifest; keep them as text.
            return str(node.value)
        return value

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        self.loader.flatten_mapping(node)  # applies YAML merge keys (<<)
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_mark = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(Problem(self.source.file, *key_mark, format_path(path),
                                             "a key must be plain text, not a list or mapping"))
                continue
            try:
                key = self.loader.construct_object(key_node)
            except ValueError:  # a key is text anyway
                key = None
            key = key if isinstance(key, str) else str(key_node.value)
            if key in result:
                first = self.source.keys[(*path, key)]
                self.problems.append(Problem(
                    self.source.file, *key_mark, format_path((*path, key)),
                    f"duplicate key '{key}' (first defined at line {first[0]})",
                ))
                continue
            self.source.keys[(*path, key)] = key_mark
            result[key] = self.convert(value_node, (*path, key))
        return result

    def _unreadable(self, node: yaml.Node, path: Path_, mark: tuple[int, int]) -> str:
        """A scalar Python cannot construct: an integer of too many digits is a problem (reading
        it would take quadratic time); a date that does not exist is kept as text, like dates."""
        if node.tag == "tag:yaml.org,2002:int":
            digits = sum(character.isdigit() for character in node.value)
            self.problems.append(Problem(self.source.file, *mark, format_path(path),
                                         f"an integer of {digits:,} digits is past the limit of "
                                         f"{sys.get_int_max_str_digits():,} digits"))
        return str(node.value)

    def _expand(self, text: str, path: Path_, mark: tuple[int, int]) -> str:
        value, problems = expand_variables(text, self.environ)
        self.problems += [Problem(self.source.file, *mark, format_path(path), message)
                          for message in problems]
        return value


def _located(
    error: ErrorDetails, data: Any, source: SourceMap, root: type[BaseModel] = Manifest
) -> Problem:
    """A pydantic error -> a Problem at the right place with a message for people."""
    path, missing = _document_path(error["loc"], data)
    kind, message = error["type"], error["msg"]
    context = error.get("ctx") or {}
    if kind == "extra_forbidden":
        hint = did_you_mean(str(path[-1]), _allowed_keys(path[:-1], data, root))
        if not hint and root is Manifest and path[:-1] == ("model",):
            hint = " (settings for the model itself go under 'params')"
        if not hint and root is Manifest and len(path) == 3 and path[0] == "servers":
            hint = _http_only_key(str(path[-1]))
        return source.problem(path, f"unknown key '{path[-1]}'{hint}", at_key=True)
    if kind == "missing":
        return source.problem(path, "missing required key")
    message = in_manifest_words(kind, message, context)
    if kind == "literal_error" and isinstance(error.get("input"), str):
        choices = re.findall(r"'([^']*)'", str(context.get("expected", "")))
        message += did_you_mean(error["input"], choices)
    if kind == "string_pattern_mismatch" and missing:  # a mapping key that failed its pattern
        return source.problem(path, f"'{path[-1]}': {message}", at_key=True)
    return source.problem(path, message)


def _http_only_key(key: str) -> str:
    """The hint for a key of http/sse servers found on a stdio server (say 'auth')."""
    http_only = set(HttpServerSpec.model_fields) - set(StdioServerSpec.model_fields)
    return f" ('{key}' is for http/sse servers)" if key in http_only else ""


def _kindless_server_problems(error: ErrorDetails, data: Any, source: SourceMap) -> list[Problem]:
    """For a server that is neither stdio nor http: its unknown keys (a typo such as 'comand' is
    why it has no 'command', so it is named next to the missing key), and what is wrong with its
    other values, checked as the kind of server it comes closest to (http when it has a key only
    http servers have, else stdio)."""
    if error["type"] != "server_kind":
        return []
    path, _ = _document_path(error["loc"], data)
    server = data.get("servers", {}).get(path[-1]) if len(path) == 2 else None
    if not isinstance(server, dict):
        return []
    keys = {model: {info.alias or name for name, info in model.model_fields.items()}
            for model in (StdioServerSpec, HttpServerSpec)}
    known = {"type"} | keys[StdioServerSpec] | keys[HttpServerSpec]
    problems = [
        source.problem((*path, key), f"unknown key '{key}'{did_you_mean(key, known)}", at_key=True)
        for key in server if key not in known
    ]
    http = any(key in keys[HttpServerSpec] - keys[StdioServerSpec] for key in server)
    model = HttpServerSpec if http else StdioServerSpec
    stand_in = {"url": "http://127.0.0.1"} if http else {"command": "true"}  # the missing key
    rest = {key: value for key, value in server.items() if key in keys[model] and key != "transport"}
    try:
        model.model_validate({**rest, **stand_in}, context={"defer_references": True})
    except ValidationError as exc:
        problems += [_located({**inner, "loc": (*path, *inner["loc"])}, data, source)
                     for inner in exc.errors()]
    return problems


def _document_path(loc: tuple[str | int, ...], data: Any) -> tuple[Path_, bool]:
    """Strip pydantic's union tags and '[key]' markers so the path matches the document."""
    path: list[str | int] = []
    cursor: Any = data
    key_error = False
    for index, part in enumerate(loc):
        if part == "[key]":
            key_error = True
            continue
        if len(path) == 2 and path[0] == "servers" and part in ("stdio", "http"):
            continue  # discriminated-union tag, not a key
        if index == 2 and loc[0] == "agents" and part in AGENT_KIND_TAGS:
            continue  # the kind of agent: a tag too
        path.append(part)
        if isinstance(cursor, dict) and part in cursor:
            cursor = cursor[part]
        elif isinstance(cursor, list) and isinstance(part, int) and part < len(cursor):
            cursor = cursor[part]
        else:
            cursor = None
    return tuple(path), key_error


def _allowed_keys(path: Path_, data: Any, root: type[BaseModel] = Manifest) -> set[str]:
    """The keys the document accepts at ``path`` (for 'did you mean')."""
    annotation: Any = root
    cursor: Any = data
    for part in path:
        cursor = cursor.get(part) if isinstance(cursor, dict) else None
        annotation = _child_type(annotation, part, cursor)
        if annotation is None:
            return set()
    models = [m for m in _flatten(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
    return {f.alias or name for m in models for name, f in m.model_fields.items()}


def _child_type(annotation: Any, part: str | int, value: Any) -> Any:
    for candidate in _flatten(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            for name, info in candidate.model_fields.items():
                if part in (name, info.alias):
                    return info.annotation
        origin = typing.get_origin(candidate)
        if origin is dict:
            value_type = typing.get_args(candidate)[1]
            if StdioServerSpec in _flatten(value_type) and isinstance(value, dict):
                tag = _transport_tag(value)
                return StdioServerSpec if tag == "stdio" else HttpServerSpec
            return value_type
        if origin is list and isinstance(part, int):
            return typing.get_args(candidate)[0]
    return None


def _flatten(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _flatten(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _flatten(arg)]
    return [annotation]


# --------------------------------------------------------------------------- other YAML documents


def read_located_yaml(
    raw: bytes | str, *, file: str, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], SourceMap, list[Problem]]:
    """Any YAML mapping read the way the manifest is: the data, where each path starts, and the
    problems found while reading (duplicate keys, unset variables). Raises ManifestError when the
    text cannot be read at all."""
    source = SourceMap(file)
    problems: list[Problem] = []
    data = _read_document(raw, source, os.environ if environ is None else environ, problems)
    return data, source, problems


def located_problems(
    exc: ValidationError, data: Any, source: SourceMap, *, root: type[BaseModel]
) -> list[Problem]:
    """The errors of validating ``data`` against ``root``, located and worded like the manifest's."""
    return [_located(error, data, source, root) for error in exc.errors()]
