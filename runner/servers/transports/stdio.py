"""The stdio transport: one server subprocess, watched from spawn to reap.

Why not ``mcp.client.stdio.stdio_client``: the runner needs the process id, stderr in a per-server
log (not the user's terminal), an allow-listed environment, exit detection that does not wait for
the next request, tolerance of junk on stdout, and a kill-now path for stale servers. The JSON-RPC
layer stays the SDK's: this module only moves ``SessionMessage`` objects between pipes and streams.
What is spawned (the command itself, a container engine's client, or ``bwrap``) is decided by
``isolation.prepare_launch``; a container left running by a killed client is removed at the end.

Shutdown escalates, every step bounded and shielded from cancellation: close stdin -> SIGTERM to
the process group -> SIGKILL to the group. Servers start in their own session, so the group also
holds whatever they spawned; stragglers left in the group after the server exits are killed too.
If the runner itself is killed, a watcher beside each server kills its group (``child_reaping``).
Junk on stdout is noted in the server's log line by line and warned about a few times per interval
(``repeated_warnings``); a line is bounded to one message (``message_limits``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client import Transport
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

from runner.errors import ServerStartError
from runner.manifest import StdioServerSpec
from runner.servers.translation import Boundary, translated
from runner.servers.transports import message_limits
from runner.servers.transports.child_reaping import GroupWatch, open_child_process, watch_group
from runner.servers.transports.environment import redacted
from runner.servers.transports.isolation import Launch, prepare_launch, remove_container
from runner.servers.transports.repeated_warnings import RepeatedWarning
from runner.store.private import private_opener

if TYPE_CHECKING:
    from runner.sdk import TransportStreams

logger = logging.getLogger(__name__)

STDIN_CLOSE_GRACE = 2.0  # a well-behaved server exits on its own once stdin closes
TERMINATE_GRACE = 2.0  # then SIGTERM; SIGKILL after this
KILL_REAP_TIMEOUT = 2.0  # time for the event loop to observe a SIGKILLed process
EOF_AFTER_EXIT_GRACE = 0.25  # lets the last lines a dying server wrote reach the session
EXIT_POLL_INTERVAL = 0.05  # only where pidfd is unavailable
STDERR_TAIL_LINES = 20
MAX_STDERR_LINE = 65_536
MAX_LOG_BYTES = 5_000_000  # a bigger log is moved to <key>.log.1 and a new one begun
JUNK_PREVIEW_CHARS = 200
MAX_RESYNC_ATTEMPTS = 8
MAX_WRITE_BATCH = 64
PARSER_DEPTH = 200  # levels pydantic's JSON parser goes; a line nested deeper has at least as many characters


class StderrLog:
    """A server's stderr: appended to ``state_dir/logs/<key>.log`` as written, and logged at DEBUG
    with the ``secrets`` redacted (``--debug`` shows those lines on the terminal).

    Past ``max_bytes`` the file is moved to ``<key>.log.1`` (replacing the older one) and a new one
    begun, at start and while the server runs: a server flooding its stderr uses at most twice
    ``max_bytes`` of disk. The last lines are kept for error messages ("exited with code 1: <last
    lines>"), with the ``secrets`` (the server's environment values) redacted: the messages reach
    the terminal, events and telemetry.
    """

    def __init__(self, key: str, path: Path, secrets: tuple[str, ...] = (), *,
                 max_bytes: int = MAX_LOG_BYTES) -> None:
        self.key = key
        self.path = path
        self.secrets = secrets
        self.max_bytes = max_bytes
        self.tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._logger = logging.getLogger(f"runner.servers.stderr.{key}")
        self._file: TextIO | None = None
        self._size = 0  # bytes in the current file
        self._holding = False  # appends wait for the end of :meth:`held` to reach the file
        self._note_time = (0, "")  # the second of the last note, and its text: one isoformat a second

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tail.clear()  # error messages quote this spawn only
        self._size = self.path.stat().st_size if self.path.exists() else 0
        if self._size > self.max_bytes:
            self._begin_file()
        else:
            self._open_file()

    def write(self, line: str) -> None:
        self.tail.append(line)
        self._logger.debug("%s", redacted(line, self.secrets))
        self._append(line + "\n")

    def note(self, text: str) -> None:
        """A line from the runner itself (start, exit), marked so it is not mistaken for the server's."""
        now = datetime.now()
        second = int(now.timestamp())
        if self._note_time[0] != second:
            self._note_time = (second, now.isoformat(timespec="seconds"))
        self._append(f"--- mcp-run {self._note_time[1]}: {text}\n")

    @contextmanager
    def held(self) -> Iterator[None]:
        """The lines of the block reach the file together at its end (one write for a chunk of
        output, not one per line: a server flooding its output costs the runner less)."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            if self._file is not None:
                self._file.flush()

    def _append(self, text: str) -> None:
        if self._file is None:
            return
        self._file.write(text)
        if not self._holding:
            self._file.flush()
        self._size += len(text.encode("utf-8", errors="replace"))
        if self._size > self.max_bytes:
            self._file.close()
            self._begin_file()

    def _begin_file(self) -> None:
        self.path.replace(self.path.with_name(self.path.name + ".1"))  # keep one old file
        self._size = 0
        self._open_file()

    def _open_file(self) -> None:
        # Flushed after each line, or each chunk of output (:meth:`held`): readable while the run goes on.
        self._file = open(self.path, "a", encoding="utf-8", opener=private_opener)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def last_lines(self, count: int = 5) -> str:
        return redacted("\n".join(list(self.tail)[-count:]), self.secrets)


class StdioProcess:
    """One spawn of a stdio server. ``transport()`` is an ``mcp`` ``Transport`` for ``mcp.Client``.

    After exit, ``returncode`` is set and ``exited`` fires; the session's read stream ends at the
    same moment, so requests in flight fail at once instead of waiting for their timeouts.
    """

    def __init__(self, key: str, spec: StdioServerSpec, *, base_dir: Path, log: StderrLog) -> None:
        self.key = key
        self.spec = spec
        self.base_dir = base_dir
        self.log = log
        self.pid: int | None = None
        self.returncode: int | None = None
        self.exited = anyio.Event()
        self.kill_on_close = False  # stale servers: SIGKILL at once (kill_at_close)
        self.handshake_done = False  # only a server that answered once gets time to exit by itself
        self._process: anyio.abc.Process | None = None
        self.launch: Launch | None = None  # what was spawned: argv, and a container to remove
        self._group_watch: GroupWatch | None = None  # kills the group if the runner is killed
        # Every junk line is noted in the log file (rotated while running); a few reach the terminal.
        self._junk_warnings = RepeatedWarning(logger, key, "warnings about non-JSON-RPC output on stdout")

    def finished_handshake(self) -> None:
        """The server answered: at close it gets time to exit by itself."""
        self.handshake_done = True

    def kill_at_close(self) -> None:
        """The server is stale: at close it is killed at once."""
        self.kill_on_close = True

    def transport(self) -> Transport:
        return self._open()

    def exit_status(self) -> str:
        """``exited with code 3`` / ``was killed by SIGKILL``."""
        code = self.returncode
        if code is None:
            return "closed its stdout"
        if code < 0:
            return f"was killed by {_signal_name(-code)}"
        return f"exited with code {code}"

    def describe_exit(self, before: str | None = None) -> str:
        """The exit status (``before`` what, if given), plus the last stderr lines."""
        what = f"{self.exit_status()} before {before}" if before else self.exit_status()
        tail = self.log.last_lines()
        return f"{what}; last stderr lines:\n{tail}" if tail else f"{what} (no stderr output)"

    async def _spawn(self) -> anyio.abc.Process:
        with translated(Boundary(self.key, "starting")):
            self.launch = await prepare_launch(self.key, self.spec, self.base_dir)
        try:
            # Shielded: cancelled between the fork and the pipes' connection (a required server
            # failing while this one spawns), asyncio kills the child but leaves it unreaped, and
            # its child watcher then warns "Loop ... that handles pid N is closed" at exit.
            with anyio.CancelScope(shield=True):
                process = await open_child_process(
                    self.launch.command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=self.launch.cwd,
                    env=self.launch.env,
                    start_new_session=True,
                )
                self._group_watch = await self._watch_group(process.pid)
            return process
        except FileNotFoundError as exc:
            raise ServerStartError(
                self.key, f"command not found: {self.spec.command!r}", permanent=True
            ) from exc
        except PermissionError as exc:
            raise ServerStartError(
                self.key, f"command is not executable: {self.spec.command!r}", permanent=True
            ) from exc
        except OSError as exc:
            raise ServerStartError(
                self.key, f"cannot start {self.spec.command!r}: {exc.strerror or exc}", permanent=True
            ) from exc

    async def _watch_group(self, pgid: int) -> GroupWatch | None:
        try:
            return await watch_group(pgid)
        except OSError as exc:  # out of processes: the server runs, only a killed runner leaks more
            logger.warning("server %s: cannot watch its process group (%s); what it starts may "
                           "outlive a killed mcp-run", self.key, exc.strerror or exc)
            return None

    async def _end_group_watch(self) -> None:
        """The group is stopped: its watcher goes (before the group id can be reused)."""
        if self._group_watch is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(KILL_REAP_TIMEOUT):
                await self._group_watch.end()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[TransportStreams]:
        process = await self._spawn()
        # No await between the spawn and the task group: a cancellation there would leak the process.
        self._process = process
        self.pid = process.pid
        self.log.note(f"started pid {process.pid}")
        read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        # Unbounded: a server that stops reading stdin must not block the SDK's writes, or a timed-
        # out request would wait for its cancel notification to be written (5 s, shielded). Every
        # queued request ends at its own timeout, and the heartbeat kills a deaf server.
        write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](math.inf)
        stdout_closed = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_stdout, process, read_send, stdout_closed)
                tg.start_soon(self._read_stderr, process)
                tg.start_soon(self._write_stdin, process, write_receive, read_send)
                tg.start_soon(self._watch_exit, process, read_send, stdout_closed)
                try:
                    yield read_receive, write_send
                finally:
                    with anyio.CancelScope(shield=True):
                        write_send.close()
                        read_receive.close()
                        await self._stop(process)
                    tg.cancel_scope.cancel()
        finally:
            read_send.close()
            write_receive.close()

    async def _read_stdout(
        self,
        process: anyio.abc.Process,
        read_send: MemoryObjectSendStream[SessionMessage | Exception],
        stdout_closed: anyio.Event,
    ) -> None:
        assert process.stdout is not None
        pending: list[bytes] = []
        try:
            async for chunk in process.stdout:
                start = 0
                messages: list[SessionMessage] = []
                with self.log.held():  # the notes of a chunk's junk lines reach the file in one write
                    while (newline := chunk.find(b"\n", start)) != -1:
                        pending.append(chunk[start:newline])
                        line = b"".join(pending)
                        pending.clear()
                        start = newline + 1
                        if (message := self._parse(line)) is not None:
                            messages.append(message)
                for message in messages:
                    await read_send.send(message)
                if start < len(chunk):
                    pending.append(chunk[start:])
                    pending_bytes = sum(map(len, pending))
                    if pending_bytes > message_limits.MAX_MESSAGE_BYTES:  # endless output, no newline
                        # Keep the newest chunk: a message glued behind the junk may start in it.
                        dropped = pending_bytes - len(pending[-1])
                        del pending[:-1]
                        self._report_junk(f"<{dropped:,} bytes without a newline, dropped>")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass  # the session went away, or our own shutdown closed the pipe
        finally:
            self._junk_warnings.flush()
            stdout_closed.set()
            read_send.close()

    def _parse(self, raw: bytes) -> SessionMessage | None:
        """A JSON-RPC message from one stdout line; junk is logged and skipped.

        Junk printed without a newline glues itself to the front of the next message, so a line
        that does not parse is retried from each later ``{`` (a few times at most).
        """
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            return None
        # A message is a JSON object: the parser is tried from the first "{" on, and not at all on
        # a line without one (the common junk: a log line, a banner).
        start = line.find("{")
        for _ in range(MAX_RESYNC_ATTEMPTS if start != -1 else 0):
            try:
                message = jsonrpc_message_adapter.validate_json(line[start:], by_name=False)
            except ValidationError as exc:
                if (deep := _past_parser_depth(line[start:], exc)) is not None:
                    return deep
                start = line.find("{", start + 1)
                if start == -1:
                    break
                continue
            if start:
                self._report_junk(line[:start])
            return SessionMessage(message)
        self._report_junk(line)
        return None

    def _report_junk(self, junk: str) -> None:
        preview = junk[:JUNK_PREVIEW_CHARS]
        self.log.note(f"ignored non-JSON-RPC output on stdout: {preview!r}")
        self._junk_warnings.warn(
            f"server {self.key} wrote non-JSON-RPC output to stdout (ignored): {preview!r}"
        )

    async def _read_stderr(self, process: anyio.abc.Process) -> None:
        assert process.stderr is not None
        pending = b""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in process.stderr:
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > MAX_STDERR_LINE:  # output without newlines: log it in pieces
                    lines.append(pending)
                    pending = b""
                for line in lines:
                    self.log.write(line.decode("utf-8", errors="replace").rstrip("\r"))
        if pending:
            self.log.write(pending.decode("utf-8", errors="replace"))

    async def _write_stdin(
        self,
        process: anyio.abc.Process,
        write_receive: MemoryObjectReceiveStream[SessionMessage],
        read_send: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        assert process.stdin is not None
        try:
            async for message in write_receive:
                # Messages queued meanwhile go out in the same write: one pipe wake-up for the
                # server instead of one per message when many calls are in flight.
                batch = [message.message.model_dump_json(by_alias=True, exclude_unset=True)]
                with contextlib.suppress(anyio.WouldBlock):
                    while len(batch) < MAX_WRITE_BATCH:
                        queued = write_receive.receive_nowait()
                        batch.append(queued.message.model_dump_json(by_alias=True, exclude_unset=True))
                batch.append("")
                await process.stdin.send("\n".join(batch).encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading: end the session so requests fail instead of hanging.
            read_send.close()
        finally:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()

    async def _watch_exit(
        self,
        process: anyio.abc.Process,
        read_send: MemoryObjectSendStream[SessionMessage | Exception],
        stdout_closed: anyio.Event,
    ) -> None:
        self.returncode = await _wait_for_exit(process)
        self.log.note(f"pid {process.pid} {self.exit_status()}")
        # A child of the server may hold stdout open; the exit itself ends the session.
        with anyio.move_on_after(EOF_AFTER_EXIT_GRACE):
            await stdout_closed.wait()
        read_send.close()
        _kill_group(process.pid, signal.SIGKILL)  # nothing may outlive the server it belongs to
        await self._end_group_watch()
        self.exited.set()

    async def _stop(self, process: anyio.abc.Process) -> None:
        """Close stdin, then SIGTERM, then SIGKILL, each bounded; returns once the process is reaped.

        Runs shielded in the task that opened the transport; it cannot rely on the watcher task,
        which a cancelled lifetime scope cancels too.
        """
        exited = False
        if not self.kill_on_close:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                assert process.stdin is not None
                await process.stdin.aclose()
            grace = STDIN_CLOSE_GRACE if self.handshake_done else 0.0
            exited = await self._wait_exited(process, grace)
            if not exited:
                _kill_group(process.pid, signal.SIGTERM)
                exited = await self._wait_exited(process, TERMINATE_GRACE)
        if self.kill_on_close or not exited:
            _kill_group(process.pid, signal.SIGKILL)
            if not await self._wait_exited(process, KILL_REAP_TIMEOUT):
                logger.error("server %s (pid %d) survived SIGKILL; abandoning it", self.key, process.pid)
        _kill_group(process.pid, signal.SIGKILL)  # what the server spawned dies with it
        await self._end_group_watch()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.aclose()
        with anyio.move_on_after(KILL_REAP_TIMEOUT):
            await process.wait()  # let the event loop reap it: no zombie, no warning
        if self.returncode is None:
            self.returncode = process.returncode
        if self.launch is not None:
            await remove_container(self.launch)  # a killed engine client leaves its container running

    async def _wait_exited(self, process: anyio.abc.Process, timeout: float) -> bool:
        if self.exited.is_set() or process.returncode is not None:
            return True
        with anyio.move_on_after(timeout):
            self.returncode = await _wait_for_exit(process)
            return True
        return False


def _past_parser_depth(text: str, error: ValidationError) -> SessionMessage | None:
    """The message of a line too deep for pydantic's JSON parser (200 levels: a tool schema nested
    a hundred levels reaches them), read by Python's, which goes as deep as the stack allows; None
    when that is not why the line failed, or it fails again. The tools layer judges the depth."""
    if len(text) < PARSER_DEPTH or not any(item["type"] == "json_invalid" and "recursion limit" in item["msg"]
               for item in error.errors()):
        return None
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_python(json.loads(text), by_name=False))
    except (ValueError, RecursionError):  # not JSON, too deep even so, or not JSON-RPC
        return None


async def _wait_for_exit(process: anyio.abc.Process) -> int | None:
    """The exit status once the process has exited, without waiting for its pipes to close.

    ``Process.wait()`` also waits for pipe EOF, which a surviving grandchild can delay forever;
    a pidfd (Linux) says exactly when the process itself is gone.
    """
    pidfd = _open_pidfd(process.pid)
    if pidfd is None:
        while process.returncode is None:  # noqa: ASYNC110 - nothing to wait on without a pidfd
            await anyio.sleep(EXIT_POLL_INTERVAL)
        return process.returncode
    try:
        await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)
    if process.returncode is not None:
        return process.returncode
    return _peek_exit_status(process.pid)


def _open_pidfd(pid: int) -> int | None:
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _peek_exit_status(pid: int) -> int | None:
    """The exit status of a finished child, leaving it for the event loop to reap (WNOWAIT)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None  # already reaped by the event loop; its returncode will say
    if info is None:
        return None
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status


def _kill_group(pid: int, sig: signal.Signals) -> None:
    if sys.platform == "win32":  # pragma: no cover - no process groups; the SDK's job objects differ
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
