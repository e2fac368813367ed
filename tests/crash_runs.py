"""Runs of an agent killed (``kill -9``) in the middle of a turn, on the ``steps.py`` server whose
tool counts what ran and holds a call until the kill; SQLite state in the test's folder.

    manifest(folder, model=...)                       # folder/agent.yaml
    with killed_while_held(folder, "x.held", "-p", "go", "--thread", "t"): ...
    done(folder)                                      # the steps whose tool call ran, in order
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import yaml
from builders import COMMAND_LIMIT, MCP_RUN, SERVERS

HELD_LIMIT = 60.0  # seconds the test waits for the held tool call to start
POLL = 0.05  # seconds between two looks at the marker file


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def write_scripts(folder: Path, scripts: dict[str, list[Any]]) -> None:
    for name, script in scripts.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(script))


def manifest(folder: Path, agents: dict[str, Any] | None = None, **top: Any) -> None:
    steps = {"command": "python", "args": [str(SERVERS / "steps.py"), "--folder", str(folder)]}
    document = {"version": 1, "name": "crash", "model": {"id": "scripted", "script": "main.yaml"},
                "checkpointer": "sqlite:///state.sqlite", "servers": {"steps": steps}}
    document |= top
    if agents is not None:
        document["agents"] = agents
    (folder / "agent.yaml").write_text(yaml.safe_dump(document, sort_keys=False))


def done(folder: Path) -> list[str]:
    path = folder / "done"
    return path.read_text().split() if path.exists() else []


@contextmanager
def killed_while_held(folder: Path, marker: str, *args: str) -> Iterator[None]:
    """``mcp-run agent.yaml ARGS`` started, then killed with SIGKILL once the tool call that writes
    ``marker`` runs; the processes it started must end by themselves (no orphan)."""
    process = subprocess.Popen([str(MCP_RUN), "agent.yaml", *args], cwd=folder, text=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + HELD_LIMIT
        while not (folder / marker).exists():  # a condition polled, with a bound
            assert process.poll() is None, "the run ended before its tool call was held"
            assert time.monotonic() < deadline, "the held tool call never started"
            time.sleep(POLL)
        children = psutil.Process(process.pid).children(recursive=True)
        assert children  # the steps server
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=COMMAND_LIMIT)
        # The server sees its stdin close and leaves: nothing is left running.
        _, alive = psutil.wait_procs(children, timeout=COMMAND_LIMIT)
        assert not alive, f"orphans left by the killed run: {alive}"
        yield
    finally:
        for child in children:
            if child.is_running():
                child.kill()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=COMMAND_LIMIT)
