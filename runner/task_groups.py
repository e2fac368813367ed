"""Task groups whose block's own exception leaves as it is, not inside an exception group.

An anyio task group wraps an exception raised by its block in a ``BaseExceptionGroup``, so a
caller of ``load_agent`` or ``open_fleet`` would have to unwrap a ``ManifestError`` or a
``KeyboardInterrupt`` it raised itself. :func:`background_tasks` catches the block's exception,
stops the tasks and raises it again outside the group. Cancellation is never caught: the group's
own ends at the group, anyone else's passes through it unwrapped, as anyio does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup


@asynccontextmanager
async def background_tasks() -> AsyncIterator[TaskGroup]:
    """A task group for tasks that serve the block: they are cancelled when the block ends, and
    the block's exception is raised, unwrapped, once they have stopped. A task's own failure is
    still the task group's (an exception group), as in anyio."""
    error: BaseException | None = None
    async with anyio.create_task_group() as group:
        try:
            yield group
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # raised again below, outside the group
            error = exc
        finally:
            group.cancel_scope.cancel()
    if error is not None:
        raise error
