"""``ServerFleet``: every server of a manifest, started together, stopped together, never orphaned.

``open_fleet`` starts all servers concurrently, each in its own lifetime task inside the fleet's
task group. A *required* server that cannot start stops start-up: everything is stopped and its
``ServerStartError`` raised. An *optional* one is logged and kept with status ``failed``.
Leaving the block - normally, by an error, by cancellation (Ctrl-C) - stops every server, each
shutdown bounded and shielded. ``stop_on_signals`` turns SIGTERM/SIGHUP into that same exit.
"""

from __future__ import annotations

import logging
import math
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.extension import ClientExtension

from runner.errors import ServerStartError
from runner.manifest import restart_fields
from runner.servers.connection import ServerConnection, ServerSpecType
from runner.servers.inbound_requests import SamplingPolicy
from runner.servers.lifecycle import ServerLifecycle
from runner.servers.offerings import CatalogueChange
from runner.servers.supervision import supervise
from runner.task_groups import background_tasks

logger = logging.getLogger(__name__)

STOP_TIMEOUT = 15.0  # above the worst stdio escalation (stdin, SIGTERM, SIGKILL, reap)


class ServerFleet:
    """The running servers, by manifest key. Made by :func:`open_fleet`."""

    def __init__(
        self, task_group: anyio.abc.TaskGroup, *, base_dir: Path, state_dir: Path,
        sampling: SamplingPolicy | None = None, extensions: Sequence[ClientExtension] = (),
    ) -> None:
        self.connections: dict[str, ServerConnection] = {}
        self.base_dir = base_dir
        self.state_dir = state_dir
        self._task_group = task_group
        # Sampling: the policy of servers whose spec says nothing, and who completes (the runtime).
        self.sampling = sampling if sampling is not None else SamplingPolicy()
        self.extensions = tuple(extensions)  # what every connection announces to its server
        self._subscribers: list[MemoryObjectSendStream[CatalogueChange]] = []

    def subscribe(self) -> MemoryObjectReceiveStream[CatalogueChange]:
        """A stream of every catalogue change from now on (``async with`` it; ``async for`` over it).

        Each subscriber gets every event; the stream ends when the fleet closes.
        """
        send, receive = anyio.create_memory_object_stream[CatalogueChange](math.inf)
        self._subscribers.append(send)
        return receive

    async def add(self, key: str, spec: ServerSpecType) -> ServerConnection:
        """Start one more server and wait for its first start to finish.

        Raises ServerStartError (after stopping it) when a required server cannot start; an
        optional one that cannot start is returned with status ``failed``.
        """
        connection = self._launch(key, spec)
        await connection.settled.wait()
        failure = _start_failure(connection)
        if failure is not None and spec.required:
            await self.remove(key)
            raise failure
        if failure is not None:
            _warn_skipped(connection, failure)
        return connection

    async def remove(self, key: str) -> None:
        """Stop server ``key`` (bounded) and forget it."""
        connection = self.connections.pop(key)
        await _stop(connection)

    async def replace(self, key: str, spec: ServerSpecType) -> ServerConnection:
        """Restart server ``key`` with a new spec."""
        await self.remove(key)
        return await self.add(key, spec)

    def needs_restart(self, key: str, spec: ServerSpecType) -> bool:
        """Whether bringing server ``key`` to ``spec`` restarts it (a ``RESTARTS`` field differs)."""
        current = self.connections[key].spec
        return (
            type(current) is not type(spec)
            or any(getattr(current, name) != getattr(spec, name) for name in restart_fields(type(spec)))
            or bool(current.roots) != bool(spec.roots)  # the roots capability is declared on connect
        )

    async def update(
        self, key: str, spec: ServerSpecType, *, restart: bool = False
    ) -> Literal["restarted", "updated", "unchanged"]:
        """Bring running server ``key`` to ``spec``: restart it when a field marked ``RESTARTS``
        changed or ``restart`` asks for it (a server that waited for a login that has now been
        stored), after its in-flight calls are drained by the caller; else apply ``spec`` live.

        A restart raises ServerStartError as :meth:`add` does.
        """
        connection = self.connections[key]
        if not restart and connection.spec == spec:
            return "unchanged"
        if restart or self.needs_restart(key, spec):
            await self.replace(key, spec)
            return "restarted"
        await connection.apply_live(spec)  # timeouts, filters, fallbacks, roots
        return "updated"

    async def aclose(self) -> None:
        """Stop every server concurrently (bounded); end the subscriber streams."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for connection in self.connections.values():
                    tg.start_soon(_stop, connection)
        for subscriber in self._subscribers:
            subscriber.close()
        self._subscribers.clear()

    def _launch(self, key: str, spec: ServerSpecType) -> ServerConnection:
        if key in self.connections:
            raise ServerStartError(key, "is already running", permanent=True)
        lifecycle = ServerLifecycle()  # written by the supervisor only; the connection reads it
        connection = ServerConnection(
            key, spec, base_dir=self.base_dir, state_dir=self.state_dir, publish=self._publish,
            lifecycle=lifecycle,
            sampling=self.sampling, extensions=self.extensions,
        )
        self.connections[key] = connection
        self._task_group.start_soon(supervise, connection, lifecycle, name=f"mcp server {key}")
        return connection

    async def start_all(self, specs: Mapping[str, ServerSpecType]) -> None:
        """Launch every server at once; raise the first required failure as soon as it happens."""
        launched = [self._launch(key, spec) for key, spec in specs.items()]
        failed_required: list[ServerStartError] = []
        async with anyio.create_task_group() as waiters:

            async def wait_for(connection: ServerConnection) -> None:
                await connection.settled.wait()
                failure = _start_failure(connection)
                if failure is not None and connection.spec.required:
                    failed_required.append(failure)
                    waiters.cancel_scope.cancel()

            for connection in launched:
                waiters.start_soon(wait_for, connection)
        if failed_required:
            raise failed_required[0]
        for connection in launched:
            if (failure := _start_failure(connection)) is not None:
                _warn_skipped(connection, failure)

    def _publish(self, change: CatalogueChange) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber.send_nowait(change)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.remove(subscriber)  # that subscriber closed its stream


def _warn_skipped(connection: ServerConnection, failure: ServerStartError) -> None:
    fallback = connection.spec.fallback
    if fallback is None:
        logger.warning("optional server skipped: %s", failure)
    else:  # not skipped: its tools are still offered, and called through the fallback
        reason = str(failure).removeprefix(f"{connection.key}: ")
        logger.warning(
            "%s failed to start; its tools are served by %s (%s)", connection.key, fallback, reason
        )


def _start_failure(connection: ServerConnection) -> ServerStartError | None:
    if connection.status != "failed":
        return None
    error = connection.error
    if isinstance(error, ServerStartError):
        return error
    return ServerStartError(connection.key, str(error) if error else "failed")


async def _stop(connection: ServerConnection) -> None:
    connection.stop_requested.set()
    with anyio.move_on_after(STOP_TIMEOUT, shield=True) as scope:
        await connection.finished.wait()
    if scope.cancelled_caught:
        logger.error("server %s did not stop within %gs", connection.key, STOP_TIMEOUT)


@asynccontextmanager
async def open_fleet(
    specs: Mapping[str, ServerSpecType], *, base_dir: Path, state_dir: Path,
    sampling: SamplingPolicy | None = None, extensions: Sequence[ClientExtension] = (),
) -> AsyncIterator[ServerFleet]:
    """Start every server of ``specs`` concurrently; stop them all when the block ends.

    ``sampling``: how the servers get completions (default: refused). ``extensions``: the MCP
    extensions every connection announces in its client capabilities (default: none).
    ``base_dir`` resolves relative ``cwd`` values; server stderr goes to
    ``state_dir/logs/<key>.log``. Raises ServerStartError naming the first required server that
    could not start, after stopping the others.
    """
    async with background_tasks() as task_group:  # callers see the block's errors unwrapped
        fleet = ServerFleet(task_group, base_dir=base_dir, state_dir=state_dir, sampling=sampling,
                            extensions=extensions)
        try:
            await fleet.start_all(specs)
            yield fleet
        finally:
            await fleet.aclose()


@dataclass
class SignalStop:
    """Set by :func:`stop_on_signals`: which signal ended the block, if any."""

    received: signal.Signals | None = None

    def receive(self, number: int) -> bool:
        """Record the first signal that arrives; False for any later one."""
        if self.received is not None:
            return False
        self.received = signal.Signals(number)
        return True


@asynccontextmanager
async def stop_on_signals(
    *signals: signal.Signals, hurry: anyio.Event | None = None, stopping: anyio.Event | None = None,
) -> AsyncIterator[SignalStop]:
    """End the block (by cancelling it) when one of ``signals`` arrives (default SIGTERM, SIGHUP).

    With ``open_fleet`` inside the block, SIGTERM then stops every server as a normal exit does.
    With ``hurry``, the signals stay handled while the block stops: another one sets ``hurry``
    (rather than Python's default handling, a KeyboardInterrupt for SIGINT). Once ``stopping`` is
    set (the block is ending on its own), a signal only sets ``hurry``: it is not why the block ended.
    Works in the main thread only (a limit of signal handling in Python).
    """
    wanted = signals or (signal.SIGTERM, signal.SIGHUP)
    outcome = SignalStop()
    async with background_tasks() as task_group:  # the block's errors leave unwrapped
        with anyio.CancelScope() as body:  # ours ends here; anyone else's passes through

            async def watch() -> None:
                with anyio.open_signal_receiver(*wanted) as received:
                    async for number in received:
                        if stopping is not None and stopping.is_set() and outcome.received is None:
                            if hurry is not None:
                                hurry.set()
                        elif outcome.receive(number):
                            body.cancel()
                            if hurry is None:
                                return
                        elif hurry is not None:  # another signal while the block stops
                            hurry.set()

            task_group.start_soon(watch)
            yield outcome
