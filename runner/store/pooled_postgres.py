"""``AsyncPostgresSaver`` over a connection pool (imported only when the postgres extra is there).

Each read or write takes a connection of its own from the pool, so the saver's operations need no
lock between them: the saver's own lock would put every turn of the process in one queue.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg_pool import AsyncConnectionPool


class PooledPostgresSaver(AsyncPostgresSaver):
    """The saver on ``pool``, its lock a no-op."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        super().__init__(conn=pool)
        self.lock = _NoLock()  # type: ignore[assignment]  # the saver's own, replaced as it is set up


class _NoLock:
    """The saver's lock where every operation takes a pooled connection of its own."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        return None
