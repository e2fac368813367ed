"""Row 9: a long conversation on the default checkpointer (SQLite in the state folder).

One thread of ``long_thread_turns`` turns (1,000 in a full run), each a 1 kB user message and the
scripted model's short answer, run through ``stream_turn`` as the chat and ``-p`` run them; a new
thread each round, in the same database. Storage is the database's size with its write-ahead log
folded in (``wal_checkpoint(TRUNCATE)``) before the thread, halfway and at the end: in proportion
to the thread's length, the second half of the turns adds about what the first half did (kept whole,
each checkpoint repeating the conversation so far, it would add three times as much). Time per
turn is reported for the first and the last tenth of the turns: each turn still reads and writes
the thread's whole state (LangGraph's checkpoints hold the full message list), so it grows with
the thread's length.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import yaml

from bench.agent import write_manifest
from bench.harness import BenchError, Case, Goal, Settings
from bench.stats import Metrics, elapsed_ms
from runner.agent.runtime import Runtime, load_agent
from runner.agent.turns import stream_turn

LONG_ROW = "9. long thread: storage and time per turn"
LONG_PATH = "mcp-run, default SQLite checkpointer"
MESSAGE = "x" * 1000
GROWTH_GOAL = Goal("a long thread's second half of turns adds <= 1.5× the storage of its first half", 1.5,
                   metric="storage_growth")


@asynccontextmanager
async def long_thread_suite(settings: Settings, folder: Path) -> AsyncIterator[list[Case]]:
    home = folder / "long-thread"
    home.mkdir()
    turns = settings.long_thread_turns
    (home / "script.yaml").write_text(yaml.safe_dump(["done"] * (turns * settings.rounds + 1)))
    path = write_manifest(home, {}, model={"id": "scripted", "script": "script.yaml"})
    async with AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(load_agent(path))
        database = runtime.fleet.state_dir / "state.sqlite"
        yield [Case(LONG_ROW, LONG_PATH, lambda: long_thread(runtime, database, turns), "kb_per_turn",
                    goals=(GROWTH_GOAL,))]


async def long_thread(runtime: Runtime, database: Path, turns: int) -> Metrics:
    """``turns`` turns on a new thread; storage at its start, halfway and end; time per turn."""
    thread = uuid.uuid4().hex
    sizes = [await anyio.to_thread.run_sync(stored_bytes, database)]
    times: list[float] = []
    for turn in range(turns):
        started = time.perf_counter()
        answers = [event async for event in stream_turn(runtime, MESSAGE, thread_id=thread)
                   if event["type"] == "final"]
        times.append(elapsed_ms(started))
        if len(answers) != 1:
            raise BenchError(f"turn {turn + 1} of the long thread gave no answer")
        if turn + 1 == turns // 2:
            sizes.append(await anyio.to_thread.run_sync(stored_bytes, database))
    sizes.append(await anyio.to_thread.run_sync(stored_bytes, database))
    first_half, second_half = sizes[1] - sizes[0], sizes[2] - sizes[1]
    tenth = max(turns // 10, 1)
    return {"kb_per_turn": (sizes[2] - sizes[0]) / turns / 1024, "turns": turns,
            "storage_growth": second_half / max(first_half, 1),
            "first_ms": sum(times[:tenth]) / tenth, "last_ms": sum(times[-tenth:]) / tenth}


def stored_bytes(database: Path) -> int:
    """The database's size, its write-ahead log folded in first."""
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(path.stat().st_size for path in database.parent.glob(database.name + "*")
               if path.is_file())

