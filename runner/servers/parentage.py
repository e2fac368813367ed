"""Server processes that die with the runner, even when it is killed with SIGKILL.

A stdio server is told to stop by closing its stdin, then by signals to its process group; none of
that happens when the runner itself is killed (``kill -9``, the OOM killer), and many servers do not
exit on end of input. On Linux each child therefore asks the kernel, between fork and exec, for
SIGKILL when its parent goes (``prctl(PR_SET_PDEATHSIG)``). The kernel ties that to the *thread*
that forked, so children are spawned only from the event loop's thread (asyncio forks there), which
lives as long as the runner. ``bwrap`` (the sandbox) adds ``--die-with-parent`` for what it runs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio.abc
from anyio._core._eventloop import get_async_backend

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # a libc without prctl: the other stops still apply
        return None


_PRCTL = _prctl()  # looked up here: after fork only async-signal-safe work is allowed


def _death_signal_for(parent: int) -> Callable[[], None]:
    def in_child() -> None:
        assert _PRCTL is not None
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the request took hold
            os.kill(os.getpid(), signal.SIGKILL)

    return in_child


async def open_child_process(command: Sequence[str], **options: Any) -> anyio.abc.Process:
    """``anyio.open_process(command, **options)``, the child killed when this process dies (Linux)."""
    if _PRCTL is not None:
        # anyio's own open_process has no preexec_fn; its backend passes the option to Popen.
        options["preexec_fn"] = _death_signal_for(os.getpid())
    return await get_async_backend().open_process(command, **options)
