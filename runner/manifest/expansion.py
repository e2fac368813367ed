"""``${VAR}`` expansion in manifest strings, as a shell does it.

    ${NAME}                 the variable's value; unset is a problem naming it
    ${NAME:-default}        the value, or ``default`` when NAME is unset; defaults nest
                            (``${A:-${B:-x}}``) and are expanded only when used
    $${                     a literal ``${``

A ``${`` that starts none of these (``${not valid}``, a default without its closing brace) is a
problem for the whole string, which is then left as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

MAX_NESTING = 64
MALFORMED = "malformed variable reference; use ${NAME}, ${NAME:-default} or $${ for a literal '${'"
UNSET_VARIABLE = "environment variable "  # how the problem of an unset variable without a default begins

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def expand_variables(text: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """``text`` with its references expanded from ``environ``, and the problems found (messages)."""
    if "$" not in text:
        return text, []
    expansion = _Expansion(text, environ)
    try:
        value, _ = expansion.until(0, evaluate=True, depth=0)
    except _MalformedReference:
        return text, [*expansion.problems, MALFORMED]
    return value, expansion.problems


def referenced_variables(text: str) -> set[str]:
    """The names ``text`` references, defaults included (a variable that may be used at all)."""
    names = _Names()
    try:
        _Expansion(text, names).until(0, evaluate=True, depth=0)
    except _MalformedReference:
        pass  # the references read before the malformed one are named still
    return names.looked_up


@dataclass(frozen=True)
class Reference:
    """One ``${NAME}`` or ``${NAME:-default}`` of a string, as written."""

    name: str
    default: str | None  # the default as written (references in it unexpanded); None without one
    start: int  # where the reference is in the string: text[start:end]
    end: int
    nested: bool  # inside another reference's default: used only when that variable is unset


def variable_references(text: str) -> list[Reference]:
    """Every reference of ``text`` in order, nested ones included; none when ``text`` is malformed
    (it is then left as written)."""
    expansion = _Expansion(text, {})
    try:
        expansion.until(0, evaluate=False, depth=0)
    except _MalformedReference:
        return []
    return sorted(expansion.references, key=lambda reference: reference.start)


def required_variables(text: str) -> set[str]:
    """The names ``text`` cannot do without: references outside any default and without one."""
    return {ref.name for ref in variable_references(text) if ref.default is None and not ref.nested}


class _Names(Mapping[str, str]):
    """An environment where nothing is set, so every default is expanded too; it remembers the
    names looked up."""

    def __init__(self) -> None:
        self.looked_up: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.looked_up.add(name)
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


class _MalformedReference(Exception):
    """A ``${`` that does not start ``${NAME}`` or ``${NAME:-default}``."""


class _Expansion:
    def __init__(self, text: str, environ: Mapping[str, str]) -> None:
        self.text, self.environ = text, environ
        self.problems: list[str] = []
        self.references: list[Reference] = []

    def until(self, start: int, *, evaluate: bool, depth: int) -> tuple[str, int]:
        """Expand from ``start`` to the end or, inside a default (``depth`` > 0), to the default's
        closing brace, whose index is returned with the expansion.

        A default is read even when its variable is set, to find where it ends, but the variables
        in it are looked up (and reported unset) only when it is used, as in a shell.
        """
        if depth > MAX_NESTING:
            raise _MalformedReference
        text, parts, index = self.text, [], start
        while index < len(text):
            if text.startswith("$${", index):
                parts.append("${")
                index += 3
            elif text.startswith("${", index):
                value, index = self.reference(index, evaluate=evaluate, depth=depth)
                parts.append(value)
            elif depth and text[index] == "}":
                return "".join(parts), index
            else:
                parts.append(text[index])
                index += 1
        if depth:
            raise _MalformedReference  # a default without its closing brace
        return "".join(parts), index

    def reference(self, start: int, *, evaluate: bool, depth: int) -> tuple[str, int]:
        """``${NAME}`` or ``${NAME:-default}`` at ``start`` -> (its value, the index after it)."""
        match = _NAME.match(self.text, start + 2)
        if match is None:
            raise _MalformedReference
        name, index = match.group(0), match.end()
        default: str | None = None
        written: str | None = None
        if self.text.startswith(":-", index):
            use_default = evaluate and name not in self.environ
            default, end = self.until(index + 2, evaluate=use_default, depth=depth + 1)
            written, index = self.text[index + 2:end], end
        elif not self.text.startswith("}", index):
            raise _MalformedReference
        index += 1  # the closing brace
        self.references.append(Reference(name, written, start, index, nested=depth > 0))
        if not evaluate:
            return "", index
        if name in self.environ:
            return self.environ[name], index
        if default is not None:
            return default, index
        self.problems.append(f"{UNSET_VARIABLE}{name} is not set (write ${{{name}:-default}} "
                             "to give a default)")
        return "", index
