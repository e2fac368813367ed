"""A small notes MCP server bundled with mcp-run, used by the bundled agent.yaml.

Notes live in a JSON file (NOTES_FILE, default ./notes.json) so they survive restarts. It offers
tools to add, list, search and delete notes, a calculator, and a prompt that summarises the notes.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import json
import operator
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

server = MCPServer(
    "notes",
    instructions="Keeps short notes for the user. Search before adding duplicates.",
)
NOTES_FILE = Path(os.environ.get("NOTES_FILE", "notes.json"))


@contextlib.contextmanager
def _locked(exclusive: bool) -> Iterator[None]:
    """The notes file's lock: calls run in worker threads, and several served sessions may each
    start this server on one file, so every read-modify-write holds it (flock: threads and
    processes alike, released if the process dies)."""
    NOTES_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(NOTES_FILE.with_name(NOTES_FILE.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield  # closing the file releases the lock


def _read() -> list[dict[str, str]]:
    if not NOTES_FILE.exists():
        return []
    return json.loads(NOTES_FILE.read_text(encoding="utf-8"))


def _read_locked() -> list[dict[str, str]]:
    with _locked(exclusive=False):
        return _read()


def _write(notes: list[dict[str, str]]) -> None:
    """Replace the file at once (a crash never leaves half a file) from a temporary file of this
    write's own, so that no two writers share one; the caller holds the exclusive lock."""
    descriptor, temporary = tempfile.mkstemp(dir=NOTES_FILE.parent, prefix=NOTES_FILE.name, suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(notes, file, indent=2)
        os.replace(temporary, NOTES_FILE)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


@server.tool()
def add_note(
    title: Annotated[str, Field(min_length=1, max_length=200, description="Short title")],
    text: Annotated[str, Field(description="The note itself")] = "",
) -> str:
    """Add a note and return its title."""
    with _locked(exclusive=True):
        notes = [note for note in _read() if note["title"] != title]
        notes.append({"title": title, "text": text})
        _write(notes)
    return f"saved note '{title}' ({len(notes)} notes in all)"


@server.tool()
def list_notes() -> list[str]:
    """List the titles of all notes."""
    return [note["title"] for note in _read_locked()]


@server.tool()
def search_notes(query: Annotated[str, Field(min_length=1)]) -> list[dict[str, str]]:
    """Notes whose title or text contains the query (case-insensitive)."""
    needle = query.lower()
    return [n for n in _read_locked() if needle in n["title"].lower() or needle in n["text"].lower()]


@server.tool()
def delete_note(title: str) -> str:
    """Delete the note with this title."""
    with _locked(exclusive=True):
        notes = _read()
        kept = [note for note in notes if note["title"] != title]
        if len(kept) == len(notes):
            raise ToolError(f"no note titled '{title}'")
        _write(kept)
    return f"deleted note '{title}'"


_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod,
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.FloorDiv: operator.floordiv,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        if isinstance(node.op, ast.Pow) and abs(_evaluate(node.right)) > 100:
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / // % ** are allowed")


@server.tool()
def calculate(expression: Annotated[str, Field(max_length=200, examples=["2 * (3 + 4)"])]) -> float:
    """Evaluate an arithmetic expression."""
    try:
        return _evaluate(ast.parse(expression, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from exc


@server.prompt()
def summarise(style: str = "bullet points") -> str:
    """Ask the assistant to summarise every note."""
    notes = "\n".join(f"- {n['title']}: {n['text']}" for n in _read_locked()) or "(no notes yet)"
    return f"Summarise these notes as {style}:\n{notes}"


if __name__ == "__main__":
    server.run()
