"""Which tools and prompts a server contributes: ``only`` / ``except`` (exact names or globs), the
``filter: module:function`` hook, and reports of filter entries that match nothing (or that no
name can match: :func:`glob_defect`).

Matching is case-sensitive (MCP names are); an entry matches a name when it equals it or when it
matches it as a shell-style glob, so a literal name containing ``[`` still matches itself.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from fnmatch import fnmatchcase, translate
from pathlib import Path
from typing import Any

from runner.errors import ImportPathError
from runner.manifest import (
    IMPORT_PATH_PATTERN,
    NameFilterSpec,
    ToolFilterSpec,
    did_you_mean,
)

ProblemPath = tuple[str | int, ...]
FilterProblem = tuple[ProblemPath, str]


def entry_matches(entry: str, name: str) -> bool:
    return entry == name or fnmatchcase(name, entry)


def matches_any(name: str, entries: Iterable[str]) -> bool:
    return any(entry_matches(entry, name) for entry in entries)


def is_selected(name: str, spec: NameFilterSpec) -> bool:
    """Whether ``only`` / ``except`` of ``spec`` keep ``name``."""
    if spec.only is not None:
        return matches_any(name, spec.only)
    if spec.except_ is not None:
        return not matches_any(name, spec.except_)
    return True


def select_names(names: Iterable[str], spec: NameFilterSpec) -> list[str]:
    """The names ``spec`` keeps, in their original order."""
    return [name for name in names if is_selected(name, spec)]


def glob_defect(entry: str, kind: str = "tool") -> str | None:
    """Why ``entry`` matches no ``kind`` whatever a server offers, said after the quoted entry
    (``'x[' is a malformed glob: ...``); None for an entry that can match."""
    if not entry.strip():
        return f"is blank, so it matches no {kind}"
    start = entry.find("[")
    while start >= 0:  # where fnmatch closes each class: ']' right after '[' or '[!' is a member
        end = start + 1
        end += entry.startswith("!", end)
        end += entry.startswith("]", end)
        end = entry.find("]", end)
        if end < 0:
            return (f"is a malformed glob: its '[' is never closed, so it matches only a {kind} whose "
                    "name has a literal '['")
        start = entry.find("[", end + 1)
    if "(?!)" in translate(entry):  # fnmatch's "never matches": a class of reversed ranges ([z-a])
        return f"is a malformed glob: a [...] in it matches no character, so it matches no {kind}"
    return None


def needs_approval(name: str, spec: ToolFilterSpec) -> bool:
    return matches_any(name, spec.approve)


def _unmatched(entries: Sequence[str], names: Sequence[str], field: str, kind: str) -> list[FilterProblem]:
    problems: list[FilterProblem] = []
    for index, entry in enumerate(entries):
        if not any(entry_matches(entry, name) for name in names):
            defect = glob_defect(entry, kind)  # said as validate says it, not as a near miss
            problems.append(((field, index), f"'{entry}' {defect}" if defect else
                             f"'{entry}' matches no {kind}{did_you_mean(entry, names)}"))
    return problems


def _pins_filtered_out(spec: ToolFilterSpec, names: Sequence[str]) -> list[FilterProblem]:
    # A pin cannot offer what only / except remove: the filter wins, and the pin is likely a slip.
    problems: list[FilterProblem] = []
    for index, entry in enumerate(spec.pin):
        matched = [name for name in names if entry_matches(entry, name)]
        if matched and not any(is_selected(name, spec) for name in matched):
            field = "only" if spec.only is not None else "except"
            problems.append((("pin", index), f"'{entry}' pins only tools that tools.{field} removes"))
    return problems


def filter_problems(spec: NameFilterSpec, names: Sequence[str], *, kind: str = "tool") -> list[FilterProblem]:
    """Entries of ``spec`` that match none of ``names`` (all the server offers), with a
    "did you mean" where a name is close. Paths are relative to the filter mapping
    (``("only", 0)``, ``("rename", "get_tme")``); the caller prefixes ``servers.<key>.tools``.
    """
    problems: list[FilterProblem] = []
    if spec.only is not None:
        problems += _unmatched(spec.only, names, "only", kind)
    if spec.except_ is not None:
        problems += _unmatched(spec.except_, names, "except", kind)
    if isinstance(spec, ToolFilterSpec):
        problems += _unmatched(spec.approve, names, "approve", kind)
        problems += _unmatched(spec.pin, names, "pin", kind)
        problems += _pins_filtered_out(spec, names)
        for field, keys in (("rename", spec.rename), ("timeouts", spec.timeouts)):
            for key in keys:
                if key not in names:
                    problems.append(((field, key), f"no {kind} is called '{key}'{did_you_mean(key, names)}"))
    return problems


def load_import_path(import_path: str, *, base_dir: str | Path | None = None) -> Callable[..., Any]:
    """Import ``package.module:function`` and return the callable.

    ``base_dir`` (the manifest's folder) is put on ``sys.path`` first if it is not there yet, so
    modules next to the manifest can be named. Anything that goes wrong while importing the
    user's module becomes an :class:`ImportPathError` chained to the original exception.
    """
    if not re.match(IMPORT_PATH_PATTERN, import_path):
        raise ImportPathError(import_path, "expected 'package.module:function'")
    module_name, _, attribute = import_path.partition(":")
    if base_dir is not None and str(base_dir) not in sys.path:
        sys.path.insert(0, str(base_dir))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ImportPathError(import_path, f"no module named '{exc.name}'") from exc
    except SyntaxError as exc:  # where in the module, as Python says it: file:line:col
        where = f"{exc.filename}:{exc.lineno}:{exc.offset}" if exc.lineno else str(exc.filename)
        raise ImportPathError(import_path, f"importing '{module_name}' failed: {where}: "
                                           f"{type(exc).__name__}: {exc.msg}") from exc
    except (Exception, SystemExit) as exc:  # user code failed (or exited) while importing: located
        raise ImportPathError(import_path, f"importing '{module_name}' failed: {exc!r}") from exc
    try:
        target = getattr(module, attribute)
    except AttributeError as exc:
        public = [name for name in vars(module) if not name.startswith("_")]
        hint = did_you_mean(attribute, public)
        raise ImportPathError(import_path, f"module '{module_name}' has no '{attribute}'{hint}") from exc
    except (Exception, SystemExit) as exc:  # a module __getattr__ of the user's that failed
        raise ImportPathError(import_path, f"reading '{attribute}' failed: {exc!r}") from exc
    if not callable(target):
        raise ImportPathError(import_path, f"'{attribute}' is a {type(target).__name__}, not a function")
    return target


def apply_filter_function(
    items: Iterable[Any], function: Callable[[Any], Any], *, import_path: str
) -> list[Any]:
    """The items for which the user's filter function returns something truthy.

    The function gets each item (an ``mcp.types.Tool``) and must answer synchronously.
    """
    kept = []
    for item in items:
        try:
            verdict = function(item)
        except Exception as exc:  # the user's function failed: report which item broke it
            name = getattr(item, "name", repr(item))
            raise ImportPathError(import_path, f"raised {exc!r} for '{name}'") from exc
        if inspect.isawaitable(verdict):
            if inspect.iscoroutine(verdict):
                verdict.close()
            raise ImportPathError(import_path, "a filter must be a plain function, not async")
        if verdict:
            kept.append(item)
    return kept
