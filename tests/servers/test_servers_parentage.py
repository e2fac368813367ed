"""Stdio server processes are tied to the runner's life, without forking the whole runner.

The kill -9 case itself is tested end to end in tests/hosting/test_serve_kill.py (here: what a server
spawned, which the group watcher ends); these tests pin the pieces:
the guard that closes the window before the death signal is set, and the errors a command that
cannot run still gives before anything is spawned.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import psutil
import pytest
from builders import SERVERS, write_manifest
from serving import http_agent

from runner.servers.transports import child_reaping as parentage

pytestmark = pytest.mark.anyio

needs_setpriv = pytest.mark.skipif(parentage._SETPRIV is None, reason="util-linux's setpriv is not installed")


async def _run(command: list[str], **options: object) -> tuple[int, str]:
    process = await parentage.open_child_process(command, stdin=None, stdout=subprocess.PIPE,
                                                 stderr=None, **options)
    with anyio.fail_after(10):
        assert process.stdout is not None
        output = b"".join([chunk async for chunk in process.stdout])
        code = await process.wait()
    return code, output.decode()


@needs_setpriv
async def test_a_child_runs_its_command_in_the_spawned_process_itself() -> None:
    code, output = await _run(["sh", "-c", 'echo "$$ $PPID"'])
    pid, parent = output.split()
    assert code == 0 and int(parent) == os.getpid() and int(pid) > 0


@needs_setpriv
def test_the_guard_refuses_to_run_the_command_when_its_parent_is_not_the_runner(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    guard = [parentage._SETPRIV, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", parentage._GUARD]
    done = subprocess.run([*guard, "1", "touch", str(marker)], timeout=10)  # 1: not our pid
    assert done.returncode == 125 and not marker.exists()
    done = subprocess.run([*guard, str(os.getpid()), "touch", str(marker)], timeout=10)
    assert done.returncode == 0 and marker.exists()


async def test_a_missing_command_fails_before_anything_is_spawned() -> None:
    with pytest.raises(FileNotFoundError):
        await parentage.open_child_process(["mcp-run-no-such-command"], env={"PATH": os.environ["PATH"]})
    with pytest.raises(FileNotFoundError):
        await parentage.open_child_process(["./no-such-script"])


async def test_a_command_that_is_not_executable_fails_with_permission_denied(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(PermissionError):
        await parentage.open_child_process([str(script)])
    with pytest.raises(PermissionError):
        await parentage.open_child_process(["server.sh"], env={"PATH": str(tmp_path)})
    script.chmod(0o755)
    code, output = await _run(["./server.sh"], cwd=tmp_path)
    assert (code, output) == (0, "hi\n")


@needs_setpriv
async def test_a_child_sees_exactly_the_environment_it_was_given() -> None:
    code, output = await _run(["/usr/bin/env"], env={"ONLY": "this"})
    assert (code, output) == (0, "ONLY=this\n")
    code, output = await _run(["/usr/bin/env"], env={"ONLY": "this", "PWD": "/given"})
    assert code == 0 and sorted(output.split()) == ["ONLY=this", "PWD=/given"]


SPAWNED_SLEEP = "4321"


def _spawned_sleeps(root: psutil.Process) -> list[psutil.Process]:
    return [child for child in root.children(recursive=True)
            if child.name() == "sleep" and SPAWNED_SLEEP in child.cmdline()]


def test_what_a_server_spawned_dies_when_mcp_run_is_killed_with_sigkill(tmp_path: Path) -> None:
    # The attacker's server: a grandchild the kernel's death signal (set on the server only) misses.
    server = shlex.join([sys.executable, str(SERVERS / "demo.py")])
    command = f"sleep {SPAWNED_SLEEP} & exec {server}"
    manifest = write_manifest(tmp_path, {"spawner": {"command": "/bin/sh", "args": ["-c", command]}},
                              name="spawner", model="offline")
    with http_agent(manifest) as served:
        runner = psutil.Process(served.process.pid)
        sleeps = _spawned_sleeps(runner)
        served.process.send_signal(signal.SIGKILL)
        served.process.wait(timeout=30)
    assert len(sleeps) == 1, "the server started its sleep before mcp-run listened"
    gone, alive = psutil.wait_procs(sleeps, timeout=10)
    try:
        assert [process for process in alive if process.status() != psutil.STATUS_ZOMBIE] == []
    finally:
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
