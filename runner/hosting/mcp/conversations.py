"""Conversations of the served agent: thread ids, the order their turns run in, and their messages.

A request for a turn is *admitted* by the :class:`TurnScheduler` (or refused with
:class:`~runner.errors.BusyError` when it already holds ``max_turns + max_queued`` requests,
running and waiting together), then
waits for its thread (turns of one thread never interleave: they run in arrival order) and for a
free turn slot. A turn waiting for its thread holds no slot, so a slow conversation delays only
the requests behind it on its own thread.

Threads are MCP resources: ``mcp-run://threads/{thread}`` holds a thread's messages, and
``mcp-run://threads/{thread}@{agent}`` those of the thread an agent of ``agents:`` served on its own
keeps for that thread id (:func:`runner.agent.team.agent_thread`). They are listed from the agent's
checkpointer (the most recent checkpoints), so a thread started by another instance on a shared
database is listed and readable too.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from runner.agent.runtime import Runtime
from runner.agent.team import AGENT_THREAD_SEPARATOR
from runner.errors import AskError, BusyError, CheckpointerError
from runner.manifest import MAIN_AGENT
from runner.store.postgres import store_failures

THREAD_SCHEME = "mcp-run://threads/"
THREAD_TEMPLATE = THREAD_SCHEME + "{thread}"
THREAD_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
LISTED_CHECKPOINTS = 1000  # how far back the listing looks: the newest checkpoints of every thread
MESSAGES_MIME = "application/json"

_THREAD_ID = re.compile(THREAD_PATTERN)


def checked_thread_id(value: Any) -> str:
    """``value`` as a thread id, or AskError saying what a thread id looks like."""
    if not isinstance(value, str) or not _THREAD_ID.match(value):
        raise AskError(
            f"invalid thread id {json.dumps(value)[:80]}: a thread id is 1 to 128 letters, digits, "
            "'_', '.', ':' or '-', starting with a letter or digit (the thread an earlier answer named)"
        )
    return value


STORE_UNREACHABLE = "the conversation store is unreachable"


@contextmanager
def conversation_store() -> Iterator[None]:
    """The checkpointer's own failures (its database is down, a file is unreadable) as
    CheckpointerError: the caller hears that the store is unreachable, and why (psycopg and sqlite
    name host, port and user, never the password)."""
    failures: tuple[type[Exception], ...] = (sqlite3.Error, *store_failures())
    try:
        yield
    except failures as exc:
        raise CheckpointerError(f"{STORE_UNREACHABLE}: {str(exc).strip() or type(exc).__name__}; "
                                "try again when it is back") from exc


def thread_uri(thread_id: str) -> str:
    return THREAD_SCHEME + thread_id


def thread_of(uri: str, agents: Collection[str]) -> tuple[str, str]:
    """The thread id and agent of a thread resource's URI: ``…/t1`` is the main agent's thread
    ``t1``, ``…/t1@researcher`` the thread agent ``researcher`` (one of ``agents``, those served
    on their own) keeps for ``t1``."""
    if not uri.startswith(THREAD_SCHEME):
        raise AskError(f"unknown resource {uri!r}: threads are {THREAD_TEMPLATE}")
    name = uri.removeprefix(THREAD_SCHEME)
    thread, separator, agent = name.rpartition(AGENT_THREAD_SEPARATOR)
    if not separator:
        return checked_thread_id(name), MAIN_AGENT
    if agent not in agents or agent == MAIN_AGENT:
        known = ", ".join(repr(known) for known in sorted(agents) if known != MAIN_AGENT) or "none"
        raise AskError(f"unknown agent {json.dumps(agent)[:80]} in thread {json.dumps(name)[:80]}: "
                       f"{THREAD_TEMPLATE}@AGENT names a thread of an agent of agents: ({known})")
    return checked_thread_id(thread), agent


async def listed_threads(runtime: Runtime) -> list[str]:
    """The thread ids with a checkpoint, newest first (those among the last LISTED_CHECKPOINTS):
    the main agent's, and ``t1@researcher`` for the thread an agent of ``agents:`` served on its
    own keeps for ``t1`` (an agent the manifest no longer has is left out: it cannot be read)."""
    if runtime.checkpointer is None:
        return []
    agents = runtime.agents
    seen: dict[str, None] = {}
    async for saved in runtime.checkpointer.alist(None, limit=LISTED_CHECKPOINTS):
        thread_id = saved.config.get("configurable", {}).get("thread_id")
        if not isinstance(thread_id, str) or thread_id in seen:
            continue
        _, separator, agent = thread_id.rpartition(AGENT_THREAD_SEPARATOR)
        if not separator or (agent in agents and agent != MAIN_AGENT):
            seen[thread_id] = None
    return list(seen)


def thread_resource(name: str) -> types.Resource:
    """The resource of thread ``name`` (``t1``, or ``t1@researcher``: that agent's)."""
    thread, separator, agent = name.rpartition(AGENT_THREAD_SEPARATOR)
    about = f"agent {agent}'s thread {thread}" if separator else "this conversation"
    return types.Resource(uri=thread_uri(name), name=f"thread {name}",
                          description=f"The messages of {about} (JSON)", mime_type=MESSAGES_MIME)


def thread_template() -> types.ResourceTemplate:
    return types.ResourceTemplate(uri_template=THREAD_TEMPLATE, name="thread",
                                  description="The messages of a conversation thread (JSON), by thread id",
                                  mime_type=MESSAGES_MIME)


async def thread_messages(runtime: Runtime, thread_id: str, agent: str = MAIN_AGENT
                          ) -> list[dict[str, Any]] | None:
    """``agent``'s thread's messages as JSON-ready dicts, or None when the thread has none."""
    state = await runtime.agents[agent].aget_state(runtime.config(thread_id, agent=agent))
    messages: list[BaseMessage] = (state.values or {}).get("messages", [])
    if not messages:
        return None
    return [message_json(message) for message in messages]


async def thread_started(runtime: Runtime, thread_id: str, agent: str = MAIN_AGENT) -> bool:
    """Whether ``agent``'s thread has messages: :func:`thread_messages` without building the state
    or the messages' JSON (an ``ask`` on a thread reads this before every turn)."""
    if runtime.checkpointer is None:
        return False
    saved = await runtime.checkpointer.aget_tuple(runtime.config(thread_id, agent=agent))
    return saved is not None and bool(saved.checkpoint["channel_values"].get("messages"))


def message_json(message: BaseMessage) -> dict[str, Any]:
    role = {HumanMessage: "user", AIMessage: "assistant", ToolMessage: "tool", SystemMessage: "system"}.get(
        type(message), message.type)
    entry: dict[str, Any] = {"role": role, "text": message.text}
    if isinstance(message, AIMessage) and message.tool_calls:
        entry["tool_calls"] = [{"name": call["name"], "args": call["args"], "id": call["id"]}
                               for call in message.tool_calls]
    if isinstance(message, ToolMessage):
        entry.update(name=message.name, tool_call_id=message.tool_call_id, status=message.status)
    return entry


# --------------------------------------------------------------------------- turn order

DEFAULT_MAX_TURNS = 16
DEFAULT_MAX_QUEUED = 64

Waiting = Callable[[str], Awaitable[None]]
"""Told once, before a turn starts waiting, why it waits (a progress message for the caller)."""


@dataclass
class _ThreadLine:
    """The lock of one thread and how many admitted turns want it (the entry goes at zero)."""

    lock: anyio.Lock
    wanted: int = 0

    def want(self) -> None:
        self.wanted += 1

    def release(self) -> bool:
        """One admitted turn is done with the thread; True when no other wants it."""
        self.wanted -= 1
        return self.wanted == 0


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
        self._holding = 0  # turns holding their thread: running, or waiting for a slot
        self._running = 0

    @property
    def running(self) -> int:
        """Turns inside their block (holding their thread and a slot)."""
        return self._running

    @property
    def waiting(self) -> int:
        """Admitted turns waiting for their thread or for a slot."""
        return self._admitted - self._running

    def _busy(self) -> BusyError:
        """The refusal past the limit, in words that add up: the limit is on the requests taken in
        (running and waiting together), and a request may wait for its thread while slots are free."""
        behind_thread = self._admitted - self._holding
        for_slot = self._holding - self._running
        return BusyError(
            f"the agent is busy: it holds {_count(self._admitted, 'request')}, as many as it takes "
            f"(--max-turns {self.max_turns} may run at once and --max-queued {self.max_queued} more "
            f"may wait): {self._running} running, {for_slot} waiting for a free turn slot and "
            f"{behind_thread} waiting behind an earlier turn of their own thread; try again later"
        )

    @asynccontextmanager
    async def turn(self, thread_id: str, *, waiting: Waiting | None = None,
                   queue_on_thread: bool = True) -> AsyncIterator[None]:
        """The thread's turn, once its earlier turns are done and a slot is free. Refused
        (BusyError) past the bound, and, without ``queue_on_thread``, while another turn of
        the thread runs or waits."""
        if not queue_on_thread and thread_id in self._threads:
            raise BusyError("an earlier turn of this conversation is still running: one turn at a time "
                            "per conversation; try again when it has answered")
        if self._admitted >= self.max_turns + self.max_queued:
            raise self._busy()
        self._admitted += 1
        line = self._threads.setdefault(thread_id, _ThreadLine(anyio.Lock()))
        line.want()
        try:
            if waiting is not None and (line.lock.locked() or self._slots.available_tokens < 1):
                reason = ("an earlier turn of this thread is running" if line.lock.locked()
                          else f"all {self.max_turns} turn slots are taken")
                await waiting(f"queued: {reason}")
            async with line.lock:
                self._holding += 1
                try:
                    async with self._slots:
                        self._running += 1
                        try:
                            yield
                        finally:
                            self._running -= 1
                finally:
                    self._holding -= 1
        finally:
            self._admitted -= 1
            if line.release():
                del self._threads[thread_id]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
