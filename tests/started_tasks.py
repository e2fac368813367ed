"""The asyncio tasks a block starts, by the name of what each runs: what a hot path should not spend."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def started_tasks() -> Iterator[list[str]]:
    """The qualified names of the coroutines of the tasks the running loop starts inside the block."""
    started: list[str] = []
    loop = asyncio.get_running_loop()

    def factory(loop: asyncio.AbstractEventLoop, coroutine: Any, **kwargs: Any) -> asyncio.Task[Any]:
        started.append(getattr(coroutine, "__qualname__", ""))
        return asyncio.Task(coroutine, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    try:
        yield started
    finally:
        loop.set_task_factory(None)
