"""Shutdown: Ctrl-C or SIGTERM while servers start or while a call runs - the runner exits in
bounded time and takes every process it started with it, grandchildren included.

The runner runs in a pseudo-terminal (Ctrl-C is the terminal's, sent to the foreground process
group) with ``--debug``, so the servers' stderr lines tell the test when to strike.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pexpect
import psutil
import pytest

from reliability.support import POLL_INTERVAL, demo, wait_gone, wire, write_manifest

STOP_BOUND = 15.0  # from the signal to the runner's exit, every server stopped on the way
SERVERS_STARTED = 30.0

PHASES = {
    # Start-up: one server has started, the other is still starting; each has a child of its own.
    "start-up": ({"ready": wire("--spawn-child"),
                  "slow": wire("--slow-start", "60", "--spawn-child", startup_timeout="120s")},
                 "ready__echo {}", "slow start: sleeping", 4),
    # A call: the tool never answers; the demo server stands by.
    "call": ({"w": wire("--spawn-child"), "d": demo()}, "w__hang {}", "received tools/call", 3),
}


def processes_below(pid: int, count: int, timeout: float) -> list[int]:
    """The processes below ``pid`` once there are ``count`` of them (polled, bounded)."""
    deadline = time.monotonic() + timeout
    while len(found := psutil.Process(pid).children(recursive=True)) < count:
        assert time.monotonic() < deadline, f"only {len(found)} of {count} processes started"
        time.sleep(POLL_INTERVAL)
    return [child.pid for child in found]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("phase", list(PHASES))
def test_a_signal_stops_the_runner_and_every_process_it_started(
    tmp_path: Path, phase: str, signum: signal.Signals
) -> None:
    servers, prompt, cue, processes = PHASES[phase]
    write_manifest(tmp_path, servers)
    run = pexpect.spawn(sys.executable, ["-m", "runner", "--debug", "agent.yaml", "-p", prompt],
                        cwd=str(tmp_path), encoding="utf-8", codec_errors="replace",
                        timeout=SERVERS_STARTED, maxread=65536)
    try:
        run.expect_exact(cue)
        started = processes_below(run.pid, processes, timeout=SERVERS_STARTED)
        if signum == signal.SIGINT:
            run.sendintr()
        else:
            run.kill(signum)
        run.expect(pexpect.EOF, timeout=STOP_BOUND)
    finally:
        run.close(force=True)
    assert wait_gone(started, timeout=2.0) == []
    assert run.exitstatus == 128 + int(signum) or run.signalstatus == int(signum)
