"""``AsyncPostgresSaver`` over a connection pool (imported only when the postgres extra is there).

Each read or write takes a connection of its own from the pool, so the saver's operations need no
lock between them: the saver's own lock would put every turn of the process in one queue.

A thread keeps its latest checkpoint only (and the blobs of the channel versions it names): each
checkpoint's ``messages`` blob holds the whole conversation, so keeping every superseded one made
a thread's storage grow with the square of its length.

Its threads are locked (:func:`runner.store.thread_locks.thread_turn`) by PostgreSQL advisory locks,
which every instance on the database sees, held on one connection per process that does nothing
else (a turn holds its thread for its whole run: a pooled connection held that long would starve
the pool). The server releases a session's locks when its connection ends, however it ends.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import anyio
import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg_pool import AsyncConnectionPool

from runner import sdk
from runner.store.checkpointers import KEEP_LATEST, prune_strategy
from runner.store.postgres import POOL_WAIT

logger = logging.getLogger(__name__)

# The first key of the two-key advisory locks of threads (the second: hashtext(thread id)); the
# two-key space never meets the one-key lock the tables are created under.
THREAD_LOCK_CLASS = 0x6D63_7072  # "mcpr"
_OLDER = "WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s AND checkpoint_id < %(id)s"
PRUNE = (
    f"DELETE FROM checkpoints {_OLDER}",
    f"DELETE FROM checkpoint_writes {_OLDER}",
    # Versions are zero-padded counters (the saver's get_next_version): text order is their order.
    "DELETE FROM checkpoint_blobs AS blobs USING unnest(%(channels)s::text[], %(versions)s::text[]) "
    "AS kept(channel, version) WHERE blobs.thread_id = %(thread)s AND blobs.checkpoint_ns = %(ns)s "
    "AND blobs.channel = kept.channel AND blobs.version < kept.version",
)


# A run's checkpoints and their writes, deleted; the threads they were of, returned.
RUN_CHECKPOINTS = (
    "WITH gone AS (DELETE FROM checkpoints WHERE metadata->>'run_id' = ANY(%(runs)s) "
    "RETURNING thread_id, checkpoint_ns, checkpoint_id), "
    "writes AS (DELETE FROM checkpoint_writes AS w USING gone WHERE w.thread_id = gone.thread_id "
    "AND w.checkpoint_ns = gone.checkpoint_ns AND w.checkpoint_id = gone.checkpoint_id) "
    "SELECT DISTINCT thread_id, checkpoint_ns FROM gone"
)
# The blobs of one thread that none of its remaining checkpoints names.
UNNAMED_BLOBS = (
    "DELETE FROM checkpoint_blobs AS blobs WHERE blobs.thread_id = %(thread)s "
    "AND blobs.checkpoint_ns = %(ns)s AND NOT EXISTS (SELECT 1 FROM checkpoints AS kept "
    "WHERE kept.thread_id = blobs.thread_id AND kept.checkpoint_ns = blobs.checkpoint_ns "
    "AND kept.checkpoint -> 'channel_versions' ->> blobs.channel = blobs.version)"
)


class PooledPostgresSaver(AsyncPostgresSaver):
    """The saver on ``pool``, its lock a no-op; ``locks`` holds its threads' advisory locks."""

    def __init__(self, pool: AsyncConnectionPool[Any], *, locks: AdvisoryLocks) -> None:
        super().__init__(conn=pool)
        self.lock = _NoLock()  # type: ignore[assignment]  # the saver's own, replaced as it is set up
        self.locks = locks

    def thread_lock(self, thread_id: str) -> _ThreadAdvisoryLock:
        return _ThreadAdvisoryLock(self.locks, thread_id)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save ``checkpoint``, then drop the thread's older checkpoints, their writes and the
        blobs of channel versions older than those it names."""
        saved = await super().aput(config, checkpoint, metadata, new_versions)
        where = saved["configurable"]
        versions = {channel: str(version) for channel, version in checkpoint["channel_versions"].items()}
        values = {"thread": str(where["thread_id"]), "ns": where["checkpoint_ns"],
                  "id": where["checkpoint_id"],
                  "channels": list(versions), "versions": list(versions.values())}
        async with sdk.saver_cursor(self, pipeline=True) as cursor:
            for statement in PRUNE:
                await cursor.execute(statement, values)
        return saved


    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = KEEP_LATEST) -> None:
        """LangGraph's pruning, also under the name LangGraph Server gives ``delete`` (``delete_all``)."""
        deleting = prune_strategy(thread_ids, strategy)
        await super().aprune(thread_ids, strategy="delete" if deleting else KEEP_LATEST)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the runs ``run_ids`` saved (their metadata's ``run_id``), their
        writes, and the blobs no checkpoint of their threads names any longer. A thread keeps its
        latest checkpoint only, so a thread whose latest came from one of these runs is left with
        none: it starts again empty."""
        async with sdk.saver_cursor(self) as cursor:
            await cursor.execute(RUN_CHECKPOINTS, {"runs": [str(run) for run in run_ids]})
            threads = sorted({(row["thread_id"], row["checkpoint_ns"]) for row in await cursor.fetchall()})
            for thread, ns in threads:
                await cursor.execute(UNNAMED_BLOBS, {"thread": thread, "ns": ns})


class AdvisoryLocks:
    """The connection this process holds its threads' advisory locks on, opened when first needed
    and again after it broke (its locks went with it)."""

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        self._url = url
        self._settings = settings
        self._connection: psycopg.AsyncConnection[Any] | None = None
        self._opening = anyio.Lock()

    async def try_lock(self, thread_id: str) -> psycopg.AsyncConnection[Any] | None:
        """The connection holding the thread's lock, or None when another session holds it.

        A connection the server closed (it restarted) is found out by this query: it is then
        replaced and the query asked once more. The database's failures are psycopg's errors, as
        the saver's own are (:func:`runner.store.postgres.store_failures`). Once connected, not
        cancelled: a lock the server granted is always handed over."""
        connection = await self._connected()
        try:
            return await _try_lock_on(connection, thread_id)
        except psycopg.OperationalError:
            if not connection.broken:
                raise
        return await _try_lock_on(await self._connected(), thread_id)  # the old one was dropped

    async def aclose(self) -> None:
        if self._connection is not None:
            await self._connection.close()

    async def _connected(self) -> psycopg.AsyncConnection[Any]:
        async with self._opening:
            if self._connection is None or self._connection.closed or self._connection.broken:
                # With the database down, a turn fails as soon as a pooled read or write would.
                limit: dict[str, Any] = ({} if "connect_timeout" in self._url
                                         else {"connect_timeout": math.ceil(POOL_WAIT)})
                self._connection = await psycopg.AsyncConnection.connect(self._url, **self._settings, **limit)
            return self._connection


async def _try_lock_on(connection: psycopg.AsyncConnection[Any], thread_id: str
                       ) -> psycopg.AsyncConnection[Any] | None:
    with anyio.CancelScope(shield=True):
        cursor = await connection.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS locked",
                                          (THREAD_LOCK_CLASS, thread_id))
        row = await cursor.fetchone()
    return connection if row is not None and row["locked"] else None


class _ThreadAdvisoryLock:
    """One turn's attempt at its thread's advisory lock (see :mod:`runner.store.thread_locks`)."""

    def __init__(self, locks: AdvisoryLocks, thread_id: str) -> None:
        self._locks = locks
        self._thread_id = thread_id
        self._held: psycopg.AsyncConnection[Any] | None = None

    async def __aenter__(self) -> _ThreadAdvisoryLock:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        connection, self._held = self._held, None
        if connection is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await connection.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))",
                                         (THREAD_LOCK_CLASS, self._thread_id))
            except psycopg.OperationalError as exc:  # the connection broke: its locks went with it
                logger.debug("the thread lock connection broke: %s", exc)

    async def acquire(self) -> bool:
        self._held = await self._locks.try_lock(self._thread_id)
        return self._held is not None

    def holder(self) -> str:
        return "another process on the database"


class _NoLock:
    """The saver's lock where every operation takes a pooled connection of its own."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        return None

