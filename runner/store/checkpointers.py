"""Checkpointers: the one a manifest names (:func:`open_checkpointer`), and the SQLite one,
LangGraph's synchronous saver with one worker-thread hop per operation.

LangGraph's ``AsyncSqliteSaver`` runs every statement, cursor and commit of an operation as its own
round trip to aiosqlite's thread: about fifty per agent turn, each a queue hand-off and a wake-up
on both sides, which cost more than the writes themselves. :class:`SqliteCheckpointer` runs each
whole operation (statement and commit: one transaction) on a thread of its own instead, one at a
time and in the order they were asked for; operations asked for while one runs are run in the
same wake-up. The file format is LangGraph's own, so either saver reads what the other wrote.

A thread keeps its latest checkpoint only: each checkpoint holds the whole conversation, so keeping
every superseded one made a thread's storage grow with the square of its length. Nothing reads an
older one (the chat, ``-p``, ``serve`` and the evals resume a thread from its latest; there is no
undo), and a resumed pause (an approval, a question) needs only the latest and its pending writes.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hashlib
import os
import queue
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from runner.errors import CheckpointerError
from runner.store.postgres import open_postgres_saver
from runner.store.private import narrow_if_present, private_file, private_folder, private_opener

_Result = TypeVar("_Result")


# A thread's checkpoints (and their pending writes) older than the one just saved.
PRUNE_CHECKPOINTS = "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id < ?"
PRUNE_WRITES = "DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id < ?"

# What LangGraph Server asks of a custom checkpointer beyond reads and writes (its warnings name
# them): pruning threads (keep their latest checkpoint, or delete them) and deleting a cancelled
# run's checkpoints (multitask_strategy='rollback'). "delete_all" is the server's name of "delete".
KEEP_LATEST, DELETE_STRATEGIES = "keep_latest", ("delete", "delete_all")
PRUNE_OLDER_CHECKPOINTS = (
    "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id < (SELECT MAX(latest.checkpoint_id) "
    "FROM checkpoints AS latest WHERE latest.thread_id = checkpoints.thread_id "
    "AND latest.checkpoint_ns = checkpoints.checkpoint_ns)"
)
PRUNE_ORPHAN_WRITES = (
    "DELETE FROM writes WHERE thread_id = ? AND NOT EXISTS (SELECT 1 FROM checkpoints AS kept "
    "WHERE kept.thread_id = writes.thread_id AND kept.checkpoint_ns = writes.checkpoint_ns "
    "AND kept.checkpoint_id = writes.checkpoint_id)"
)
RUN_CHECKPOINTS = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
    "WHERE json_extract(CAST(metadata AS TEXT), '$.run_id') = ?"
)
_ONE = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
DELETE_CHECKPOINT, DELETE_CHECKPOINT_WRITES = f"DELETE FROM checkpoints {_ONE}", f"DELETE FROM writes {_ONE}"


def prune_strategy(thread_ids: Sequence[str], strategy: str) -> bool:
    """Whether ``strategy`` deletes the threads (else it keeps their latest checkpoints); a
    strategy LangGraph does not define, or one thread id given as a string, is a caller's error."""
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread ids, not a str")
    if strategy != KEEP_LATEST and strategy not in DELETE_STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}: use {KEEP_LATEST} or delete")
    return strategy in DELETE_STRATEGIES


LOCK_REOPENS = 5  # times a lock file removed under an attempt is opened again within that attempt

_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class _Worker:
    """One thread running functions in the order they are handed over, for coroutines to await."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    async def run(self, function: Callable[[], _Result]) -> _Result:
        """``function``'s result, from the thread. Not abandoned on cancellation: a write that
        started finishes (the caller is cancelled after)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_Result] = loop.create_future()
        self._queue.put((function, loop, future))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            with anyio.CancelScope(shield=True):
                await asyncio.wait([future])
            raise

    def stop(self) -> None:
        """Run what was handed over, then end the thread (blocks until it ended)."""
        self._queue.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            function, loop, future = item
            try:
                outcome, failed = function(), False
            except BaseException as exc:  # handed to the awaiting coroutine, raised there
                outcome, failed = exc, True
            try:
                loop.call_soon_threadsafe(_settle, future, outcome, failed)
            except RuntimeError:  # the loop closed meanwhile: no one awaits the result
                pass


def _settle(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.done():
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class SqliteCheckpointer(SqliteSaver):
    """A :class:`SqliteSaver` whose async methods each take one hop to its own thread.

    Its threads are locked (:func:`runner.store.thread_locks.thread_turn`) by files in
    ``locks``, one per thread while a turn holds it: ``flock`` locks, which the system releases
    when their process ends, however it ends."""

    def __init__(self, conn: sqlite3.Connection, *, locks: Path) -> None:
        super().__init__(conn)
        self.locks = locks
        self._worker: _Worker | None = None

    def thread_lock(self, thread_id: str) -> _ThreadFile:
        digest = hashlib.sha256(thread_id.encode()).hexdigest()[:32]
        return _ThreadFile(self.locks, self.locks / f"{digest}.lock")

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
            saver = cls(conn, locks=path.with_name(path.name + ".locks"))
            saver.setup()
            try:
                yield saver
            finally:
                if saver._worker is not None:
                    saver._worker.stop()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save ``checkpoint``, then drop the thread's older checkpoints and their writes."""
        saved = super().put(config, checkpoint, metadata, new_versions)
        where = saved["configurable"]
        superseded = (str(where["thread_id"]), where["checkpoint_ns"], where["checkpoint_id"])
        with self.cursor() as cursor:
            # Checkpoint ids grow with time (LangGraph finds a thread's latest as the greatest).
            cursor.execute(PRUNE_CHECKPOINTS, superseded)
            cursor.execute(PRUNE_WRITES, superseded)
        return saved

    async def _in_thread(self, function: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
        if self._worker is None:
            self._worker = _Worker(f"sqlite checkpointer {id(self):x}")
        return await self._worker.run(functools.partial(function, *args, **kwargs))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._in_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # LangGraph's parameter name
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

    def prune(self, thread_ids: Sequence[str], *, strategy: str = KEEP_LATEST) -> None:
        """Delete the threads (``delete``), or keep each one's latest checkpoint per namespace
        (``keep_latest``: what every save already leaves) and its writes."""
        deleting = prune_strategy(thread_ids, strategy)
        for thread in map(str, thread_ids):
            if deleting:
                self.delete_thread(thread)
                continue
            with self.cursor() as cursor:
                cursor.execute(PRUNE_OLDER_CHECKPOINTS, (thread,))
                cursor.execute(PRUNE_ORPHAN_WRITES, (thread,))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = KEEP_LATEST) -> None:
        await self._in_thread(self.prune, thread_ids, strategy=strategy)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the runs ``run_ids`` saved (their metadata's ``run_id``) and their
        writes. A thread keeps its latest checkpoint only, so a thread whose latest came from one
        of these runs is left with none: it starts again empty."""
        with self.cursor() as cursor:
            for run in map(str, run_ids):
                saved = cursor.execute(RUN_CHECKPOINTS, (run,)).fetchall()
                for where in saved:
                    cursor.execute(DELETE_CHECKPOINT_WRITES, where)
                    cursor.execute(DELETE_CHECKPOINT, where)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._in_thread(self.delete_for_runs, list(run_ids))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return await self._in_thread(self.get_delta_channel_history, config=config, channels=channels)



class _ThreadFile:
    """The lock file of one thread: ``flock``-ed while a turn holds the thread, holding that
    process's id (for the waiting message), removed when the turn lets go. A file removed between
    another process's open and its lock is noticed (the path no longer names the locked file)
    and opened again."""

    def __init__(self, folder: Path, path: Path) -> None:
        self.folder = folder
        self.path = path
        self._held: int | None = None  # the locked file's descriptor
        self._holder = ""

    async def __aenter__(self) -> _ThreadFile:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._held is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._release)

    async def acquire(self) -> bool:
        return await anyio.to_thread.run_sync(self._try)

    def holder(self) -> str:
        return self._holder

    def _try(self) -> bool:
        private_folder(self.folder)
        for _ in range(LOCK_REOPENS):
            descriptor = private_opener(str(self.path), os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
                self._holder = f"process {pid}" if pid.isdigit() else ""
                os.close(descriptor)
                return False
            except BaseException:
                os.close(descriptor)
                raise
            if _names(self.path, descriptor):
                os.ftruncate(descriptor, 0)
                os.pwrite(descriptor, str(os.getpid()).encode(), 0)
                self._held = descriptor
                return True
            os.close(descriptor)  # removed by the holder as it let go: open the new one
        return False

    def _release(self) -> None:
        descriptor, self._held = self._held, None
        if descriptor is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still locked: the next holder makes a new one
        finally:
            os.close(descriptor)


def _names(path: Path, descriptor: int) -> bool:
    """Whether ``path`` still names the file open as ``descriptor``."""
    try:
        return path.stat().st_ino == os.fstat(descriptor).st_ino
    except FileNotFoundError:
        return False


Durability = Literal["exit", "async", "sync"]


def turn_durability(saver: BaseCheckpointSaver | None, *, several_agents: bool = False) -> Durability:
    """When a graph run on ``saver`` writes its state. The memory checkpointer, which a dead
    process loses whole anyway: ``exit``, once, when the turn ends or pauses (an approval, a
    question). The others (a SQLite file, PostgreSQL) write every step, so a process killed in the
    middle of a turn leaves the steps it had done and the thread resumes at the step it reached
    (:mod:`runner.agent.resume`); with PostgreSQL another instance may also take the thread over.

    With ``several_agents`` (a manifest with ``agents:``) each step is written before the next one
    starts (``sync``): the steps of the agents and workflows a turn runs (each under its own
    checkpoint namespace) are long and worth never running twice. Otherwise the write of a step
    runs beside the next one (``async``), off the turn's path: a kill may lose the step just done.
    """
    if isinstance(saver, InMemorySaver):
        return "exit"
    return "sync" if several_agents else "async"


@asynccontextmanager
async def open_checkpointer(
    spec: str | None, *, state_dir: Path, base_dir: Path | None = None
) -> AsyncIterator[BaseCheckpointSaver]:
    """The checkpointer named by the manifest's ``checkpointer`` value, open for the block.

    ``memory``; ``sqlite:///relative/path`` (relative to ``base_dir``, default the working directory)
    or ``sqlite:////absolute/path``; ``postgres://...``; None: SQLite at ``state_dir/state.sqlite``.
    """
    if spec == "memory":
        yield InMemorySaver()
        return
    if spec is None or spec.startswith("sqlite:///"):
        path = state_dir / "state.sqlite" if spec is None else Path(spec.removeprefix("sqlite:///"))
        async with _sqlite_saver((base_dir or Path.cwd()) / path) as saver:
            yield saver
        return
    if spec.startswith(("postgres://", "postgresql://")):
        async with open_postgres_saver(spec) as saver:
            yield saver
        return
    raise CheckpointerError(f"unknown checkpointer '{spec}': use memory, sqlite:///path or postgres://...")


@asynccontextmanager
async def _sqlite_saver(path: Path) -> AsyncIterator[BaseCheckpointSaver]:
    async with AsyncExitStack() as stack:
        try:
            # Off the event loop (LangGraph's server refuses blocking calls on it).
            await anyio.to_thread.run_sync(_room_for_file, path)
            opened = SqliteCheckpointer.open(path)
            saver = await anyio.to_thread.run_sync(opened.__enter__)
            stack.push_async_callback(anyio.to_thread.run_sync, lambda: opened.__exit__(None, None, None))
        except (OSError, sqlite3.Error) as exc:
            raise CheckpointerError(f"cannot open the SQLite checkpointer at {path}: {exc}") from exc
        yield saver


def _room_for_file(path: Path) -> None:
    """The database's folder made, the database created private (an empty file is an empty
    database; SQLite gives its -wal and -shm files the database's modes), older ones narrowed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():  # a clear message rather than SQLite's
        raise IsADirectoryError(f"{path} is a directory")
    private_file(path)
    for companion in ("-wal", "-shm", "-journal"):
        narrow_if_present(path.with_name(path.name + companion))
