"""JSON with comments and trailing commas (VS Code's ``.jsonc`` dialect), parsed with positions.

Python's ``json`` reports where a document breaks but not where each value sits; importing needs
both, so that a warning about ``mcpServers.github.disabled`` can say ``mcp.json:7:9``. Strict JSON
is a subset of what this reads, so one parser serves every format.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from runner.errors import ManifestError, Problem
from runner.manifest.loading import Path_, SourceMap

_WHITESPACE = re.compile(r"(?:[ \t\r\n]+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}
MAX_DEPTH = 64


@dataclass(frozen=True)
class LocatedJson:
    """A parsed document; ``source.problem(path, message)`` locates a complaint about it."""

    data: Any
    source: SourceMap


def parse_jsonc(text: str, *, file: str) -> LocatedJson:
    """Parse ``text``; a syntax error is a :class:`ManifestError` located at ``file:line:col``."""
    parser = _Parser(text, file)
    source = SourceMap(file)
    parser.skip()
    data = parser.value((), source.values)
    parser.skip()
    if parser.index != len(text):
        raise parser.error("unexpected text after the end of the document")
    return LocatedJson(data, source)


class _Parser:
    def __init__(self, text: str, file: str) -> None:
        self.text, self.file, self.index = text, file, 0

    def error(self, message: str, index: int | None = None) -> ManifestError:
        at = self.index if index is None else index
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return ManifestError([Problem(self.file, line, column, "", f"JSON syntax: {message}")])

    def skip(self) -> None:
        match = _WHITESPACE.match(self.text, self.index)
        self.index = match.end() if match else self.index
        if self.text.startswith("/*", self.index):
            raise self.error("unterminated comment")

    def position(self) -> tuple[int, int]:
        line = self.text.count("\n", 0, self.index) + 1
        return line, self.index - (self.text.rfind("\n", 0, self.index) + 1) + 1

    def value(self, path: Path_, positions: dict[Path_, tuple[int, int]]) -> Any:
        if len(path) > MAX_DEPTH:
            raise self.error(f"nested too deeply (limit {MAX_DEPTH} levels)")
        positions.setdefault(path, self.position())
        char = self.text[self.index : self.index + 1]
        if char == "{":
            return self.object(path, positions)
        if char == "[":
            return self.array(path, positions)
        if char == '"':
            return self.string()
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.index):
                self.index += len(word)
                return literal
        if match := _NUMBER.match(self.text, self.index):
            self.index = match.end()
            return json.loads(match.group(0))
        if not char:
            raise self.error("the document ends where a value was expected")
        raise self.error(f"expected a value, found {char!r}")

    def string(self) -> str:
        try:
            # Public in json.decoder (its own string scanner), but missing from typeshed.
            value, self.index = json.decoder.scanstring(self.text, self.index + 1)  # type: ignore[attr-defined]
        except json.JSONDecodeError as exc:
            raise self.error(exc.msg, exc.pos) from None
        return value

    def object(self, path: Path_, positions: dict[Path_, tuple[int, int]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        self.index += 1
        self.skip()
        while not self.text.startswith("}", self.index):
            if not self.text.startswith('"', self.index):
                raise self.error("expected a quoted key or '}'")
            key_at = self.index
            key = self.string()
            if key in result:
                raise self.error(f"duplicate key '{key}'", key_at)
            positions[(*path, key)] = self.position_of(key_at)
            self.skip()
            if not self.text.startswith(":", self.index):
                raise self.error("expected ':' after the key")
            self.index += 1
            self.skip()
            result[key] = self.value((*path, key), positions)
            if not self.separator("}"):
                break
        self.close("}")
        return result

    def array(self, path: Path_, positions: dict[Path_, tuple[int, int]]) -> list[Any]:
        result: list[Any] = []
        self.index += 1
        self.skip()
        while not self.text.startswith("]", self.index):
            result.append(self.value((*path, len(result)), positions))
            if not self.separator("]"):
                break
        self.close("]")
        return result

    def separator(self, closing: str) -> bool:
        """After an item: True when a comma follows (a trailing comma before ``closing`` is fine)."""
        self.skip()
        if self.text.startswith(",", self.index):
            self.index += 1
            self.skip()
            return True
        return False

    def close(self, closing: str) -> None:
        if not self.text.startswith(closing, self.index):
            found = self.text[self.index : self.index + 1]
            raise self.error(f"expected ',' or '{closing}'" + (f", found {found!r}" if found else
                                                                 " before the end of the document"))
        self.index += 1

    def position_of(self, index: int) -> tuple[int, int]:
        saved, self.index = self.index, index
        try:
            return self.position()
        finally:
            self.index = saved
