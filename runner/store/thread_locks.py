"""One turn at a time on a thread, across the tasks of a process and across processes.

A turn reads its thread's latest checkpoint when it starts and writes a new one when it ends: two
turns of one thread running at once would both start from the same checkpoint, and the second to
end would replace the first's turn (each run exits 0, one turn is gone). :func:`thread_turn` holds
the thread for a turn's whole run, so a second waits for the first and starts from its result.

Within a process an asyncio lock per thread does it; across processes, the checkpointer's own
means when it has one (:class:`ThreadLocking`: a file lock beside a SQLite database, an advisory
lock in PostgreSQL). A turn that has to wait says so once (a warning naming the thread) and waits
at most :data:`TURN_WAIT` seconds, then fails with :class:`~runner.errors.CheckpointerError`;
Ctrl-C stops the wait like any other.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import anyio

from runner.errors import CheckpointerError

logger = logging.getLogger(__name__)

TURN_WAIT = 300.0  # seconds a turn waits for another turn of its thread to end
LOCK_POLL = 0.05  # seconds between attempts at a lock another process holds


@runtime_checkable
class ThreadLocking(Protocol):
    """A checkpointer shared by processes, with a lock per thread they can all see."""

    def thread_lock(self, thread_id: str) -> AbstractAsyncContextManager[ThreadLockAttempt]:
        """A held attempt at the thread's lock for the block (released after it)."""
        ...


class ThreadLockAttempt(Protocol):
    async def acquire(self) -> bool:
        """True once the lock is held; False when another process holds it (try again)."""
        ...

    def holder(self) -> str:
        """Who holds it, for the waiting message (``process 1234``), or an empty string."""
        ...


@dataclass
class _Line:
    """The lock of one thread in this process, and how many turns want it (dropped at zero)."""

    lock: anyio.Semaphore  # not a Lock: a turn's generator may be closed by another task than ran it
    wanted: int = 0

    def want(self) -> None:
        self.wanted += 1

    def release(self) -> bool:
        """One turn is done with the thread; True when no other wants it."""
        self.wanted -= 1
        return self.wanted == 0


# Per checkpointer, per thread; a checkpointer's entries go with it.
_lines: weakref.WeakKeyDictionary[Any, dict[str, _Line]] = weakref.WeakKeyDictionary()
_by_id: dict[str, _Line] = {}  # for checkpointers that cannot be weakly referenced (None)


@asynccontextmanager
async def thread_turn(saver: Any, thread_id: str, *, wait: float = TURN_WAIT) -> AsyncIterator[None]:
    """Hold ``thread_id`` of ``saver`` for the block: one turn at a time on it."""
    deadline = anyio.current_time() + wait
    lines = _lines_of(saver)
    line = lines.setdefault(thread_id, _Line(anyio.Semaphore(1)))
    line.want()
    try:
        told = line.lock.value == 0
        if told:
            _tell_waiting(thread_id, "another turn of this process", wait)
        with anyio.move_on_after(wait) as waited:
            await line.lock.acquire()
        if waited.cancelled_caught:
            raise _still_in_use(thread_id, wait)
        try:
            if not isinstance(saver, ThreadLocking):
                yield
                return
            async with saver.thread_lock(thread_id) as attempt:
                while not await attempt.acquire():  # another process holds it: nothing to wait on but time
                    if anyio.current_time() >= deadline:
                        raise _still_in_use(thread_id, wait)
                    if not told:
                        _tell_waiting(thread_id, attempt.holder() or "another process", wait)
                        told = True
                    await anyio.sleep(LOCK_POLL)
                yield
        finally:
            line.lock.release()
    finally:
        if line.release():
            del lines[thread_id]


def _lines_of(saver: Any) -> dict[str, _Line]:
    try:
        return _lines.setdefault(saver, {})
    except TypeError:  # None, or a saver that takes no weak reference
        return _by_id


def _tell_waiting(thread_id: str, holder: str, wait: float) -> None:
    logger.warning("thread %s is in use by %s: this turn waits for it to end (at most %gs; Ctrl-C stops)",
                   thread_id, holder, wait)


def _still_in_use(thread_id: str, wait: float) -> CheckpointerError:
    return CheckpointerError(f"thread {thread_id} was still in use by another turn after {wait:g}s: "
                             "try again when that turn has ended")
