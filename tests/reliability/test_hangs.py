"""Hang: tools that never answer, a server that answers only some requests, one that stops reading.

Each call ends at its configured timeout (not before it), as a typed error naming that timeout,
and the server is told to stop working on it; answered requests are matched to their callers while
others hang; a call on a server that dies ends as the server's death, not as its timeout.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from reliability.support import ServerRequests, server_requests, still_running, wire, write_manifest
from runner.agent.runtime import Runtime, load_agent
from runner.errors import ServerClosedError, ServerTimeoutError, ToolError

pytestmark = pytest.mark.anyio

SERVER_TIMEOUT = 2.5
HANG_TIMEOUT = 1.5
EARLY = 0.9  # a timeout is not reported before this share of it has passed (clocks differ a little)


async def test_hanging_calls_time_out_at_their_configured_timeout_and_answered_ones_match(
    tmp_path: Path,
) -> None:
    path = write_manifest(tmp_path, {
        "w": wire(timeout=f"{SERVER_TIMEOUT}s", tools={"timeouts": {"hang": f"{HANG_TIMEOUT}s"}}),
    })
    outcomes: dict[str, tuple[float, object]] = {}
    with server_requests("w") as requests:
        async with load_agent(path) as runtime:
            await check_hanging_calls(runtime, requests, outcomes)
    for label, (seconds, outcome) in outcomes.items():
        kind, _, number = label.partition(" ")
        if kind == "sometimes" and int(number) % 2 == 0:
            assert outcome == f"wire: {number}", label
            continue
        timeout = HANG_TIMEOUT if kind == "hang" else SERVER_TIMEOUT
        assert isinstance(outcome, ToolError), label
        assert isinstance(outcome.__cause__, ServerTimeoutError), label
        assert outcome.__cause__.timeout == timeout
        assert seconds >= timeout * EARLY, (label, seconds)


async def check_hanging_calls(
    runtime: Runtime, requests: ServerRequests, outcomes: dict[str, tuple[float, object]]
) -> None:

    async def call(label: str, tool: str, arguments: dict) -> None:
        began = anyio.current_time()
        try:
            outcome: object = (await runtime.caller.call(tool, arguments)).content
        except ToolError as exc:
            outcome = exc
        outcomes[label] = (anyio.current_time() - began, outcome)

    async with anyio.create_task_group() as group:
        for index in range(3):
            group.start_soon(call, f"hang {index}", "w__hang", {})
        for n in range(8):  # the server answers even n only
            group.start_soon(call, f"sometimes {n}", "w__sometimes", {"n": n})
    # Every abandoned request was cancelled on the server (notifications/cancelled).
    with anyio.fail_after(5):
        await requests.wait_for("notifications/cancelled", 3 + 4)
    answer = await runtime.caller.call("w__echo", {"text": "still serving"})
    assert answer.content == "wire: still serving"


async def test_a_server_that_stops_reading_times_calls_out_and_is_restarted_as_stale(
    tmp_path: Path,
) -> None:
    path = write_manifest(tmp_path, {
        "deaf": wire(timeout="1s", heartbeat={"interval": "300ms", "stale_after": "2s"},
                     restart={"max_attempts": 3, "backoff": "50ms", "max_backoff": "50ms"}),
    })
    async with load_agent(path) as runtime:
        deaf = runtime.fleet.connections["deaf"]
        pid = deaf.pid
        assert pid is not None
        assert (await deaf.call_tool("stop_reading", {})).content[0].text == "no longer reading"
        failures: list[tuple[float, BaseException]] = []

        async def call(text: str) -> None:
            began = anyio.current_time()
            with pytest.raises((ServerTimeoutError, ServerClosedError)) as raised:
                await deaf.call_tool("echo", {"text": text})
            failures.append((anyio.current_time() - began, raised.value))

        async with anyio.create_task_group() as group:
            group.start_soon(call, "x" * 300_000)  # more than a pipe holds: the write itself blocks
            for index in range(5):
                group.start_soon(call, f"small {index}")
        assert len(failures) == 6
        timeouts = [error for _, error in failures if isinstance(error, ServerTimeoutError)]
        assert all(error.timeout == 1 for error in timeouts), failures  # the call's own timeout

        with anyio.fail_after(15):  # the heartbeat finds it stale, kills it, starts a new one
            await deaf.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
        assert isinstance(deaf.last_incident, ServerTimeoutError)
        assert await still_running([pid]) == []
        assert (await deaf.call_tool("echo", {"text": "heard"})).content[0].text == "wire: heard"


async def test_a_server_that_dies_mid_call_ends_the_call_at_once(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, {"w": wire(timeout="30s")})
    with server_requests("w") as requests:
        async with load_agent(path) as runtime:
            await check_death_mid_call(runtime, requests)


async def check_death_mid_call(runtime: Runtime, requests: ServerRequests) -> None:
    connection = runtime.fleet.connections["w"]
    async with anyio.create_task_group() as group:

        async def hang() -> None:
            with pytest.raises(ToolError) as raised:
                await runtime.caller.call("w__hang", {})
            assert isinstance(raised.value.__cause__, ServerClosedError)

        group.start_soon(hang)
        with anyio.fail_after(10):
            await requests.wait_for("tools/call", 1)
        with pytest.raises(ServerClosedError):
            await connection.call_tool("exit", {"code": 9})
    with anyio.fail_after(15):
        await connection.wait_until(lambda c: c.sessions == 2 and c.status == "ready")
    assert "exited with code 9" in str(connection.last_incident)
    assert (await runtime.caller.call("w__echo", {"text": "back"})).content == "wire: back"
