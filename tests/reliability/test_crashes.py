"""Crash: a stdio server killed with SIGKILL during calls, a hundred times in a row.

Every call in flight ends - through the fallback when the manifest names one, with a typed error
otherwise - well within its timeout; the server is back after its backoff; no call is lost and
none is answered twice, which the fallback server's own request count confirms.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from reliability.support import ServerRequests, server_requests, still_running, wire, write_manifest
from runner.agent.runtime import Runtime, load_agent
from runner.errors import ErrorKind, ServerClosedError, ServerError

pytestmark = pytest.mark.anyio

CRASHES = 100
CALLS_PER_CRASH = 3  # through the catalog (with a fallback) and as many straight to the connection
# Far beyond any wait the test allows a call (CALL_WAIT): a call on a killed server must end
# because it died, not because its timeout fired.
CALL_TIMEOUT = 600.0
CALL_WAIT = 60.0  # a generous bound on waiting for one call to end, on a loaded machine
BACKOFF, MAX_BACKOFF = 0.02, 0.08
START_ALLOWANCE = 5.0  # spawning a Python process and the handshake, on a loaded CI machine


def restart_delay(attempt: int) -> float:
    """The supervisor's delay before restart ``attempt`` (1-based), from the manifest's settings."""
    return min(BACKOFF * 2 ** (attempt - 1), MAX_BACKOFF)


@dataclass
class Round:
    """The calls of one crash: what each ended with (each within CALL_WAIT)."""

    outcomes: dict[str, object] = field(default_factory=dict)

    async def through_catalog(self, runtime: Runtime, text: str) -> None:
        with anyio.fail_after(CALL_WAIT):
            output = await runtime.caller.call("crashy__echo", {"text": text})
        self.outcomes[text] = output.content

    async def straight(self, runtime: Runtime, text: str) -> None:
        try:
            with anyio.fail_after(CALL_WAIT):
                await runtime.fleet.connections["crashy"].call_tool("echo", {"text": text},
                                                                    timeout=CALL_TIMEOUT)
        except ServerError as exc:
            self.outcomes[text] = exc


async def crash_during_calls(runtime: Runtime, requests: ServerRequests, crash: int) -> Round:
    """Start the calls, SIGKILL crashy once it has read them all, wait for it to come back."""
    crashy = runtime.fleet.connections["crashy"]
    pid = crashy.pid
    assert pid is not None
    calls = Round()
    already_read = requests.counts["tools/call"]
    async with anyio.create_task_group() as group:
        for index in range(CALLS_PER_CRASH):
            group.start_soon(calls.through_catalog, runtime, f"{crash}.{index}")
            group.start_soon(calls.straight, runtime, f"{crash}.direct.{index}")
        with anyio.fail_after(10):
            await requests.wait_for("tools/call", already_read + 2 * CALLS_PER_CRASH)
        killed_at = anyio.current_time()
        os.kill(pid, signal.SIGKILL)
    delay = restart_delay(crash)
    with anyio.fail_after(delay + START_ALLOWANCE):
        await crashy.wait_until(lambda connection: connection.sessions == crash + 1)
        await crashy.wait_for_status("ready")
    assert anyio.current_time() - killed_at >= delay  # it waited its backoff: no restart storm
    assert await still_running([pid]) == []
    return calls


async def test_a_hundred_kills_during_calls_lose_no_call_and_answer_none_twice(tmp_path: Path) -> None:
    restart = {"max_attempts": 1000, "backoff": f"{BACKOFF}s", "max_backoff": f"{MAX_BACKOFF}s"}
    path = write_manifest(tmp_path, {
        # crashy's echo takes a minute: every call is still in flight when the server dies.
        "crashy": wire("--name", "crashy", "--echo-delay", "60000", fallback="backup",
                       timeout=f"{CALL_TIMEOUT}s", restart=restart),
        "backup": wire("--name", "backup", expose=False),
    })
    answered_by_backup = closed_errors = 0
    with server_requests("crashy") as requests, server_requests("backup") as backup_requests:
        async with load_agent(path) as runtime:
            for crash in range(1, CRASHES + 1):
                calls = await crash_during_calls(runtime, requests, crash)
                assert len(calls.outcomes) == 2 * CALLS_PER_CRASH, f"crash {crash}: a call was lost"
                for text, outcome in calls.outcomes.items():
                    if ".direct." in text:
                        assert isinstance(outcome, ServerClosedError), (crash, text, outcome)
                        assert outcome.server == "crashy" and outcome.kind is ErrorKind.TRANSIENT
                        closed_errors += 1
                    else:
                        assert outcome == f"backup: {text}", (crash, text, outcome)
                        answered_by_backup += 1
                later = await runtime.caller.call("crashy__echo", {"text": "later", "delay_ms": 0})
                assert later.content == "crashy: later"
            # One fallback request per call that lost its primary: none was sent twice.
            with anyio.fail_after(10):
                await backup_requests.wait_for("tools/call", answered_by_backup)
            assert backup_requests.counts["tools/call"] == answered_by_backup
            crashy = runtime.fleet.connections["crashy"]
            assert (crashy.restarts, crashy.sessions) == (CRASHES, CRASHES + 1)
    assert answered_by_backup == closed_errors == CALLS_PER_CRASH * CRASHES
