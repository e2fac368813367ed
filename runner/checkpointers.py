"""The SQLite checkpointer: LangGraph's synchronous saver, one worker-thread hop per operation.

LangGraph's ``AsyncSqliteSaver`` runs every statement, cursor and commit of an operation as its own
round trip to aiosqlite's thread: about fifty per agent turn, each a queue hand-off and a wake-up
on both sides, which cost more than the writes themselves. :class:`SqliteCheckpointer` runs each
whole operation (statement and commit: one transaction) in a worker thread instead, one at a time
and in the order they were asked for. The file format is LangGraph's own, so either saver reads
what the other wrote.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver

_Result = TypeVar("_Result")


class SqliteCheckpointer(SqliteSaver):
    """A :class:`SqliteSaver` whose async methods each take one hop to a worker thread."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self._limiter = anyio.CapacityLimiter(1)  # one operation at a time, first come first served

    @classmethod
    @contextmanager
    def open(cls, path: Path) -> Iterator[SqliteCheckpointer]:
        """A checkpointer on the database at ``path`` (created with its tables), closed after the block."""
        with closing(sqlite3.connect(str(path), check_same_thread=False)) as conn:
            # Write-ahead logging: a step's commit appends to the log instead of rewriting pages
            # through a rollback journal; NORMAL syncs when the log is checkpointed, not at every
            # commit (a power cut may lose the last steps, never corrupt the file).
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            saver = cls(conn)
            saver.setup()
            yield saver

    async def _in_thread(self, function: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
        # Not abandoned on cancellation: a write that started finishes (the caller is cancelled after).
        return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs),
                                              limiter=self._limiter)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._in_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 (LangGraph's parameter name)
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await self._in_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._in_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await self._in_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._in_thread(self.delete_thread, thread_id)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return await self._in_thread(self.get_delta_channel_history, config=config, channels=channels)
