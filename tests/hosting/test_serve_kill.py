"""`kill -9` of mcp-run (serving, or a one-shot run in the middle of a turn) leaves no server behind,
even one that ignores the end of its input and SIGTERM (``tests/mcp_servers/undying.py``): the kernel
kills each server when the runner dies."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import psutil
from builders import ROOT, SERVERS, write_manifest
from mcp_servers import gates as gates_server
from serving import call_message, http_agent

GONE_WAIT = 10.0  # seconds for the kernel to deliver the death signal and the child to be reaped


def undying_agent(folder: Path, gates_url: str) -> Path:
    return write_manifest(folder, {"undying": {"command": sys.executable,
                                               "args": [str(SERVERS / "undying.py")]},
                                   "gates": {"url": gates_url}}, name="undying", model="offline")


def assert_gone(children: list[psutil.Process]) -> None:
    assert children, "the undying server runs as a child of mcp-run"
    gone, alive = psutil.wait_procs(children, timeout=GONE_WAIT)
    try:
        assert alive == [], f"still running after mcp-run was killed: {[p.cmdline() for p in alive]}"
    finally:
        for process in alive:
            process.kill()


def test_kill_9_of_mcp_run_serve_kills_a_server_that_ignores_the_end_of_its_input(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    _, url = gates
    with http_agent(undying_agent(tmp_path, url)) as served:
        children = psutil.Process(served.process.pid).children()
        served.process.send_signal(signal.SIGKILL)
        served.process.wait(timeout=30)
    assert_gone(children)


def test_kill_9_of_a_one_shot_run_mid_turn_kills_its_servers(
    tmp_path: Path, gates: tuple[gates_server.Gates, str]
) -> None:
    log, url = gates
    manifest = undying_agent(tmp_path, url)
    process = subprocess.Popen([sys.executable, "-m", "runner", str(manifest), "-p",
                                call_message("gates__hold", key="k")], cwd=ROOT,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log.wait_for("enter k")  # the turn is running: every server is up
        children = psutil.Process(process.pid).children()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        log.open("k")
    assert_gone(children)
