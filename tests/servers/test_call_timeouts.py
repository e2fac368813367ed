"""A timed-out call is reported when its timeout fires (while the server it leaves busy still
runs), and that server is then stopped, with whatever it spawned (here a child that ignores
SIGTERM)."""

from __future__ import annotations

import os
import queue
import select
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import yaml
from builders import TESTS

TIMEOUT = 2.0
SHUTDOWN_BOUND = 60.0  # stdin closed, SIGTERM, SIGKILL to the group: a generous bound on waiting
START_BOUND = 60.0


def test_a_timed_out_call_is_reported_when_the_timeout_fires_and_leaves_no_process(tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    agent = {
        "version": 1, "name": "timeouts",
        "servers": {"spawn": {
            "command": sys.executable, "args": [str(TESTS / "mcp_servers" / "spawning.py")],
            "env": {"SPAWNING_STARTED_FIFO": str(fifo)}, "timeout": f"{TIMEOUT:g}s",
        }},
    }
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(agent))
    started = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # no writer yet: select waits for one
    process = subprocess.Popen(
        [sys.executable, "-m", "runner", "call", "agent.yaml", "spawn__run_stubborn_child", "{}"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[tuple[bool, str]] = queue.Queue()  # was the child alive when it came?
    child_pid: list[int] = []

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put((bool(child_pid) and _alive(child_pid[0]), line))
        lines.put((False, ""))

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        readable, _, _ = select.select([started], [], [], START_BOUND)
        assert readable, "the tool never started"
        child = int(os.read(started, 64).split()[0])
        child_pid.append(child)
        child_alive, line = lines.get(timeout=TIMEOUT + SHUTDOWN_BOUND)
        assert "timed out after 2s" in line, line
        assert child_alive, "the timeout was reported only after the server was stopped"
        assert process.wait(timeout=SHUTDOWN_BOUND) == 1
        assert not _alive(child)
    finally:
        os.close(started)
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=5)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
