"""The served agent on this process's stdin/stdout.

The SDK's ``stdio_server`` carries the messages; around it, this module reads the lines (a daemon
thread, so a read that never returns cannot hold up the exit), answers a line that is not one
well-formed JSON-RPC message itself (:mod:`.malformed`), and keeps count of the requests read and
not yet answered. However serving ends (the client closes stdin, or a signal), each request read
is answered before the wire closes: the running turns are told the agent is stopping
(``on_stop``), the rest run to their end, for up to GRACEFUL_SHUTDOWN seconds or until ``hurry``.
At the end of input the SDK alone would drop whatever was still running. ``input_ended`` is set
then, when the client closed the wire: what follows is this process stopping on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from runner.hosting.mcp.http_wire import GRACEFUL_SHUTDOWN, cancelled_when
from runner.hosting.mcp.malformed import refusal

CANCELLED = "notifications/cancelled"
# Turns of the event loop from a signal's wakeup byte to its receiver's task: reading the wakeup
# pipe, the loop's signal callback, anyio's, the waiting task; twice that, to spare.
SIGNAL_SETTLING_TURNS = 8


class Unanswered:
    """The ids of the requests read and not yet answered (a cancelled one is not answered)."""

    def __init__(self) -> None:
        self._ids: set[types.RequestId] = set()
        self._none = anyio.Event()
        self._none.set()

    def read(self, message: SessionMessage | Exception) -> None:
        if not isinstance(message, SessionMessage):
            return
        inner = message.message
        if isinstance(inner, types.JSONRPCRequest):
            if not self._ids:
                self._none = anyio.Event()
            self._ids.add(inner.id)
        elif isinstance(inner, types.JSONRPCNotification) and inner.method == CANCELLED:
            self._answered((inner.params or {}).get("requestId"))

    def written(self, message: SessionMessage) -> None:
        if isinstance(message.message, (types.JSONRPCResponse, types.JSONRPCError)):
            self._answered(message.message.id)

    def _answered(self, request_id: Any) -> None:
        self._ids.discard(request_id)
        if not self._ids:
            self._none.set()

    async def none(self) -> None:
        await self._none.wait()


class WireOut:
    """fd 1 as the SDK's writer uses it: it writes, then flushes, each message it takes, one at a
    time (here in a worker thread: a client slow to read must not block the loop). Counting what
    it was handed against what it flushed tells when everything is out."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", encoding="utf-8")
        self._handed = self._flushed = 0
        self.gone = False
        self._all_out = anyio.Event()
        self._all_out.set()

    def handed(self) -> None:
        if self._all_out.is_set():
            self._all_out = anyio.Event()
        self._handed += 1

    async def write(self, text: str) -> None:
        if not self.gone:
            await self._unless_gone(self._file.write, text)

    async def flush(self) -> None:
        try:
            if not self.gone:
                await self._unless_gone(self._file.flush)
        finally:
            self._flushed += 1
            if self._flushed >= self._handed:
                self._all_out.set()

    async def _unless_gone(self, step: Callable[..., object], *args: object) -> None:
        try:
            await anyio.to_thread.run_sync(step, *args)
        except OSError:  # EPIPE: the client went away; what is left to say has no one to hear it
            self.gone = True

    async def all_out(self) -> None:
        await self._all_out.wait()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the client may be gone: nothing to flush to
            self._file.close()


async def serve_stdio(server: Server[Any], *, on_stop: Callable[[], Awaitable[None]] | None = None,
                      hurry: anyio.Event | None = None, input_ended: anyio.Event | None = None) -> None:
    """Serve over stdin/stdout until stdin closes, or until cancelled; every request read is
    answered first (see the module's text)."""
    wire = anyio.CancelScope(shield=True)  # ended here, once the requests read are answered
    ended = anyio.Event()
    unanswered = Unanswered()
    out: WireOut | None = None

    async def at_end_of_input() -> None:
        if input_ended is not None:
            # A signal sent just before stdin closed has reached this process already (its byte is
            # in the event loop's wakeup pipe), but the reader thread's end of input can be handed
            # to the loop ahead of it. A few turns of the loop let the signal be seen first: then
            # it is why serve stops (128+N, the running turns told the agent is stopping).
            for _ in range(SIGNAL_SETTLING_TURNS):
                await anyio.lowlevel.checkpoint()
            input_ended.set()
        await answer_what_was_read()

    async def answer_what_was_read() -> None:
        async with cancelled_when(hurry):
            with anyio.move_on_after(GRACEFUL_SHUTDOWN):
                if on_stop is not None:
                    await on_stop()
                await unanswered.none()
                if out is not None:
                    await out.all_out()

    async def run() -> None:
        nonlocal out
        refusals_in, refusals_out = anyio.create_memory_object_stream[types.JSONRPCError](math.inf)
        to_server, from_wire = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_wire, from_server = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            with wire, _claimed_stdio() as (fd, out_fd):
                out = WireOut(out_fd)
                lines = _stdin_lines(fd, refusals_in, at_end=at_end_of_input)
                async with stdio_server(stdin=lines, stdout=out) as (read_stream, write_stream):  # type: ignore[arg-type]
                    async with anyio.create_task_group() as group:
                        group.start_soon(_relay_in, read_stream, to_server, unanswered)
                        group.start_soon(_relay_out, from_server, write_stream, unanswered, out)
                        group.start_soon(_answer_refusals, refusals_out, write_stream, out)
                        async with to_wire:  # closed, it ends the relay out: nothing more to write
                            await server.run(from_wire, to_wire, server.create_initialization_options())
                    await write_stream.aclose()  # the SDK's writer writes what it has, then ends
        finally:
            if out is not None:
                out.close()
            ended.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        try:
            await ended.wait()
        finally:
            with anyio.CancelScope(shield=True):
                if not ended.is_set():
                    await answer_what_was_read()
                wire.cancel()


async def _relay_in(read_stream: Any, to_server: MemoryObjectSendStream[SessionMessage | Exception],
                    unanswered: Unanswered) -> None:
    async with to_server:
        async for message in read_stream:
            unanswered.read(message)
            await to_server.send(message)


async def _relay_out(from_server: MemoryObjectReceiveStream[SessionMessage], write_stream: Any,
                     unanswered: Unanswered, out: WireOut) -> None:
    """The server's messages to the wire; an answer counts as given once the SDK's writer has it
    (``out`` knows when it has written it)."""
    async with from_server:
        async for message in from_server:
            out.handed()
            await write_stream.send(message)
            unanswered.written(message)


@contextmanager
def _claimed(fd: int, stand_in: int) -> Iterator[int]:
    """A private duplicate of ``fd`` for the wire, with ``fd`` itself pointing at ``stand_in``
    meanwhile (as the SDK claims them): nothing else in this process, or started by it, can take
    the client's messages from stdin or write stray output among the answers on stdout."""
    wire = os.dup(fd)
    saved = os.dup(fd)
    os.dup2(stand_in, fd)
    try:
        yield wire
    finally:
        os.dup2(saved, fd)
        os.close(saved)


@contextmanager
def _claimed_stdio() -> Iterator[tuple[int, int]]:
    """The wire's stdin and stdout; fd 0 reads the null device and fd 1 goes to stderr meanwhile."""
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        with _claimed(0, null) as stdin, _claimed(1, 2) as stdout:
            yield stdin, stdout
    finally:
        os.close(null)


async def _stdin_lines(fd: int, refusals: MemoryObjectSendStream[types.JSONRPCError],
                       at_end: Callable[[], Awaitable[None]]) -> AsyncIterator[str]:
    """The lines of ``fd``, read by a daemon thread; ``at_end`` is awaited at the end of input,
    before the SDK hears of it. A line that is not one well-formed JSON-RPC message (in UTF-8)
    goes to ``refusals`` instead; blank lines go nowhere."""
    loop = asyncio.get_running_loop()
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)

    def read() -> None:
        with os.fdopen(fd, "rb") as lines:
            for line in lines:
                loop.call_soon_threadsafe(_deliver, send, line)
        loop.call_soon_threadsafe(send.close)

    threading.Thread(target=read, name="mcp-run serve stdin", daemon=True).start()
    async with receive, refusals:
        async for line in receive:
            line = line.rstrip(b"\r\n")
            if not line.strip():
                continue
            if (problem := refusal(line)) is not None:
                refusals.send_nowait(problem)
                continue
            yield line.decode("utf-8")  # the check above read it as UTF-8
        await at_end()


def _deliver(send: Any, line: bytes) -> None:
    try:
        send.send_nowait(line)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return  # the server stopped reading: the line has no one to go to


async def _answer_refusals(refusals: MemoryObjectReceiveStream[types.JSONRPCError],
                           write_stream: Any, out: WireOut) -> None:
    """Each refusal written to the wire, as the SDK writes its own answers."""
    async with refusals:
        async for problem in refusals:
            try:
                out.handed()
                await write_stream.send(SessionMessage(problem))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the wire closed: no one is left to tell
