"""Output nobody reads any more: ``mcp-run … | head -1`` ends like any command-line tool.

A write to a pipe whose reader has gone raises ``BrokenPipeError`` (Python ignores SIGPIPE). The
command group catches it wherever it comes from (:func:`is_broken_pipe`), and
:func:`exit_at_closed_output` points stdout and stderr at /dev/null (so that nothing more is tried,
not even the interpreter's last flush) and exits 141: 128 + SIGPIPE, what a shell reports for a
tool that SIGPIPE stopped, and the README's rule for a signal that stops mcp-run. The servers are
stopped on the way out, as for any error.

A command that waits without writing (the chat waiting for input, ``watch`` waiting for an edit,
a turn waiting for the model) would not notice: :func:`stop_when_output_closes` ends its block as
soon as the reader of stdout or stderr goes, when they are pipes.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import NoReturn

import anyio

from runner.task_groups import background_tasks

EXIT_BROKEN_PIPE = 128 + int(signal.SIGPIPE)
_OUTPUT_FDS = (1, 2)  # stdout, stderr


def is_broken_pipe(error: BaseException) -> bool:
    """Whether ``error`` is a write to a closed pipe (alone, or every error of an exception group)."""
    if isinstance(error, BaseExceptionGroup):
        return all(is_broken_pipe(inner) for inner in error.exceptions)
    return isinstance(error, BrokenPipeError)


def exit_at_closed_output() -> NoReturn:
    """Stop writing anywhere and exit 141."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in _OUTPUT_FDS:
        os.dup2(devnull, fd)
    os.close(devnull)
    raise SystemExit(EXIT_BROKEN_PIPE)


@dataclass
class OutputStop:
    """Whether :func:`stop_when_output_closes` ended its block."""

    closed: bool = False

    def reader_gone(self) -> None:
        self.closed = True

    def raise_if_closed(self) -> None:
        """After the block: what the next write would raise, if it ended for a closed reader."""
        if self.closed:
            raise BrokenPipeError(errno.EPIPE, "the reader of the output has gone")


def _pipes() -> list[int]:
    pipes = []
    for fd in _OUTPUT_FDS:
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                pipes.append(fd)
        except OSError:  # not open: nothing to watch
            continue
    return pipes


def _wait_for_closed_reader(fds: list[int], wake: int) -> bool:
    """Block until the reader of one of ``fds`` (pipes' write ends) goes (True) or ``wake`` is
    readable (False). A write end reports POLLERR once no reader is left; no event is asked for."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, 0)
    poller.register(wake, select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            return fd != wake


@asynccontextmanager
async def stop_when_output_closes() -> AsyncIterator[OutputStop]:
    """End the block (by cancelling it) when the reader of stdout or stderr goes; the outcome
    says whether it did. Nothing is watched where they are no pipes (a terminal, a file)."""
    outcome = OutputStop()
    fds = _pipes()
    if not fds or not hasattr(select, "poll"):
        yield outcome
        return
    wake_read, wake_write = os.pipe()
    try:
        async with background_tasks() as task_group:
            with anyio.CancelScope() as body:

                async def watch() -> None:
                    if await anyio.to_thread.run_sync(_wait_for_closed_reader, fds, wake_read):
                        outcome.reader_gone()
                        body.cancel()

                task_group.start_soon(watch)
                try:
                    yield outcome
                finally:
                    os.write(wake_write, b"x")  # the waiting thread returns
    finally:
        os.close(wake_read)
        os.close(wake_write)
