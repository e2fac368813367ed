"""Scenarios of :func:`runner.store.thread_locks.thread_turn` on a checkpointer two savers share,
as two processes would (a SQLite file, a PostgreSQL database): each store's tests run them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from runner.errors import CheckpointerError
from runner.store.checkpointers import open_checkpointer
from runner.store.thread_locks import thread_turn

SCENARIO_LIMIT = 30.0


async def take_turns(url: str, state_dir: Path) -> None:
    """A second saver's turn on a thread waits for the first's to end; another thread does not."""
    order: list[str] = []
    async with open_checkpointer(url, state_dir=state_dir) as one, \
            open_checkpointer(url, state_dir=state_dir) as other:
        first_in = anyio.Event()
        release = anyio.Event()

        async def first() -> None:
            async with thread_turn(one, "t"):
                order.append("first in")
                first_in.set()
                await release.wait()
                order.append("first out")

        async def second() -> None:
            await first_in.wait()
            async with thread_turn(other, "t"):
                order.append("second in")

        with anyio.fail_after(SCENARIO_LIMIT):
            async with anyio.create_task_group() as group:
                group.start_soon(first)
                group.start_soon(second)
                await first_in.wait()
                async with thread_turn(other, "another thread"):  # other threads are not held up
                    order.append("another thread")
                release.set()
    assert order == ["first in", "another thread", "first out", "second in"]


async def wait_in_vain(url: str, state_dir: Path) -> None:
    """A turn waits for its busy thread at most ``wait`` seconds, then fails naming the thread;
    the thread is free again once its holder lets go."""
    async with open_checkpointer(url, state_dir=state_dir) as one, \
            open_checkpointer(url, state_dir=state_dir) as other:
        async with thread_turn(one, "busy"):
            with anyio.fail_after(SCENARIO_LIMIT), \
                    pytest.raises(CheckpointerError, match="thread busy was still in use"):
                async with thread_turn(other, "busy", wait=0.2):
                    pass
        with anyio.fail_after(SCENARIO_LIMIT):
            async with thread_turn(other, "busy", wait=SCENARIO_LIMIT):
                pass
