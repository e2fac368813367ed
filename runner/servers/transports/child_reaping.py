"""Server processes that die with the runner, even when it is killed with SIGKILL.

A stdio server is told to stop by closing its stdin, then by signals to its process group; none of
that happens when the runner itself is killed (``kill -9``, the OOM killer), and many servers do not
exit on end of input. On Linux each child therefore asks the kernel, between fork and exec, for
SIGKILL when its parent goes (``prctl(PR_SET_PDEATHSIG)``). The kernel ties that to the *thread*
that forked, so children are spawned only from the event loop's thread (asyncio forks there), which
lives as long as the runner. ``bwrap`` (the sandbox) adds ``--die-with-parent`` for what it runs.

Asking between fork and exec takes a ``preexec_fn``, and with one Python forks the whole process
instead of using vfork: tens of milliseconds per server in a runner of 100-300 MB, during which the
event loop is blocked. Where util-linux's ``setpriv`` exists (it does on Debian and most Linux
systems) the child therefore runs ``setpriv --pdeathsig KILL -- /bin/sh -c GUARD ppid COMMAND...``:
setpriv asks for the signal and execs a shell that exits if its parent is no longer the runner (it
died before the request took hold) and otherwise execs the command (through ``env``, which puts
back what the shell changed in the environment), all in the one process. The
command is looked up before the spawn, so a missing or non-executable one fails as before.

The death signal reaches the server only: what it spawned (``sh -c "sleep 60 & exec server"``) would
be left to init. Each server runs in its own process group, and :func:`watch_group` starts beside it
a small shell, in a session of its own, that holds the read end of a pipe from the runner: when the
runner dies the pipe closes and the shell kills the whole group. The runner ends the watcher itself
as soon as it has stopped the group, so a recycled group id is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.abc

from runner import sdk

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # a libc without prctl: the other stops still apply
        return None


_PRCTL = _prctl()  # looked up here: after fork only async-signal-safe work is allowed
_SHELL = "/bin/sh"
_SHELL_RUNS = sys.platform != "win32" and os.access(_SHELL, os.X_OK)  # once: not in the event loop
_ENV = shutil.which("env")
_SETPRIV = shutil.which("setpriv") if _PRCTL is not None and _ENV is not None and _SHELL_RUNS else None
# What a shell may add to the environment of what it runs: removed again (by env) unless given,
# so a server sees exactly the environment the runner gave it.
_SHELL_VARIABLES = ("PWD", "OLDPWD", "SHLVL", "_")
# $0 is the runner's pid; "$@" the command. 125: the parent went before the death signal was set.
_GUARD = '[ "$PPID" = "$0" ] || exit 125; exec "$@"'


# $0 is the group id. ``read`` returns at end of input: the runner (the pipe's only writer) is gone.
_GROUP_WATCH = 'read -r _ || kill -s KILL -- "-$0"'


class GroupWatch:
    """The process that kills group ``pgid`` if the runner dies first; :meth:`end` it once the
    group is stopped."""

    def __init__(self, pgid: int, process: anyio.abc.Process) -> None:
        self.pgid = pgid
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    async def end(self) -> None:
        """Kill the watcher (the group is the runner's to stop) and reap it; call shielded."""
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        if self._process.stdin is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await self._process.stdin.aclose()
        await self._process.wait()


async def watch_group(pgid: int) -> GroupWatch | None:
    """A :class:`GroupWatch` of process group ``pgid``; None where there is no POSIX shell."""
    if not _SHELL_RUNS:  # pragma: no cover - Linux CI
        return None
    # Its own session: a Ctrl-C (or a kill of the runner's group) must not end it before the runner.
    process = await sdk.open_process([_SHELL, "-c", _GROUP_WATCH, str(pgid)], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
    return GroupWatch(pgid, process)


def _death_signal_for(parent: int) -> Callable[[], None]:
    def in_child() -> None:
        assert _PRCTL is not None
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the request took hold
            os.kill(os.getpid(), signal.SIGKILL)

    return in_child


async def open_child_process(command: Sequence[str], **options: Any) -> anyio.abc.Process:
    """``anyio.open_process(command, **options)``, the child killed when this process dies (Linux)."""
    if _SETPRIV is not None:
        # In a worker thread: it looks at the file system, which an event loop must not wait on.
        await anyio.to_thread.run_sync(_check_command, command[0], options.get("env"), options.get("cwd"))
        command = [_SETPRIV, "--pdeathsig", "KILL", "--", _SHELL, "-c", _GUARD, str(os.getpid()),
                   *_without_shell_variables(options.get("env")), *command]
    elif _PRCTL is not None:
        # anyio's own open_process has no preexec_fn; its backend passes the option to Popen.
        options["preexec_fn"] = _death_signal_for(os.getpid())
    return await sdk.open_process(command, **options)


def _without_shell_variables(env: dict[str, str] | None) -> list[str]:
    """``env -u NAME ... NAME=VALUE ...``: the shell's variables as ``env`` has them (nothing to
    restore when the child inherits the runner's environment)."""
    if env is None:
        return []
    assert _ENV is not None
    unset = [part for name in _SHELL_VARIABLES if name not in env for part in ("-u", name)]
    given = [f"{name}={env[name]}" for name in _SHELL_VARIABLES if name in env]
    return [_ENV, *unset, *given]


def _check_command(name: str, env: dict[str, str] | None, cwd: Any) -> None:
    """Raise what ``Popen`` would for a command it cannot run (the shell would only exit 126/127)."""
    if os.sep in name:
        path = name if cwd is None else os.path.join(os.fspath(cwd), name)
        if not os.path.exists(path):
            raise FileNotFoundError(2, "No such file or directory", name)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(13, "Permission denied", name)
        return
    search = os.pathsep.join(os.get_exec_path(env))
    if shutil.which(name, path=search) is None:
        anywhere = shutil.which(name, mode=os.F_OK, path=search)
        if anywhere is not None and not os.path.isdir(anywhere):
            raise PermissionError(13, "Permission denied", name)
        raise FileNotFoundError(2, "No such file or directory", name)
