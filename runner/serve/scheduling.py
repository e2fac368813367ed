"""Who runs a turn when: many conversations share one agent, each thread's turns one at a time.

A request for a turn is *admitted* (or refused with :class:`~runner.errors.BusyError` when
``max_turns`` run and ``max_queued`` already wait), then waits for its thread (turns of one
thread never interleave: they run in arrival order) and for a free turn slot. A turn waiting for
its thread holds no slot, so a slow conversation delays only the requests behind it on its own
thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from runner.errors import BusyError

DEFAULT_MAX_TURNS = 16
DEFAULT_MAX_QUEUED = 64

Waiting = Callable[[str], Awaitable[None]]
"""Told once, before a turn starts waiting, why it waits (a progress message for the caller)."""


@dataclass
class _ThreadLine:
    """The lock of one thread and how many admitted turns want it (the entry goes at zero)."""

    lock: anyio.Lock
    wanted: int = 0


class TurnScheduler:
    """Admission, per-thread order and the bound on concurrent turns.

        async with scheduler.turn(thread_id, waiting=tell_the_caller):
            ...  # this thread's turn; at most max_turns of these run at once
    """

    def __init__(self, *, max_turns: int = DEFAULT_MAX_TURNS, max_queued: int = DEFAULT_MAX_QUEUED) -> None:
        if max_turns < 1 or max_queued < 0:
            raise ValueError("max_turns must be at least 1 and max_queued at least 0")
        self.max_turns = max_turns
        self.max_queued = max_queued
        self._slots = anyio.CapacityLimiter(max_turns)
        self._threads: dict[str, _ThreadLine] = {}
        self._admitted = 0

    @property
    def running(self) -> int:
        return self._slots.borrowed_tokens

    @property
    def waiting(self) -> int:
        return self._admitted - self.running

    @asynccontextmanager
    async def turn(self, thread_id: str, *, waiting: Waiting | None = None) -> AsyncIterator[None]:
        if self._admitted >= self.max_turns + self.max_queued:
            raise BusyError(
                f"the agent is busy: {self.running} turns running and {self.waiting} waiting "
                f"(limits {self.max_turns} and {self.max_queued}); try again later"
            )
        self._admitted += 1
        line = self._threads.setdefault(thread_id, _ThreadLine(anyio.Lock()))
        line.wanted += 1
        try:
            if waiting is not None and (line.lock.locked() or self._slots.available_tokens < 1):
                reason = ("an earlier turn of this thread is running" if line.lock.locked()
                          else f"all {self.max_turns} turn slots are taken")
                await waiting(f"queued: {reason}")
            async with line.lock, self._slots:
                yield
        finally:
            self._admitted -= 1
            line.wanted -= 1
            if line.wanted == 0:
                del self._threads[thread_id]
