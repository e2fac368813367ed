"""Stdio server processes are tied to the runner's life, without forking the whole runner.

The kill -9 case itself is tested end to end in tests/hosting/test_serve_kill.py; these tests pin the pieces:
the guard that closes the window before the death signal is set, and the errors a command that
cannot run still gives before anything is spawned.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

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
