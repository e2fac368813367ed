"""One server's lifecycle: its status, sessions, restarts, era and why it last failed.

Its supervisor (``supervision.supervise``) holds the :class:`ServerLifecycle` and is the only
writer; the connection and everyone reading through it get a :class:`LifecycleView`: the current
:class:`Lifecycle` snapshot (frozen) and a way to wait for the next change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio

from runner.errors import ServerError

Status = Literal["starting", "ready", "restarting", "failed", "stopped"]


@dataclass(frozen=True)
class Lifecycle:
    """A server's lifecycle as its supervisor last wrote it."""

    status: Status = "starting"
    era: str | None = None  # the protocol version of the current (or last) session
    instructions: str | None = None
    pid: int | None = None  # the process of the current session (stdio servers)
    error: ServerError | None = None  # why the server is failed (or its last start failed)
    last_incident: ServerError | None = None  # why the previous session ended
    sessions: int = 0  # sessions that finished their handshake
    restarts: int = 0  # restart attempts made


class LifecycleView(Protocol):
    """What the connection's users may do with the lifecycle: read it and wait for it."""

    @property
    def now(self) -> Lifecycle: ...

    @property
    def settled(self) -> anyio.Event: ...

    @property
    def finished(self) -> anyio.Event: ...

    async def wait_until(self, condition: Callable[[Lifecycle], bool]) -> None: ...

    def next_change(self) -> anyio.Event: ...


class ServerLifecycle:
    """The lifecycle record its supervisor writes; every write is one new :class:`Lifecycle`."""

    def __init__(self) -> None:
        self._now = Lifecycle()
        self._changed = anyio.Event()
        self._settled = anyio.Event()
        self._finished = anyio.Event()

    @property
    def now(self) -> Lifecycle:
        return self._now

    @property
    def settled(self) -> anyio.Event:
        """Set when the first start is over: ready or failed."""
        return self._settled

    @property
    def finished(self) -> anyio.Event:
        """Set when the supervisor has ended."""
        return self._finished

    def next_change(self) -> anyio.Event:
        """An event set at the next status change (or failed start)."""
        return self._changed

    async def wait_until(self, condition: Callable[[Lifecycle], bool]) -> None:
        """Wait until ``condition`` holds of the lifecycle; it is checked at every status change
        (and failed start)."""
        while not condition(self._now):
            await self._changed.wait()

    # -- writes (the supervisor's) -----------------------------------------------------------

    def restart_attempted(self) -> None:
        self._now = dataclasses.replace(self._now, restarts=self._now.restarts + 1)

    def start_failed(self, error: ServerError) -> None:
        """A start failed; who waits for a restarting server learns it is down meanwhile."""
        self._write(error=error, status=self._now.status)

    def session_ended(self, incident: ServerError) -> None:
        self._now = dataclasses.replace(self._now, last_incident=incident)

    def ready(self, *, era: str | None, instructions: str | None, pid: int | None) -> None:
        """A session finished its handshake and first listing."""
        self._write(era=era, instructions=instructions, pid=pid, sessions=self._now.sessions + 1,
                    error=None, status="ready")
        self._settled.set()

    def detached(self) -> None:
        """The session ended; a ready server is restarting."""
        if self._now.status == "ready":
            self._write(pid=None, status="restarting")
        else:
            self._now = dataclasses.replace(self._now, pid=None)

    def failed(self, error: ServerError) -> None:
        """The server is given up on."""
        self._write(error=error, pid=None, status="failed")
        self._settled.set()

    def ended(self) -> None:
        """The supervisor is done: a server that did not fail is stopped."""
        if self._now.status != "failed":
            self._write(status="stopped")
        self._settled.set()
        self._finished.set()

    def _write(self, *, status: Status, **changes: object) -> None:
        """A new snapshot with ``status``; whoever waits for a status change is woken."""
        self._now = dataclasses.replace(self._now, status=status, **changes)  # type: ignore[arg-type]
        self._changed.set()
        self._changed = anyio.Event()
