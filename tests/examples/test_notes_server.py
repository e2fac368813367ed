"""The bundled notes server (what the README's agent.yaml runs and serves) keeps every note when
many calls, from several processes on one notes file, write at once."""

from __future__ import annotations

import json
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

NOTES_SERVER = Path(__file__).resolve().parents[2] / "examples" / "notes_server.py"
PROCESSES = 3
CALLS_EACH = 12
WAIT = 120.0


async def test_concurrent_adds_from_several_server_processes_keep_every_note_and_a_valid_file(
    tmp_path: Path,
) -> None:
    notes_file = tmp_path / "notes.json"
    params = StdioServerParameters(
        command=sys.executable, args=[str(NOTES_SERVER)],
        env={"PATH": os.environ.get("PATH", ""), "NOTES_FILE": str(notes_file)},
    )
    failures: list[str] = []

    async def add(client: Client, title: str) -> None:
        result = await client.call_tool("add_note", {"title": title, "text": "x" * 2000})
        if result.is_error:
            failures.append(f"{title}: {result.content}")

    with anyio.fail_after(WAIT):
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(Client(params, cache=None)) for _ in range(PROCESSES)]
            async with anyio.create_task_group() as group:
                for which, client in enumerate(clients):
                    for call in range(CALLS_EACH):
                        group.start_soon(add, client, f"note {which}-{call}")
            listed = await clients[0].call_tool("list_notes", {})

    assert failures == []
    expected = {f"note {which}-{call}" for which in range(PROCESSES) for call in range(CALLS_EACH)}
    assert saved_titles(notes_file) == expected
    assert not listed.is_error and listed.structured_content is not None
    assert set(listed.structured_content["result"]) == expected


def saved_titles(notes_file: Path) -> set[str]:
    """The titles in the file, which must be valid JSON with no temporary file left beside it."""
    assert [path.name for path in notes_file.parent.iterdir() if path.suffix == ".tmp"] == []
    return {note["title"] for note in json.loads(notes_file.read_text(encoding="utf-8"))}
