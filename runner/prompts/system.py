"""The system prompt: a Jinja2 template rendered in a sandbox, confined to the manifest's folder.

``prompts.system`` names a template file relative to the manifest's folder, or is inline text.
Templates see only ``vars``, ``servers``, ``tools``, ``now`` and ``agent``; the host environment
reaches them only through ``${VAR}`` in ``vars``, which the loader has already expanded.

:func:`compile_system_prompt` compiles the template and every template it includes, then renders
it once with sample data (no servers, no tools, the real ``vars``), so syntax errors, missing
includes, undefined names and sandbox violations are located errors at validation time.
"""

from __future__ import annotations

import errno
import os
import re
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from jinja2 import (
    BaseLoader,
    Environment,
    StrictUndefined,
    Template,
    TemplateError,
    nodes,
)
from jinja2.exceptions import TemplateNotFound, TemplateSyntaxError

from runner.errors import ManifestError, Problem
from runner.manifest import Manifest, did_you_mean
from runner.prompts.bounds import BoundedSandbox, RenderLimits

SYSTEM_PATH = "prompts.system"
INLINE_FILENAME = "<template>"  # what Jinja calls a template made from a string in tracebacks

# Errors a template can raise while rendering: Jinja's own, and what filters and operators on
# user data raise (1/0, 'a' + 1, a missing list index behind a filter, too deep recursion).
_RENDER_ERRORS = (TemplateError, ArithmeticError, LookupError, TypeError, ValueError, RuntimeError)
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where a value sits in the manifest: ``line`` is that of the text's first line (1-based)."""

    file: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class ServerSummary:
    """What a template sees of a server."""

    key: str
    status: str
    instructions: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSummary:
    """What a template sees of a tool: the generated name the model calls it by."""

    name: str
    description: str | None = None


@dataclass(frozen=True, slots=True)
class AgentSummary:
    name: str
    description: str | None = None


_SUMMARIES: dict[str, tuple[str, type]] = {
    "AgentSummary": ("'agent'", AgentSummary),
    "ServerSummary": ("a server (of 'servers')", ServerSummary),
    "ToolSummary": ("a tool (of 'tools')", ToolSummary),
}


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, else as given."""
    if path.is_absolute():
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
    return str(path)


class FolderLoader(BaseLoader):
    """Loads templates by '/'-separated names relative to one folder and never leaves it.

    Absolute names, ``..`` and symlinks whose target lies outside the folder are refused.
    ``served`` maps the file name each template was given (its display path) to the real file.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._real_root = root.resolve()
        self.served: dict[str, Path] = {}

    def locate(self, name: str) -> tuple[Path, Path]:
        """The path of ``name`` inside the folder and the real file it resolves to."""
        if not name or name.startswith(("/", "\\")) or _WINDOWS_DRIVE.match(name):
            raise TemplateNotFound(name, f"'{name}' is not a path relative to the manifest's folder")
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if ".." in parts:
            raise TemplateNotFound(name, f"'{name}' leaves the manifest's folder ('..' is refused)")
        path = self.root.joinpath(*parts)
        real = Path(os.path.realpath(path))  # unlike Path.resolve, never raises on a symlink loop
        try:
            os.stat(real)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TemplateNotFound(name, f"'{name}' is a loop of symbolic links") from None
        if not real.is_relative_to(self._real_root):
            raise TemplateNotFound(name, f"'{name}' resolves outside the manifest's folder")
        if not real.is_file():
            raise TemplateNotFound(name, f"template '{name}' not found in {display_path(self.root)}")
        return path, real

    def get_source(
        self, environment: Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        path, real = self.locate(template)
        try:
            source = real.read_text(encoding="utf-8")
            mtime = real.stat().st_mtime
        except OSError as exc:
            raise TemplateNotFound(template, f"cannot read '{template}': {exc.strerror}") from exc
        filename = display_path(path)
        self.served[filename] = real

        def uptodate() -> bool:
            try:
                return real.stat().st_mtime == mtime
            except OSError:
                return False

        return source, filename, uptodate


def sandbox(root: Path, limits: RenderLimits | None = None) -> tuple[BoundedSandbox, FolderLoader]:
    """The environment every system template runs in (within ``limits``), and its loader."""
    loader = FolderLoader(root)
    environment = BoundedSandbox(
        limits=limits or RenderLimits(),
        loader=loader,
        undefined=StrictUndefined,
        autoescape=False,  # prompts are Markdown for a model, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    return environment, loader


@dataclass(frozen=True)
class SystemTemplate:
    """A compiled system prompt; :meth:`render` gives the text for the current servers and tools."""

    template: Template
    loader: FolderLoader
    vars: dict[str, Any]
    agent: AgentSummary
    location: SourceLocation  # where inline text starts, or where the file is named

    @property
    def files(self) -> frozenset[Path]:
        """Real paths of the template files rendered so far."""
        return frozenset(self.loader.served.values())

    def render(
        self,
        servers: Sequence[ServerSummary],
        tools: Sequence[ToolSummary],
        now: datetime | None = None,
    ) -> str:
        """The prompt text; a template that fails raises :class:`ManifestError` at its line."""
        context = {
            "vars": self.vars,
            "servers": list(servers),
            "tools": list(tools),
            "now": now or datetime.now().astimezone().replace(microsecond=0),
            "agent": self.agent,
        }
        environment = self.template.environment
        if isinstance(environment, BoundedSandbox):
            environment.start()  # the limits of time, steps and text count from here
        try:
            return self.template.render(context)
        except _RENDER_ERRORS as exc:
            raise ManifestError([self._locate(exc)]) from exc

    def _locate(self, exc: BaseException) -> Problem:
        if isinstance(exc, TemplateSyntaxError):
            return _syntax_problem(exc, self.location)
        file, line = _innermost_template_frame(exc, self.loader.served)
        file = file or self.template.filename or INLINE_FILENAME  # failed before template code
        if file == INLINE_FILENAME:
            return _inline_problem(self.location, line, _message(exc))
        return Problem(file, line, _attribute_column(exc, self.loader.served.get(file), line),
                       SYSTEM_PATH, _message(exc))


def compile_system_prompt(
    manifest: Manifest, base_dir: Path, location: SourceLocation | None = None,
    *, limits: RenderLimits | None = None,
) -> SystemTemplate | None:
    """Compile ``prompts.system`` (None when the manifest has none) and check it by rendering once.

    ``base_dir`` is the manifest's folder. ``location`` is where ``prompts.system`` is written in
    the manifest: problems of inline text are reported there (template line 1 is ``location.line``),
    and so is a template file that cannot be found. ``limits`` bound each rendering (a template
    past one fails with a located error); the defaults of :class:`RenderLimits` otherwise.
    """
    text = manifest.prompts.system
    if text is None:
        return None
    location = location or SourceLocation("<manifest>", 1, 1)
    environment, loader = sandbox(base_dir, limits)
    source, filename = _main_source(manifest, loader, environment, location)
    walk = _walk_references(environment, loader, source, filename, location)
    if walk.problems:
        raise ManifestError(walk.problems) from walk.errors[0]
    try:
        if filename is None:
            template = environment.from_string(source)
        else:
            template = environment.get_template(text.strip())
    except _RENDER_ERRORS as exc:
        problem = (
            _syntax_problem(exc, location)
            if isinstance(exc, TemplateSyntaxError)
            else Problem(location.file, location.line, location.column, SYSTEM_PATH, _message(exc))
        )
        raise ManifestError([problem]) from exc
    agent = AgentSummary(name=manifest.name, description=manifest.description)
    compiled = SystemTemplate(template, loader, dict(manifest.prompts.vars), agent, location)
    compiled.render(servers=[], tools=[])  # the check: raises ManifestError located in the file
    return compiled


def template_files(manifest: Manifest, base_dir: Path) -> set[Path]:
    """Every existing file the system template uses (itself, includes, extends, imports).

    For watch mode, so it never raises: a broken template still lists the files it reaches, so
    the edit that fixes it is noticed. Names computed at render time cannot be found statically.
    """
    text = manifest.prompts.system
    if text is None:
        return set()
    environment, loader = sandbox(base_dir)
    location = SourceLocation("<manifest>", 1, 1)
    if not manifest.prompts.system_is_file:
        return _walk_references(environment, loader, text, None, location).files
    try:
        source, filename, _ = loader.get_source(environment, text.strip())
    except TemplateNotFound:
        return set()
    walk = _walk_references(environment, loader, source, filename, location)
    return {loader.served[filename], *walk.files}


def _main_source(
    manifest: Manifest, loader: FolderLoader, environment: Environment, location: SourceLocation
) -> tuple[str, str | None]:
    """The main template's source and file name (None for inline text)."""
    text = manifest.prompts.system or ""
    if not manifest.prompts.system_is_file:
        return text, None
    try:
        source, filename, _ = loader.get_source(environment, text.strip())
    except TemplateNotFound as exc:
        raise ManifestError([
            Problem(location.file, location.line, location.column, SYSTEM_PATH, _message(exc))
        ]) from exc
    return source, filename


@dataclass
class _Walk:
    files: set[Path]
    problems: list[Problem]
    errors: list[TemplateError]  # behind the problems, in the same order


def _walk_references(
    environment: Environment,
    loader: FolderLoader,
    source: str,
    filename: str | None,
    location: SourceLocation,
) -> _Walk:
    """Parse a template and everything it references by constant name, collecting problems."""
    walk = _Walk(files=set(), problems=[], errors=[])
    pending: list[tuple[str, str | None]] = [(source, filename)]
    seen: set[str] = set()
    while pending:
        text, file = pending.pop()
        try:
            tree = environment.parse(text, filename=file)
        except TemplateSyntaxError as exc:
            walk.problems.append(_syntax_problem(exc, location))
            walk.errors.append(exc)
            continue
        for name, line, required in _references(tree):
            if name in seen:
                continue
            seen.add(name)
            try:
                included, included_file, _ = loader.get_source(environment, name)
            except TemplateNotFound as exc:
                if not required:
                    continue
                where = _inline_problem(location, line, _message(exc)) if file is None else Problem(
                    file, line, 1, SYSTEM_PATH, _message(exc)
                )
                walk.problems.append(where)
                walk.errors.append(exc)
                continue
            walk.files.add(loader.served[included_file])
            pending.append((included, included_file))
    return walk


def _references(tree: nodes.Template) -> Iterator[tuple[str, int, bool]]:
    """Constant template names used by extends/include/import: (name, line, must exist).

    Like :func:`jinja2.meta.find_referenced_templates`, but keeping the line of each reference.
    Of a list of choices only one needs to exist. Names computed at render time are skipped: the
    check render loads those.
    """
    kinds = (nodes.Extends, nodes.FromImport, nodes.Import, nodes.Include)
    for node in tree.find_all(kinds):
        target = node.template  # type: ignore[attr-defined]
        if isinstance(target, nodes.Const):
            values = target.value if isinstance(target.value, list | tuple) else [target.value]
        elif isinstance(target, nodes.Tuple | nodes.List):
            values = [item.value for item in target.items if isinstance(item, nodes.Const)]
        else:
            continue
        optional = isinstance(node, nodes.Include) and node.ignore_missing
        for value in values:
            if isinstance(value, str):
                yield value, node.lineno, not optional and len(values) == 1


def _innermost_template_frame(
    exc: BaseException, served: dict[str, Path]
) -> tuple[str | None, int]:
    """File name and line of the deepest template frame of ``exc``'s traceback.

    Jinja rewrites tracebacks so template code appears as frames of the template's file name
    at the template's line.
    """
    found: tuple[str | None, int] = (None, 1)
    for frame, line in traceback.walk_tb(exc.__traceback__):
        name = frame.f_code.co_filename
        if name in served or name == INLINE_FILENAME:
            found = (name, line)
    return found


def _syntax_problem(exc: TemplateSyntaxError, location: SourceLocation) -> Problem:
    if exc.filename in (None, INLINE_FILENAME):
        return _inline_problem(location, exc.lineno, _message(exc))
    return Problem(exc.filename, exc.lineno, _syntax_column(exc), SYSTEM_PATH, _message(exc))


_UNEXPECTED = re.compile(r"(?:unexpected|got) '([^']+)'")
_TAG_OPENING = re.compile(r"\{[{%#]")


def _syntax_column(exc: TemplateSyntaxError) -> int:
    """Jinja gives no column: where the token it did not expect stands inside a tag of the line,
    else where the line's last tag opens (the one being read), else 1."""
    try:
        text = (exc.source or "").splitlines()[exc.lineno - 1]
    except IndexError:
        return 1
    openings = [match.start() for match in _TAG_OPENING.finditer(text)]
    if not openings:
        return 1
    token = _UNEXPECTED.search(exc.message or "")
    if token is not None and (at := text.find(token[1], openings[0] + 2)) != -1:
        return at + 1
    return openings[-1] + 1


def _inline_problem(location: SourceLocation, line: int, message: str) -> Problem:
    return Problem(location.file, location.line + line - 1, location.column, SYSTEM_PATH, message)


# Jinja names a missing attribute by the object's Python class: say it as the template wrote it.
_NO_ATTRIBUTE = re.compile(r"^'(?:[\w.]+\.)?(\w+) object' has no attribute '([^']*)'$")


def _attribute_column(exc: BaseException, path: Path | None, line: int) -> int:
    """Jinja gives no column: for a missing attribute, where ``.name`` is written on the line."""
    found = _NO_ATTRIBUTE.match(exc.message or "") if isinstance(exc, TemplateError) else None
    if found is None or path is None:
        return 1
    try:
        text = path.read_text(encoding="utf-8").splitlines()[line - 1]
    except (OSError, UnicodeDecodeError, IndexError):
        return 1
    at = re.search(rf"\.\s*{re.escape(found[2])}\b", text)
    return at.start() + 2 if at else 1


def _message(exc: BaseException) -> str:
    if isinstance(exc, TemplateError):
        message = exc.message or type(exc).__name__
        found = _NO_ATTRIBUTE.match(message)
        summary = _SUMMARIES.get(found[1]) if found else None
        if found is None or summary is None:
            return message
        shown, kind = summary
        attribute = found[2]
        choices = [field.name for field in fields(kind)]
        return (f"{shown} has no attribute '{attribute}'{did_you_mean(attribute, choices)}; "
                f"it has {', '.join(choices)}")
    return f"{type(exc).__name__}: {exc}"


__all__ = [
    "AgentSummary",
    "FolderLoader",
    "ServerSummary",
    "SourceLocation",
    "SystemTemplate",
    "ToolSummary",
    "compile_system_prompt",
    "display_path",
    "template_files",
]
